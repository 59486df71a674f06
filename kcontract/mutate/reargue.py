"""A receipt's mutation scores judged again under the contract's current `mutation.equivalent` arguments, with no
GPU: the mutants the gates missed stay measured; only which of them are argued equivalent changes.

A score is re-judged only where its source is the one measured, and each survivor's diff matches the mutant that
the campaign's seed makes again (which gives its line and change, what an argument names)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from kcontract.contract.paths import resolve_source
from kcontract.mutate.campaign import Campaign, MutantResult, operators_for, score_pct

SEED = 0  # the seed a score's campaign ran with where the score does not record one
REJUDGED = ("survived", "argued", "uncovered")  # the statuses an argument can move a mutant between


@dataclass(frozen=True)
class Reargued:
    """One entry's score before and after, or why it was left as it was."""

    entry: str
    before: float | None
    after: float | None
    skipped: str = ""


def reargue(loaded, score: dict) -> tuple[dict, Reargued]:
    """The score with survivors and argued mutants judged again under the entry's arguments now."""
    name = score.get("entry", "")
    names = {e.name for e in loaded.entries}
    if name not in names or loaded.entry(name).kernel.compiled is None:
        return score, Reargued(name, score.get("score_pct"), score.get("score_pct"), "no such CUDA entry")
    entry = loaded.entry(name)
    base = resolve_source(_folder(loaded), entry.kernel.compiled.source)
    text = base.read_text()
    if hashlib.sha256(text.encode()).hexdigest() != score.get("source_sha256"):
        return score, Reargued(name, score.get("score_pct"), score.get("score_pct"), "its source changed since")
    if score["by_status"].get("uncovered") and any("status" not in s for s in score.get("survivors", [])):
        return score, Reargued(name, score.get("score_pct"), score.get("score_pct"),
                               "it does not say which survivors run under no case")
    judged = _judged(text, entry, score)
    if judged is None:
        return score, Reargued(name, score.get("score_pct"), score.get("score_pct"),
                               "its survivors are not the mutants its seed makes")
    campaign = Campaign(name, entry.kernel.compiled.source, score["source_sha256"], score.get("sm", ""), SEED, judged)
    campaign.argue(entry.mutation)
    updated = _recounted(score, campaign.counts())
    return updated, Reargued(name, score.get("score_pct"), updated["score_pct"])


def _folder(loaded) -> Path:
    return Path(loaded.path).resolve().parent


def _judged(text: str, entry, score: dict) -> list[MutantResult] | None:
    """The score's survivors and argued mutants with their lines and changes, or None where a diff differs."""
    made = {m.ident: m for m in operators_for(entry.kernel)(text, tuple(entry.family.kernel_abi()), score["mutants"],
                                          score.get("seed", SEED))}
    judged = []
    for status, listed in (("survived", score.get("survivors", [])), ("argued", score.get("argued", []))):
        for item in listed:
            mutant = made.get(item["ident"])
            if mutant is None or mutant.diff(text) != item["diff"]:
                return None
            judged.append(MutantResult(mutant.ident, mutant.kind, mutant.line, mutant.change, item["diff"],
                                       item.get("status", status)))
    return judged


def _recounted(score: dict, now: dict) -> dict:
    """The score's counts of the mutants the gates judged otherwise, with those of the survivors and argued
    mutants as the arguments put them now (`now`: the counts of those alone)."""
    by_status = {k: v for k, v in score["by_status"].items() if k not in REJUDGED} | now["by_status"]
    by_class = {kind: {k: v for k, v in score["by_class"].get(kind, {}).items() if k not in REJUDGED}
                | now["by_class"].get(kind, {}) for kind in score["by_class"].keys() | now["by_class"].keys()}
    return {**score, "by_status": by_status, "by_class": {k: v for k, v in by_class.items() if v},
            "score_pct": score_pct(by_status), "survivors": now["survivors"], "argued": now["argued"]}
