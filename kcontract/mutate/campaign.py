"""A mutation campaign on one compiled (CUDA or Triton) entry: mutants of its source, equivalent ones dropped by
their SASS, the rest run under the entry's gates as controls standing in for it (so inputs and references come
from the cache).

A mutant is a patch of the production source, applied as a control's patch is (`kcontract.contract.patches`).
Prepared on any machine with the toolchain (patches, a contract and cubins under the compile cache's
`mutants/ENTRY/`), run on a GPU. A mutant is killed when any gate that launches it goes red or its kernel fails.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from kcontract.builds.builds import Builds
from kcontract.cachedir import cache_root
from kcontract.contract.loader import load_contract
from kcontract.contract.patches import make as make_patch
from kcontract.contract.paths import resolve_source
from kcontract.contract.standins import source_label, standin_document, standin_entry
from kcontract.gatetable import launching
from kcontract.mutate.operators import CLASSES, Mutant, mutants
from kcontract.mutate.triton_operators import triton_mutants
from kcontract.sassdiff.same_code import same_machine_code
from kcontract.toolchain.cache import CompileCache

MUTANT_TIMEOUT = 90.0  # seconds a mutant's gate may take (a mutated loop bound may never end)
TIMEOUT_FACTOR, TIMEOUT_FLOOR = 4.0, 20.0  # once the unmutated entry ran: this many times its gate's seconds, at least
RACE_TRIALS = {"sync": 10}  # a removed barrier plants a race: its gates run until red, this many times at most


@dataclass
class MutantResult:
    """What became of one mutant."""

    ident: str
    kind: str
    line: int
    change: str
    diff: str
    # equivalent, elsewhere, stillborn, candidate, killed, survived, uncovered (a survivor on a line no case
    # executes: a missing case), argued (a survivor argued equivalent)
    status: str = "candidate"
    detail: str = ""  # the first compile error, or the gates that killed it


@dataclass
class Campaign:
    """One entry's mutants and where they live."""

    entry: str
    source: str  # the entry's kernel source, as the contract names it
    source_sha256: str
    sm: str
    seed: int
    mutants: list[MutantResult] = field(default_factory=list)
    cases: list[str] = field(default_factory=list)  # the entry's cases the mutants run on; empty: all

    def counts(self) -> dict:
        """Mutants per status, per class, and the score (killed over non-equivalent ones that compile)."""
        by_status: dict[str, int] = {}
        by_class: dict[str, dict[str, int]] = {}
        for m in self.mutants:
            by_status[m.status] = by_status.get(m.status, 0) + 1
            by_class.setdefault(m.kind, {}).setdefault(m.status, 0)
            by_class[m.kind][m.status] += 1
        return {"entry": self.entry, "sm": self.sm, "seed": self.seed, "mutants": len(self.mutants),
                "by_status": by_status, "by_class": by_class, "score_pct": score_pct(by_status),
                "survivors": [{"ident": m.ident, "kind": m.kind, "line": m.line, "change": m.change, "diff": m.diff,
                               "status": m.status, "detail": m.detail}
                              for m in self.mutants if m.status in ("survived", "uncovered")],
                "argued": [{"ident": m.ident, "kind": m.kind, "line": m.line, "change": m.change, "diff": m.diff,
                            "reason": m.detail} for m in self.mutants if m.status == "argued"]}

    def uncovered(self, missed_lines: set[int]) -> None:
        """Survivors on lines no case executes are missing cases, not survivors to argue."""
        for m in self.mutants:
            if m.status == "survived" and m.line in missed_lines:
                m.status, m.detail = "uncovered", f"line {m.line} runs under no case: add one that executes it"

    def argue(self, arguments) -> list[str]:
        """Survivors the entry argues equivalent (`mutation.equivalent`: line and change) set apart with the reason,
        those no longer argued back to survivors; returns the arguments that match no survivor."""
        reasons = {(a.line, a.change): a.reason for a in (arguments.equivalent if arguments else [])}
        used = set()
        for m in self.mutants:
            if m.status not in ("survived", "argued"):
                continue
            key = (m.line, m.change)
            if key in reasons:
                m.status, m.detail = "argued", reasons[key]
                used.add(key)
            else:
                m.status, m.detail = "survived", ""
        return [f"line {line}: {change}" for line, change in reasons if (line, change) not in used]


def score_pct(by_status: dict[str, int]) -> float | None:
    """Killed over killed, survived and uncovered, in percent to one decimal; None where none was judged."""
    judged = by_status.get("killed", 0) + by_status.get("survived", 0) + by_status.get("uncovered", 0)
    return round(100.0 * by_status.get("killed", 0) / judged, 1) if judged else None


def workdir(loaded, entry_name: str) -> Path:
    """Where an entry's mutants live: beside the compile cache, so a GPU machine gets them with the cubins."""
    return cache_root(loaded.path) / "mutants" / entry_name


def prepare(loaded, entry_name: str, limit: int, seed: int, sm: str, jobs: int | None = None,
            cases: tuple[str, ...] = ()) -> Campaign:
    """Write the mutants and their contract (on `cases` of the entry, or all), compile them for `sm`, drop
    stillborn and equivalent ones."""
    entry = loaded.entry(entry_name)
    compiled = entry.kernel.compiled
    base = Path(loaded.path).resolve().parent
    original = resolve_source(base, compiled.source).read_text()
    here = workdir(loaded, entry_name)
    shutil.rmtree(here, ignore_errors=True)
    here.mkdir(parents=True)
    made = operators_for(entry.kernel)(original, tuple(entry.family.kernel_abi()), limit, seed)
    label = source_label(loaded, entry, here)
    for m in made:
        (here / f"{m.ident}.patch").write_text(make_patch(original, m.source, label))
    campaign = Campaign(entry_name, compiled.source, hashlib.sha256(original.encode()).hexdigest(), sm, seed,
                        [MutantResult(m.ident, m.kind, m.line, m.change, m.diff(original)) for m in made],
                        list(cases))
    contract = write_contract(loaded, entry, here, made, sm, cases)
    _judge_compiles(campaign, contract, sm, jobs)
    write_contract(loaded, entry, here, [m for m in made if _status(campaign, m.ident) == "candidate"], sm, cases)
    save(campaign, here)
    return campaign


