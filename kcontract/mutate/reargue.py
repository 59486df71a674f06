"""A receipt's mutation scores judged again under the contract's current `mutation.equivalent` arguments, with no
GPU: the mutants the gates missed stay measured; only which of them are argued equivalent changes.

A score is re-judged only where its source is the one measured, and each survivor's diff matches the mutant that
the campaign's seed makes again (which gives its line and change, what an argument names)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from kcontract.contract.paths import resolve_source
from kcontract.mutate.campaign import Campaign, MutantResult
from kcontract.mutate.operators import mutants

SEED = 0  # the seed a score's campaign ran with where the score does not record one


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
    if name not in names or loaded.entry(name).kernel.cuda is None:
        return score, Reargued(name, score.get("score_pct"), score.get("score_pct"), "no such CUDA entry")
    entry = loaded.entry(name)
    base = resolve_source(_folder(loaded), entry.kernel.cuda.source)
    text = base.read_text()
    if hashlib.sha256(text.encode()).hexdigest() != score.get("source_sha256"):
        return score, Reargued(name, score.get("score_pct"), score.get("score_pct"), "its source changed since")
    judged = _judged(text, entry, score)
    if score["by_status"].get("uncovered") and any("status" not in s for s in score.get("survivors", [])):
        judged = None  # an earlier record: which survivors are uncovered is not kept
    if judged is None:
        return score, Reargued(name, score.get("score_pct"), score.get("score_pct"),
                               "its survivors are not the mutants its seed makes")
    campaign = Campaign(name, entry.kernel.cuda.source, score["source_sha256"], score.get("sm", ""), SEED, judged)
    campaign.argue(entry.mutation)
    updated = _recounted(score, judged, campaign.counts())
    return updated, Reargued(name, score.get("score_pct"), updated["score_pct"])


def _folder(loaded) -> Path:
    return Path(loaded.path).resolve().parent


def _judged(text: str, entry, score: dict) -> list[MutantResult] | None:
    """The score's survivors and argued mutants with their lines and changes, or None where a diff differs."""
    made = {m.ident: m for m in mutants(text, tuple(entry.family.kernel_abi()), score["mutants"],
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


def _recounted(score: dict, judged: list[MutantResult], now: dict) -> dict:
    """The score's counts with its survivors and argued mutants moved to where the arguments put them."""
    by_status = {k: v for k, v in score["by_status"].items() if k not in ("survived", "argued", "uncovered")}
    by_class = {kind: {k: v for k, v in counts.items() if k not in ("survived", "argued", "uncovered")}
                for kind, counts in score["by_class"].items()}
    for m in judged:
        by_status[m.status] = by_status.get(m.status, 0) + 1
        by_class.setdefault(m.kind, {})[m.status] = by_class.get(m.kind, {}).get(m.status, 0) + 1
    by_class = {kind: counts for kind, counts in by_class.items() if counts}
    killed = by_status.get("killed", 0)
    missed = by_status.get("survived", 0) + by_status.get("uncovered", 0)
    pct = round(100.0 * killed / (killed + missed), 1) if killed + missed else None
    return {**score, "by_status": by_status, "by_class": by_class, "score_pct": pct,
            "survivors": now["survivors"], "argued": now["argued"]}
