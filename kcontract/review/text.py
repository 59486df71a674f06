"""A review as plain text for a terminal or a log, every line within 80 columns (a name longer than a line keeps
its own), in the markdown's order, ending in the REVIEW line."""

from __future__ import annotations

import textwrap

from kcontract.review.cells import (
    callers_verdict,
    changed_heads,
    exactness_lines,
    records_lines,
    speed_caption,
    speed_cells,
    unchanged_lines,
)
from kcontract.review.markdown import SECTIONS
from kcontract.review.result import Review
from kcontract.review.speed import CALLER, CHANGED

WIDTH = 80


def _wrapped(lines: list[str], indent: str = "  ") -> list[str]:
    """Each line cut into lines of WIDTH at most, its rest indented further."""
    return [cut for line in lines for cut in textwrap.wrap(line, WIDTH, initial_indent=indent,
                                                           subsequent_indent=indent + "  ", break_long_words=False,
                                                           break_on_hyphens=False) or [""]]


def _speed(review: Review, role: str) -> list[str]:
    """The caption, then a call per two lines: its name, then base, head, change, noise and verdict."""
    calls = review.calls(role)
    if not calls:
        return _wrapped(["none"])
    lines = _wrapped([speed_caption(review, calls)])
    if role == CALLER:
        lines += _wrapped([f"current callers' speed: {callers_verdict(calls)}"])
    for call in calls:
        name, base, head, change, noise, verdict = speed_cells(call)
        said = f"base {base} us, head {head} us, {change}, noise {noise}" if base else f"head {head} us"
        lines += _wrapped([name]) + _wrapped([f"{said}: {verdict}"], "      ")
    return lines


def _environment(review: Review) -> list[str]:
    return _wrapped([f"base {review.base.given} ({review.base.short}), head {review.head.given} "
                     f"({review.head.short})", *[f"{key}: {value}" for key, value in review.environment.items()]])


def _changed(review: Review) -> list[str]:
    return _wrapped([f"{name}: {why}" for name, why in review.changes.changed.items()]) + _speed(review, CHANGED)


def _contract(review: Review) -> list[str]:
    part = review.contract
    return _wrapped([f"branch: {part.head_summary}", f"base: {part.base_summary or 'no receipt at the base'}",
                     part.plan])


def review_text(review: Review) -> list[str]:
    """The review's lines, the REVIEW line last."""
    parts = [_environment(review), _wrapped(exactness_lines(review)), _changed(review), _speed(review, CALLER),
             _contract(review), _wrapped(records_lines(review)),
             _wrapped(changed_heads(review) + unchanged_lines(review))]
    lines = [f"note: {n}" for n in review.notes]
    for title, part in zip(SECTIONS, parts):
        lines += [title, *part]
    return lines + [f"FAIL {line}" for line in review.failures()] + [review.line()]
