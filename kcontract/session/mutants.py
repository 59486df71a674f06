"""`kcontract mutate` as a session step: a CUDA entry's campaign found or prepared, its candidates run under the
entry's gates (the first gate for all, the rest for the mutants it left green), survivors sanitized, the score
written; nothing printed here."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kcontract.cachedir import CACHE_ENV, cache_root
from kcontract.contract.paths import resolve_source
from kcontract.errors import ContractFailed, UsageError
from kcontract.family.cases import main_cases
from kcontract.mutate.campaign import Campaign, fit_timeouts, judge_runs, load, prepare, save, workdir
from kcontract.receipts.carried import entry_node_sha256
from kcontract.receipts.receipt import Receipt
from kcontract.session.derived import Derived, Progress, interrupted
from kcontract.session.outputs import measured_at, require_receipt
from kcontract.session.preflight import device_target
from kcontract.session.retrials import retry_survivors

Say = Callable[[str], None]
SURVIVOR_TOOLS = ("memcheck", "initcheck", "racecheck")  # every survivor: a weakened wait or bound races too


@dataclass(frozen=True)
class MutateOptions:
    """What `kcontract mutate` was asked for."""

    limit: int = 60
    seed: int = 0
    sm: str | None = None
    cases: tuple[str, ...] = ()
    prepare_only: bool = False
    jobs: int | str = "auto"
    json: str | None = None
    receipt: str | None = None


@dataclass
class Mutated:
    """The campaign, its counts and the SM that decided equivalence."""

    campaign: Campaign
    report: dict
    sm: str

    def shown(self) -> list:
        """The mutants the gates missed: survivors and those argued equivalent."""
        return [m for m in self.campaign.mutants if m.status in ("survived", "uncovered", "argued")]

    def all_equivalent(self) -> bool:
        """Every mutant that compiled has the original's machine code: a score of nothing, not a pass."""
        s = self.report["by_status"]
        compiled = self.report["mutants"] - s.get("stillborn", 0)
        return compiled > 0 and s.get("equivalent", 0) == compiled

    def exit_code(self, prepare_only: bool) -> int:
        """0 when prepared only or every candidate was judged, else 1."""
        return 0 if prepare_only or self.report["by_status"].get("candidate", 0) == 0 else 1


def mutate_session(session, name: str, options: MutateOptions, say: Say, progress: Progress) -> Mutated:
    """Check the entry and the machine, find or prepare the campaign, run its candidates, write the JSON and the
    score; a campaign cut short is saved and raises KeyboardInterrupt."""
    entry = _mutable(session, name, options.cases)
    session.machine(cuda=True, gpu=False, outputs={"json": options.json}, tools=("nvdisasm",), say=say)
    require_receipt(options.receipt)
    sm = options.sm or device_target(session.loaded)
    os.environ[CACHE_ENV] = str(cache_root(session.path).resolve())  # mutants share cubins, inputs, references
    here = workdir(session.loaded, name)
    campaign = _campaign(session.loaded, entry, here, options, sm)
    say(_prepared(name, campaign, here, sm))
    whole = options.prepare_only or not _waiting(campaign) or run_candidates(campaign, here, options.jobs, progress,
                                                                               say)
    campaign.uncovered(missed_lines(options.receipt, name, campaign.source_sha256))
    for unused in campaign.argue(entry.mutation):
        say(f"mutate {name}: mutation.equivalent {unused} matches no survivor of this campaign")
    mutated = Mutated(campaign, campaign.counts(), sm)
    _write(session.loaded, mutated, options, whole, say)
    return mutated


def missed_lines(receipt: str | None, name: str, source_sha256: str) -> set[int]:
    """The lines of the entry's source that the receipt's coverage of that very source says no case executes."""
    if not receipt or not Path(receipt).is_file():
        return set()
    coverage = Receipt.read(receipt).coverage_of(name) or {}
    if coverage.get("source_sha256") != source_sha256:
        return set()
    return {int(line) for line in coverage.get("missed_lines", [])}


