"""`kcontract list`: the contract's entries and controls."""

from __future__ import annotations

import click

from kcontract.commands.common import contract_option, out, user_errors
from kcontract.family.cases import main_cases
from kcontract.report.tabular import print_rows
from kcontract.session.session import Session
from kcontract.verdict.summary import plural


@click.command("list", short_help="The entries and controls.")
@contract_option
@user_errors
def list_command(contract_path: str) -> None:
    """List entries, their family, kernel, cases and gates, then the controls."""
    loaded = Session(contract_path).loaded
    title = f"{contract_path}: {plural(len(loaded.entries), 'entry', 'entries')}"
    print_rows(out, title, ("entry", "family", "kernel", "cases", "gates"),
               [(e.name, e.family_name, e.kernel_label, ", ".join(main_cases(e.family)), " ".join(map(str, e.gates)))
                for e in loaded.entries])
    if loaded.controls:
        print_rows(out, f"{len(loaded.controls)} controls", ("control", "stands in for", "red at gate", "fault"),
                   [(c.name, c.entry, str(c.gate), c.fault) for c in loaded.controls])
