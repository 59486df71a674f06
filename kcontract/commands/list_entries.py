"""`kcontract list`: the contract's entries and controls."""

from __future__ import annotations

import click
from rich.table import Table
from rich.text import Text

from kcontract.commands.common import contract_option, out, user_errors
from kcontract.contract.loader import load_contract


@click.command("list", short_help="The entries and controls.")
@contract_option
@user_errors
def list_command(contract_path: str) -> None:
    """List entries, their family, kernel, cases and gates, then the controls."""
    loaded = load_contract(contract_path)
    table = Table(title=Text(f"{contract_path}: {len(loaded.entries)} entries"))
    for col in ("entry", "family", "kernel", "cases", "gates"):
        table.add_column(col, overflow="fold")
    for entry in loaded.entries:
        table.add_row(Text(entry.name), Text(entry.family_name), Text(entry.kernel_label),
                      Text(", ".join(entry.family.cases(1))), " ".join(map(str, entry.gates)))
    out.print(table)
    if loaded.controls:
        ctable = Table(title=f"{len(loaded.controls)} controls")
        for col in ("control", "stands in for", "red at gate", "fault"):
            ctable.add_column(col, overflow="fold")
        for control in loaded.controls:
            ctable.add_row(Text(control.name), Text(control.entry), str(control.gate), Text(control.fault))
        out.print(ctable)
