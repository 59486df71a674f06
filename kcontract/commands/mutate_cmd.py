"""`kcontract mutate ENTRY`: mutants of a CUDA entry's source, equivalent ones dropped, the rest under its gates."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import click

from kcontract.commands.common import Count, Jobs, contract_option, err, out, user_errors
from kcontract.commands.preflight import device_target, preflight
from kcontract.contract.loader import load_contract
from kcontract.errors import UsageError
from kcontract.provenance import git_state
from kcontract.family.cases import main_cases
from kcontract.mutate.campaign import Campaign, judge_runs, load, prepare, save, workdir
from kcontract.toolchain.cache import CACHE_ENV, cache_root
from kcontract.contract.paths import resolve_source


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
    """Mutate ENTRY's CUDA source (operators, comparisons, +-1, barriers, buffers, math calls, constants), drop
    mutants whose machine code on --sm is unchanged, run the rest under the entry's gates 1-4, report the score."""
    loaded = load_contract(contract_path)
    names = [e.name for e in loaded.entries]
    if entry_name not in names:
        raise UsageError(f"{entry_name}: no such entry in {contract_path}; entries: {', '.join(names[:8])}")
    entry = loaded.entry(entry_name)
    if entry.kernel.cuda is None:
        raise UsageError(f"{entry_name}: mutate needs a CUDA kernel; its kernel is {entry.kernel.label}")
    known = main_cases(entry.family)
    unknown = [c for c in cases if c not in known]
    if unknown:
        raise UsageError(f"--case {unknown[0]}: {entry_name} has no such case; its cases: {', '.join(known)}")
    preflight(loaded, contract_path, cuda=True, gpu=False, outputs={"json": json_path}, tools=("nvdisasm",))
    if receipt_path and not Path(receipt_path).is_file():
        raise UsageError(f"--receipt {receipt_path}: no such receipt; write it with `kcontract run --receipt`")
    sm = sm or device_target(loaded)
    os.environ[CACHE_ENV] = str(cache_root(contract_path).resolve())  # mutants share cubins, inputs, references
    here = workdir(loaded, entry_name)
    campaign = _current(load(here), loaded, entry, limit, mutant_seed, sm, cases)
    if campaign is None:
        campaign = prepare(loaded, entry_name, limit, mutant_seed, sm, cases=tuple(cases))
    counts = campaign.counts()["by_status"]
    err.print(f"mutate {entry_name}: {len(campaign.mutants)} mutants in {here}: {counts.get('stillborn', 0)} do not "
              f"compile, {counts.get('equivalent', 0)} equivalent on {sm}, {counts.get('candidate', 0)} to run",
              markup=False)
    whole = True
    if not prepare_only and any(m.status == "candidate" for m in campaign.mutants):
        whole = _run(campaign, here, jobs)
    for unused in campaign.argue(entry.mutation):
        err.print(f"mutate {entry_name}: mutation.equivalent {unused} matches no survivor of this campaign",
                  markup=False)
    report = campaign.counts()
    if json_path:
        Path(json_path).write_text(json.dumps({**report, "cut_short": not whole}, indent=1) + "\n")
    if not whole:
        err.print(f"{_line(report, 'cut short')}; run this again to judge the rest (the campaign is kept)",
                  markup=False)
        raise KeyboardInterrupt
    if receipt_path:
        commit = git_state(Path(loaded.path).resolve().parent)["commit"]
        _record(Path(receipt_path), entry_name, {**report, "source_sha256": campaign.source_sha256,
                                                 "measured_at": commit})
    for m in campaign.mutants:
        if m.status in ("survived", "argued"):
            why = f" argued equivalent: {m.detail}" if m.status == "argued" else ""
            out.print(f"{m.status} {m.ident} ({m.kind}, `{m.change}`):{why} {m.diff}", markup=False,
                      highlight=False)
    out.print(_line(report), markup=False)
    if _all_equivalent(report):
        err.print(f"mutate {entry_name}: no mutant changes the machine code on {sm}, so nothing was scored; does "
                  f"the kernel trap there? Name the SM it runs on with --sm", markup=False)
        sys.exit(1)
    sys.exit(0 if prepare_only or report["by_status"].get("candidate", 0) == 0 else 1)


