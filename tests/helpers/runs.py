"""A contract run by the CLI's command in this process, read back from its JSON report."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kcontract.cli import cli


def gate_run(tmp_path: Path, contract_text: str, seed: int, gate: int) -> tuple[dict, str]:
    """Run `gate` of a contract at `seed`, passing (known findings allowed); its JSON report and what it printed."""
    contract = tmp_path / "c.yaml"
    contract.write_text(contract_text.replace("seed: 1", f"seed: {seed}"))
    report = tmp_path / "run.json"
    done = CliRunner().invoke(cli, ["run", "--contract", str(contract), "--gate", str(gate), "--jobs", "1", "--json",
                                    str(report)], env={"KCONTRACT_CACHE": str(tmp_path / "cache"),
                                                       "KCONTRACT_IN_PROCESS": "1", "COLUMNS": "80"})
    assert done.exit_code == 0, done.output[-2000:]
    return json.loads(report.read_text()), done.output


def gate_of_first(tmp_path: Path, contract_text: str, seed: int, gate: int) -> tuple[dict, dict, str]:
    """Run `gate` of a one-entry, one-control contract at `seed`; the entry's and the control's results for that
    gate, and what the run printed."""
    doc, printed = gate_run(tmp_path, contract_text, seed, gate)
    return doc["entries"][0]["gates"][str(gate)], doc["controls"][0]["gates"][str(gate)], printed