def _mutable(session, name: str, cases: tuple[str, ...]):
    """The entry to mutate: one of the contract's, with a compiled (CUDA or Triton) kernel and the cases named."""
    names = [e.name for e in session.loaded.entries]
    if name not in names:
        raise UsageError(f"{name}: no such entry in {session.path}; entries: {', '.join(names[:8])}")
    entry = session.loaded.entry(name)
    if entry.kernel.compiled is None:
        raise UsageError(f"{name}: mutate needs a CUDA or Triton kernel; its kernel is {entry.kernel.label}")
    known = main_cases(entry.family)
    unknown = [c for c in cases if c not in known]
    if unknown:
        raise UsageError(f"--case {unknown[0]}: {name} has no such case; its cases: {', '.join(known)}")
    return entry


def _campaign(loaded, entry, here: Path, options: MutateOptions, sm: str) -> Campaign:
    """The prepared campaign for this very source, limit, seed, SM and cases, else a new one."""
    campaign = load(here)
    if campaign is not None:
        text = resolve_source(Path(loaded.path).resolve().parent, entry.kernel.compiled.source).read_bytes()
        same = (campaign.source_sha256 == hashlib.sha256(text).hexdigest() and campaign.sm == sm
                and campaign.seed == options.seed and len(campaign.mutants) <= options.limit
                and campaign.cases == list(options.cases))
        if same:
            return campaign
    return prepare(loaded, entry.name, options.limit, options.seed, sm, cases=tuple(options.cases))


def _waiting(campaign: Campaign) -> bool:
    """Whether any mutant is still to run."""
    return any(m.status == "candidate" for m in campaign.mutants)


def _prepared(name: str, campaign: Campaign, here: Path, sm: str) -> str:
    """`mutate E: N mutants in DIR: S do not compile, Q equivalent on SM, C to run`."""
    counts = campaign.counts()["by_status"]
    return (f"mutate {name}: {len(campaign.mutants)} mutants in {here}: {counts.get('stillborn', 0)} do not "
            f"compile, {counts.get('equivalent', 0)} equivalent on {sm}, {counts.get('candidate', 0)} to run")


def _write(loaded, mutated: Mutated, options: MutateOptions, whole: bool, say: Say) -> None:
    """The JSON; a campaign cut short stops here; else the score into the receipt."""
    report = mutated.report
    if options.json:
        Path(options.json).write_text(json.dumps({**report, "cut_short": not whole}, indent=1) + "\n")
    if not whole:
        say(f"{score_line(report, 'cut short')}; run this again to judge the rest (the campaign is kept)")
        raise KeyboardInterrupt
    if options.receipt:
        record_score(Path(options.receipt), report["entry"], {
            **report, "source_sha256": mutated.campaign.source_sha256,
            "node_sha256": entry_node_sha256(loaded, report["entry"]), "measured_at": measured_at(loaded)})


def _mutant(control: str) -> str:
    """The mutant a control of the mutants' contract stands for (`m12_g3` -> `m12`)."""
    return control.rpartition("_g")[0]


def _gate(control: str) -> int:
    """The gate a control of the mutants' contract runs (`m12_g3` -> 3)."""
    return int(control.rpartition("_g")[2])


def _candidates(campaign: Campaign, mutant_contract) -> list[str]:
    """The controls of the mutants still to run, one per gate."""
    waiting = {m.ident for m in campaign.mutants if m.status == "candidate"}
    return [c.name for c in mutant_contract.controls if _mutant(c.name) in waiting]


def _stage(chosen: list[str], finished: list, first: int, at_first: bool) -> tuple[str, ...]:
    """The controls of one stage: those at the first gate, or at the others, of the mutants still green."""
    red = {_mutant(o.task.name) for o in finished if o.status != "ran" or o.failed_gates()}
    return tuple(n for n in chosen if (_gate(n) == first) == at_first and _mutant(n) not in red)


def run_candidates(campaign: Campaign, here: Path, jobs, progress: Progress, say: Say) -> bool:
    """The candidates' controls through the ordinary runner, on the GPU; False when cut short (Ctrl-C or SIGTERM),
    with every mutant whose gates all finished judged and saved, the rest left to a rerun."""
    contract = str(here / "contract.yaml")
    derived = Derived(contract, [campaign.entry], say)
    chosen = _candidates(campaign, derived.loaded)
    workers, first = derived.workers(jobs), min(_gate(name) for name in chosen)
    baseline, _ = derived.run(derived.entry_tasks(campaign.entry), workers, progress)
    _require_green(campaign.entry, baseline)
    fit_timeouts(Path(contract), {g: o.seconds for o in baseline for g in o.task.gates})
    derived = Derived(contract, [campaign.entry], lambda line: None)  # with the fitted time limits
    finished, whole = [], True
    for stage in (True, False):  # the first gate for all, the others only for mutants it left green
        names = _stage(chosen, finished, first, stage)
        if names and whole:
            outcomes, done = derived.run(derived.tasks(names), workers, progress)
            finished += done
            whole = not interrupted(outcomes)
    judge_runs(campaign, finished, dict(Counter(_mutant(n) for n in chosen)))
    if whole:
        whole = retry_survivors(campaign, here, derived.loaded, workers, progress)
    if whole:
        sanitize_survivors(campaign, contract, derived.loaded, say)
    save(campaign, here)
    return whole


