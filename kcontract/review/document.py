"""A review as JSON for tools: the revisions, the environment, what changed, the contract part, every timed call
with its slots, the failures, the exit code and the REVIEW line."""

from __future__ import annotations

import dataclasses

from kcontract.review.result import Review

KIND = "kcontract-review"


def review_document(review: Review) -> dict:
    """The review as one JSON document."""
    diff = review.diff
    return {
        "kind": KIND, "base": dataclasses.asdict(review.base), "head": dataclasses.asdict(review.head),
        "environment": review.environment, "settings": dataclasses.asdict(review.settings), "notes": review.notes,
        "machine_code": {"summary": diff.summary(), "sources": diff.source_lines(), "sms": diff.sms,
                         "functions": [{"source": r.label, "function": r.expression, "sm": r.sm, "verdict": r.verdict}
                                       for r in diff.results],
                         "failures": diff.failures},
        "changed": review.changes.changed, "callers": review.changes.callers,
        "contract": dataclasses.asdict(review.contract),
        "speed": [dataclasses.asdict(c) | {"name": c.name} for c in review.speed],
        "failures": review.failures(), "exit_code": review.exit_code, "line": review.line(),
    }