def _record(receipt: Path, entry_name: str, score: dict) -> None:
    """The score into the receipt's `mutation`, under a lock: campaigns running side by side share the file."""
    import fcntl

    with open(receipt.with_name(receipt.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(receipt.read_text())
        data.setdefault("mutation", {})[entry_name] = score
        receipt.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def _all_equivalent(report: dict) -> bool:
    """Every mutant that compiled has the original's machine code: a score of nothing, not a pass."""
    s = report["by_status"]
    compiled = report["mutants"] - s.get("stillborn", 0)
    return compiled > 0 and s.get("equivalent", 0) == compiled


def _current(campaign: Campaign | None, loaded, entry, limit: int, seed: int, sm: str,
             cases: tuple[str, ...]) -> Campaign | None:
    """A prepared campaign for this very source, limit, seed, SM and cases, or None."""
    if campaign is None:
        return None
    text = resolve_source(Path(loaded.path).resolve().parent, entry.kernel.cuda.source).read_bytes()
    same = (campaign.source_sha256 == hashlib.sha256(text).hexdigest() and campaign.sm == sm
            and campaign.seed == seed and len(campaign.mutants) <= limit and campaign.cases == list(cases))
    return campaign if same else None


def _run(campaign: Campaign, here: Path, jobs) -> bool:
    """The candidates' controls through the ordinary runner, on the GPU; False when cut short (Ctrl-C or SIGTERM),
    with every mutant whose gates all finished judged and saved, the rest left to a rerun."""
    from kcontract.report.progress import RunProgress
    from kcontract.runner.plan import Selection, plan_tasks
    from kcontract.runner.session import auto_jobs, run_tasks, work_units

    contract = str(here / "contract.yaml")
    mutant_contract = load_contract(contract)
    preflight(mutant_contract, contract, cuda=True, gpu=True, names=[campaign.entry], quiet=True)
    waiting = {m.ident for m in campaign.mutants if m.status == "candidate"}
    chosen = [c.name for c in mutant_contract.controls if c.name.rpartition("_g")[0] in waiting]
    planned: dict[str, int] = {}
    for name in chosen:
        planned[name.rpartition("_g")[0]] = planned.get(name.rpartition("_g")[0], 0) + 1
    workers = auto_jobs(mutant_contract, gpu=True)[0] if jobs == "auto" else jobs
    first = min(int(name.rpartition("_g")[2]) for name in chosen)
    finished, whole = [], True
    for stage in ("first", "rest"):  # the first gate for all, the others only for mutants it left green
        red = {o.task.name.rpartition("_g")[0] for o in finished if o.status != "ran" or o.failed_gates()}
        names = tuple(n for n in chosen if (int(n.rpartition("_g")[2]) == first) == (stage == "first")
                      and n.rpartition("_g")[0] not in red)
        if not names or not whole:
            continue
        tasks = plan_tasks(mutant_contract, contract, Selection(controls=names))
        with RunProgress(out, work_units(mutant_contract, tasks)) as progress:
            def done(outcome) -> None:
                finished.append(outcome)
                progress.done(outcome)

            outcomes = run_tasks(tasks, workers, lambda step: None, done)
            whole = not any(o.status == "interrupted" for o in outcomes)
    judge_runs(campaign, finished, planned)
    if whole:
        _sanitize_survivors(campaign, contract, mutant_contract)
    save(campaign, here)
    return whole


SURVIVOR_TOOLS = {"sync": ("racecheck",)}  # per mutant class; any other class: memory errors
MEMORY_TOOLS = ("memcheck", "initcheck")


def _sanitize_survivors(campaign: Campaign, contract: str, mutant_contract, jobs: int = 8) -> None:
    """Mutants the gates miss go to compute-sanitizer (barriers to racecheck, others to memcheck and initcheck:
    a race or an access the GPU's timing or allocation granularity hides); errors there kill them."""
    from concurrent.futures import ThreadPoolExecutor

    from kcontract.errors import EnvironmentProblem
    from kcontract.sanitizer import Target, run_one, sanitizer_path, smallest_case

    survivors = [m for m in campaign.mutants if m.status == "survived"]
    if not survivors:
        return
    try:
        sanitizer = sanitizer_path()
    except EnvironmentProblem as problem:
        err.print(f"mutate: survivors not sanitized: {problem.message}", markup=False)
        return
    case = smallest_case(mutant_contract.entry(campaign.entry))
    work = [(m, tool) for m in survivors for tool in SURVIVOR_TOOLS.get(m.kind, MEMORY_TOOLS)]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        findings = list(pool.map(lambda job: run_one(sanitizer, job[1], contract, Target(
            "control", f"{job[0].ident}_g1", campaign.entry, case), timeout=600), work))
    for (m, tool), finding in zip(work, findings):
        if finding.status == "errors" and m.status == "survived":
            m.status, m.detail = "killed", f"{tool}: {finding.errors} errors ({finding.detail[:160]})"


def _line(report: dict, why_waiting: str = "no GPU here") -> str:
    """`MUTATE entry: 40 mutants, 5 do not compile, 9 equivalent; 25 of 26 killed (96.2 %), 1 survived`."""
    s = report["by_status"]
    judged = s.get("killed", 0) + s.get("survived", 0)
    score = f" ({report['score_pct']} %)" if report["score_pct"] is not None else ""
    waiting = f"; {s['candidate']} not run ({why_waiting})" if s.get("candidate") else ""
    return (f"MUTATE {report['entry']}: {report['mutants']} mutants, {s.get('stillborn', 0)} do not compile, "
            f"{s.get('equivalent', 0)} equivalent on {report['sm']}; {s.get('killed', 0)} of {judged} killed{score}, "
            f"{s.get('survived', 0)} survived{waiting}")