def operators_for(kernel):
    """The mutation operators of a kernel's kind: CUDA C++'s or Triton's."""
    return triton_mutants if kernel.triton is not None else mutants


def _status(campaign: Campaign, ident: str) -> str:
    return next(m.status for m in campaign.mutants if m.ident == ident)


def write_contract(loaded, entry, here: Path, made: list[Mutant], sm: str, cases: tuple[str, ...] = ()) -> Path:
    """The entry (its source by a relative path, on `cases` or all) and, per mutant and gate, a control standing
    in for it."""
    document = {
        **standin_document(loaded, here, sm),
        "entries": [standin_entry(loaded, entry, here, cases)],
        "controls": [{"name": f"{m.ident}_g{gate}", "entry": entry.name, "gate": gate, "timeout": MUTANT_TIMEOUT,
                      "fault": f"{m.kind}: {m.change} at line {m.line}", "patch": f"{m.ident}.patch",
                      **({"trials": RACE_TRIALS[m.kind]} if m.kind in RACE_TRIALS else {})}
                     for m in made for gate in launching() if gate in entry.gates],
    }
    path = here / "contract.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=200))
    return path


def fit_timeouts(contract: Path, seconds: dict[int, float]) -> None:
    """Each mutant's time limit from the unmutated entry's seconds at its gate (TIMEOUT_FACTOR times, at least
    TIMEOUT_FLOOR, at most MUTANT_TIMEOUT), so a hung mutant of a quick entry is cut in seconds, not minutes."""
    document = yaml.safe_load(contract.read_text())
    for control in document["controls"]:
        if control["gate"] in seconds:
            fitted = max(TIMEOUT_FLOOR, TIMEOUT_FACTOR * seconds[control["gate"]] * control.get("trials", 1))
            control["timeout"] = round(min(MUTANT_TIMEOUT, fitted), 1)
    contract.write_text(yaml.safe_dump(document, sort_keys=False, width=200))


def _judge_compiles(campaign: Campaign, contract: Path, sm: str, jobs: int | None) -> None:
    """Stillborn (does not compile), equivalent (no function's machine code changed) and elsewhere (only functions
    the entry never launches changed: another entry's instantiations, no part of this one's score) mutants."""
    loaded = load_contract(str(contract), import_kernels=False)
    builds = Builds.of(loaded, jobs=jobs)
    built, cache = builds.build(None, [sm]), builds.cache
    by_patch = {u.patch_label: u for u in builds.units}
    original = built.module(by_patch[None], sm)
    if original is None:
        raise RuntimeError(f"{campaign.source} itself does not compile for {sm}")
    own = set(loaded.entries[0].launched(loaded.entries[0].kernel.compiled.symbols))
    for m in campaign.mutants:
        unit = by_patch[f"{m.ident}.patch"]
        module = built.module(unit, sm)
        if module is None:
            failure = next(f for f in built.failures if f.unit.ident == unit.ident)
            first = next((line for line in failure.log.splitlines() if "error" in line), failure.log[:200])
            m.status, m.detail = "stillborn", first.strip()[:300]
            continue
        changed = changed_code(original, module, cache)
        if not changed:
            m.status = "equivalent"
        elif not own.intersection(changed):
            m.status, m.detail = "elsewhere", f"changes only {', '.join(changed)}, which this entry never launches"


def changed_code(a, b, cache: CompileCache) -> list[str]:
    """The functions of the unit whose machine code (bytes, else normalised SASS) differs between the builds."""
    return same_machine_code(a, b, a.unit.expressions, cache)


def save(campaign: Campaign, here: Path) -> None:
    """The campaign's state beside its mutants."""
    (here / "campaign.json").write_text(json.dumps(asdict(campaign), indent=1) + "\n")


def load(here: Path) -> Campaign | None:
    """A prepared campaign, or None."""
    path = here / "campaign.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    data["mutants"] = [MutantResult(**m) for m in data["mutants"]]
    return Campaign(**data)


def judge_runs(campaign: Campaign, outcomes, planned: dict[str, int] | None = None) -> None:
    """Killed when any of a mutant's gates went red or its kernel did not run to the end; survived when every
    gate planned for it (`planned`: mutant -> gate count; default: those that ran) ran green; else untouched."""
    red: dict[str, list[str]] = {}
    ran: dict[str, int] = {}
    for outcome in outcomes:
        ident, _, gate = outcome.task.name.rpartition("_g")
        ran[ident] = ran.get(ident, 0) + 1
        if outcome.status != "ran":
            red.setdefault(ident, []).append(f"gate {gate}: {outcome.status}")
        elif outcome.failed_gates():
            red.setdefault(ident, []).append(f"gate {gate}")
    for m in campaign.mutants:
        if m.status != "candidate" or m.ident not in ran:
            continue
        if m.ident in red:
            m.status, m.detail = "killed", ", ".join(red[m.ident])
        elif planned is None or ran[m.ident] >= planned.get(m.ident, 0):
            m.status, m.detail = "survived", ""


__all__ = ["CLASSES", "Campaign", "judge_runs", "load", "prepare", "save", "workdir"]
