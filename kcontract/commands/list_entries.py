"""`kcontract list`: the contract's entries and controls."""

from __future__ import annotations

import click
from rich.table import Table

from kcontract.commands.common import contract_option, out, user_errors
from kcontract.contract.loader import load_contract


@click.command("list")
@contract_option
@user_errors
def list_command(contract_path: str) -> None:
    """List entries, their family, kernel, cases and gates, then the controls."""
    loaded = load_contract(contract_path)
    table = Table(title=f"{contract_path}: {len(loaded.entries)} entries")
    for col in ("entry", "family", "kernel", "cases", "gates"):
        table.add_column(col)
    for entry in loaded.entries:
        table.add_row(entry.name, entry.family_name, entry.kernel_label, ", ".join(entry.family.case_names()),
                      " ".join(map(str, entry.gates)))
    out.print(table)
    if loaded.controls:
        ctable = Table(title=f"{len(loaded.controls)} controls")
        for col in ("control", "stands in for", "red at gate", "fault"):
            ctable.add_column(col)
        for control in loaded.controls:
            ctable.add_row(control.name, control.entry, str(control.gate), control.fault)
        out.print(ctable)
