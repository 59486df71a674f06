"""Record files: <records>/<toolchain>/<entry>.json per entry, and <records>/baseline.json; stable, small diffs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kcontract.errors import ContractError

BASELINE = "baseline.json"
UPDATE_HINT = "run `kcontract records --update` and commit the records"


def records_root(loaded) -> Path:
    """The contract's records folder (`folders.records`, default records/ beside the contract file)."""
    return Path(loaded.path).resolve().parent / loaded.model.folders.records


def record_path(root: Path, toolchain: str, entry: str) -> Path:
    """Where an entry's record lives."""
    return root / toolchain / f"{entry}.json"


def dumps(value, indent: int = 0) -> str:
    """JSON with sorted fields; a mapping or list holding no mapping stays on one line (one line per SM)."""
    pad = "  " * indent
    if isinstance(value, dict) and any(isinstance(v, dict) for v in value.values()):
        items = [f'{pad}  {json.dumps(k)}: {dumps(v, indent + 1)}' for k, v in sorted(value.items(), key=_natural)]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    return json.dumps(value, sort_keys=True, separators=(", ", ": "))


def _natural(item) -> list:
    """Sort key putting sm_80 before sm_100."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(item[0]))]


def read_json(path: Path) -> dict | None:
    """A record or baseline file, None if absent; unreadable JSON is a ContractError naming the fix."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ContractError(str(path), error.lineno if hasattr(error, "lineno") else None, "",
                            f"valid JSON ({UPDATE_HINT})") from None
    if not isinstance(data, dict):
        raise ContractError(str(path), None, "", f"a JSON object ({UPDATE_HINT})")
    return data


def write_json(path: Path, data: dict) -> None:
    """Write a record or baseline file in the stable format."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(data) + "\n")


def record_files(root: Path, toolchain: str) -> dict[str, Path]:
    """Every record file of a toolchain, by entry name."""
    folder = root / toolchain
    return {p.stem: p for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}


def read_baseline(root: Path) -> dict | None:
    """records/baseline.json: {"limit_problems": N, "problems": [...]} or None."""
    return read_json(root / BASELINE)


def write_baseline(root: Path, toolchain: str, problems: list[str]) -> None:
    """Rewrite the baseline with the current limit problems."""
    data = {"limit_problems": len(problems), "problems": sorted(problems), "toolchain": toolchain}
    (root / BASELINE).parent.mkdir(parents=True, exist_ok=True)
    (root / BASELINE).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
