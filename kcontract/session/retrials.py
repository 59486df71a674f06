"""A campaign's survivors run once more, each at its first gate on the entry's smallest case and up to RETRIALS
times: a race that the large cases' timing hid (a weakened wait, a stray load into a stage, a removed fence) goes
red on some trial there. Survivors are few, so this costs little beside the campaign."""

from __future__ import annotations

from pathlib import Path

import yaml

from kcontract.mutate.campaign import MUTANT_TIMEOUT, Campaign, judge_runs
from kcontract.session.derived import Derived, Progress, interrupted

RETRIALS = 10


def retry_survivors(campaign: Campaign, here: Path, mutant_contract, workers: int, progress: Progress) -> bool:
    """Run the survivors again; those red on a trial are killed, the rest stay survivors. False when cut short."""
    from kcontract.sanitizer import smallest_case

    chosen = [m for m in campaign.mutants if m.status == "survived"]
    if not chosen:
        return True
    case = smallest_case(mutant_contract.entry(campaign.entry))
    derived = Derived(str(retrials_contract(here, {m.ident for m in chosen}, case)), [campaign.entry],
                      lambda line: None)
    for m in chosen:
        m.status = "candidate"
    outcomes, finished = derived.run(derived.tasks([c.name for c in derived.loaded.controls]), workers, progress)
    judge_runs(campaign, [o for o in finished if o.status != "timed out"],  # out of time says nothing of a race
               {m.ident: 1 for m in chosen})
    _settle(chosen, case)
    return not interrupted(outcomes)


def _settle(chosen: list, case: str) -> None:
    """A retrial cut short leaves its mutant a survivor; a kill says where it came from."""
    for m in chosen:
        if m.status == "candidate":
            m.status = "survived"
        elif m.status == "killed":
            m.detail = f"{m.detail} on {case}, retried up to {RETRIALS} times"


def retrials_contract(here: Path, idents: set[str], case: str) -> Path:
    """The campaign's contract with only the named mutants' first-gate controls, RETRIALS trials each, on `case`."""
    document = yaml.safe_load((here / "contract.yaml").read_text())
    entry = document["entries"][0]
    if any(c.get("name") == case for c in entry.get("cases", [])):
        entry["cases"] = [c for c in entry["cases"] if c["name"] == case]
    first: dict[str, dict] = {}
    for control in document["controls"]:
        ident = control["name"].rpartition("_g")[0]
        if ident in idents and (ident not in first or control["gate"] < first[ident]["gate"]):
            first[ident] = {**control, "trials": max(control.get("trials", 1), RETRIALS), "timeout": MUTANT_TIMEOUT}
    document["controls"] = list(first.values())
    path = here / "retrials.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=200))
    return path