def _require_green(entry: str, baseline: list) -> None:
    """The unmutated entry ran green first, so its inputs and references are cached before any mutant's gate
    runs (a mutant's time limit then times its kernel) and a red gate is the mutant's doing."""
    if interrupted(baseline):
        raise KeyboardInterrupt
    bad = [f"gate {g}" for o in baseline for g in o.failed_gates()] + [o.status for o in baseline if o.status != "ran"]
    if bad:
        raise ContractFailed(f"{entry}: the unmutated kernel is not green ({', '.join(bad)}), so no mutant can be "
                             f"judged: run `kcontract run --only {entry}` and fix it first")


def sanitize_survivors(campaign: Campaign, contract: str, mutant_contract, say: Say = lambda line: None,
                       jobs: int = 8) -> None:
    """Mutants the gates miss go to compute-sanitizer's memcheck, initcheck and racecheck (a race or an access the
    GPU's timing or allocation granularity hides: a removed barrier, a weakened wait, a bound one too far); errors
    there kill them."""
    from concurrent.futures import ThreadPoolExecutor

    from kcontract.errors import EnvironmentProblem
    from kcontract.sanitizer import Target, run_one, sanitizer_path, smallest_case

    survivors = [m for m in campaign.mutants if m.status == "survived"]
    if not survivors:
        return
    try:
        sanitizer = sanitizer_path()
    except EnvironmentProblem as problem:
        say(f"mutate: survivors not sanitized: {problem.message}")
        return
    case = smallest_case(mutant_contract.entry(campaign.entry))
    work = [(m, tool) for m in survivors for tool in SURVIVOR_TOOLS]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        findings = list(pool.map(lambda job: run_one(sanitizer, job[1], contract, Target(
            "control", f"{job[0].ident}_g1", campaign.entry, case), timeout=600), work))
    _judge_sanitized(work, findings, case)


def _judge_sanitized(work: list, findings: list, case: str) -> None:
    """Errors kill a survivor; a survivor left keeps what each tool said of it."""
    for (m, tool), finding in zip(work, findings):
        if finding.status == "errors" and m.status == "survived":
            m.status, m.detail = "killed", f"{tool}: {finding.errors} errors ({finding.detail[:160]})"
    for (m, tool), finding in zip(work, findings):
        if m.status == "survived":
            said = finding.status if finding.status != "failed" else f"failed ({finding.detail[:120]})"
            m.detail = "; ".join(filter(None, [m.detail, f"{tool} on {case}: {said}"]))


def record_score(receipt: Path, entry_name: str, score: dict) -> None:
    """The score into the receipt's `mutation`, under its lock: campaigns running side by side share the file."""
    with Receipt.updating(receipt) as updated:
        updated.put_mutation({entry_name: score})


def score_line(report: dict, why_waiting: str = "no GPU here") -> str:
    """`MUTATE entry: 40 mutants, 5 do not compile, 9 equivalent; 25 of 26 killed (96.2 %), 1 survived`."""
    s = report["by_status"]
    judged = s.get("killed", 0) + s.get("survived", 0) + s.get("uncovered", 0)
    score = f" ({report['score_pct']} %)" if report["score_pct"] is not None else ""
    waiting = f"; {s['candidate']} not run ({why_waiting})" if s.get("candidate") else ""
    uncovered = f", {s['uncovered']} on lines no case executes" if s.get("uncovered") else ""
    return (f"MUTATE {report['entry']}: {report['mutants']} mutants, {s.get('stillborn', 0)} do not compile, "
            f"{s.get('equivalent', 0)} equivalent on {report['sm']}; {s.get('killed', 0)} of {judged} killed{score}, "
            f"{s.get('survived', 0)} survived{uncovered}{waiting}")
