"""`kcontract mutate ENTRY`: mutants of a CUDA entry's source, equivalent ones dropped, the rest under its gates."""

from __future__ import annotations

import sys

import click

from kcontract.commands.common import Count, Jobs, contract_option, err, out, user_errors
from kcontract.report.progress import RunProgress
from kcontract.session.mutants import MutateOptions, mutate_session, score_line
from kcontract.session.session import Session


@click.command("mutate", short_help="Mutation score of a CUDA entry under its gates.")
@click.argument("entry_name", metavar="ENTRY")
@contract_option
@click.option("--limit", type=click.IntRange(1, 2000), default=60, show_default=True,
              help="Mutants at most, spread over the mutation classes.")
@click.option("--seed", "mutant_seed", type=Count(0, 2**31, "a seed"), default=0, show_default=True,
              help="Which sites each class samples.")
@click.option("--sm", help="The SM whose SASS decides equivalence (default: the contract's target for this GPU, "
              "such as sm_90a on an H100 or H200; needed where there is no GPU).")
@click.option("--case", "cases", multiple=True, help="Run the mutants on this case of ENTRY only (repeatable; "
              "default: all its cases).")
@click.option("--prepare-only", is_flag=True, help="Write and compile the mutants (no GPU needed), run nothing.")
@click.option("--jobs", "jobs", type=Jobs(), default="auto", show_default=True, help="Workers running mutants.")
@click.option("--json", "json_path", help="Write the campaign as JSON.")
@click.option("--receipt", "receipt_path", help="Add the score to this receipt under `mutation`.")
@user_errors
def mutate_command(entry_name, contract_path, limit, mutant_seed, sm, cases, prepare_only, jobs, json_path,
                   receipt_path) -> None:
    """Mutate ENTRY's CUDA source (operators, comparisons, +-1, barriers, buffers, math calls, constants) or
    Triton source (operators, comparisons, +-1, mask bounds, dropped other=, axes, dtypes, program ids, constants,
    buffers), drop mutants whose machine code on --sm is unchanged, run the rest under the entry's gates 1-4,
    report the score."""
    options = MutateOptions(limit, mutant_seed, sm, tuple(cases), prepare_only, jobs, json_path, receipt_path)
    mutated = mutate_session(Session(contract_path), entry_name, options, say, lambda units: RunProgress(out, units))
    for m in mutated.shown():
        why = f" argued equivalent: {m.detail}" if m.status == "argued" else f" ({m.detail})" if m.detail else ""
        out.print(f"{m.status} {m.ident} ({m.kind}, `{m.change}`):{why} {m.diff}", markup=False, highlight=False)
    out.print(score_line(mutated.report), markup=False)
    if mutated.all_equivalent():
        say(f"mutate {entry_name}: no mutant changes the machine code on {mutated.sm}, so nothing was scored; does "
            f"the kernel trap there? Name the SM it runs on with --sm")
        sys.exit(1)
    sys.exit(mutated.exit_code(prepare_only))


def say(line: str) -> None:
    """A line on stderr, as it is."""
    err.print(line, markup=False)
