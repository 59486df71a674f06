"""A review as the markdown a pull request's reviewer reads, in the order of a receipt: environment and toolchain;
exactness; speed of the new and changed calls; current callers' speed, ABBA; the contract's SUMMARY, branch and
base; the records gate; machine code, changed and unchanged where it should be."""

from __future__ import annotations

from kcontract.gatetable import records_gate
from kcontract.review.cells import (
    SPEED_COLUMNS,
    callers_verdict,
    changed_heads,
    exactness_lines,
    records_lines,
    speed_caption,
    speed_cells,
    unchanged_lines,
)
from kcontract.review.result import Review
from kcontract.review.speed import CALLER, CHANGED

SECTIONS = ("Environment and toolchain", "Exactness", "Speed of new and changed calls",
            "Current callers' speed, ABBA", "Contract SUMMARY, branch and base",
            f"Gate {records_gate().number}", "Machine code, changed and unchanged where it should be")


def review_markdown(review: Review) -> str:
    """The whole review, headed by its REVIEW line."""
    parts = [_environment(review), _exactness(review), _changed_speed(review), _callers_speed(review),
             _contract(review), _records(review), _machine_code(review)]
    head = [f"## kcontract review: {review.base.given} -> {review.head.given}", "", f"**{_md(review.line())}**"]
    head += ["", *[f"- FAIL: {_md(f)}" for f in review.failures()]] if review.failures() else []
    head += ["", *[f"- note: {_md(n)}" for n in review.notes]] if review.notes else []
    body = [f"\n### {title}\n\n" + "\n".join(lines) for title, lines in zip(SECTIONS, parts)]
    return "\n".join(head) + "\n" + "\n".join(body) + "\n"


def _md(text: str) -> str:
    """Text in a table cell or a line: pipes escaped, no line breaks."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """A markdown table."""
    return [f"| {' | '.join(columns)} |", f"|{'---|' * len(columns)}",
            *[f"| {' | '.join(_md(c) for c in row)} |" for row in rows]]


def _environment(review: Review) -> list[str]:
    """The revisions, then the machine and toolchain a line each."""
    lines = [f"- base: `{review.base.given}` ({review.base.short})",
             f"- head: `{review.head.given}` ({review.head.short})"]
    return lines + [f"- {key}: {value}" for key, value in review.environment.items()]


def _exactness(review: Review) -> list[str]:
    return [f"- {line}" for line in exactness_lines(review)]


def _speed(review: Review, role: str, none: str) -> list[str]:
    """A caption and a table of the calls of one role, or the line saying there are none."""
    calls = review.calls(role)
    if not calls:
        return [none]
    return [speed_caption(review, calls) + ":", "", *_table(SPEED_COLUMNS, [speed_cells(c) for c in calls])]


def _changed_speed(review: Review) -> list[str]:
    changed = [f"- {name}: {why}" for name, why in review.changes.changed.items()]
    return changed + ([""] if changed else []) + _speed(review, CHANGED, "No entry's kernel changed: nothing to time.")


def _callers_speed(review: Review) -> list[str]:
    calls = review.calls(CALLER)
    head = [f"Current callers' speed: {callers_verdict(calls)}.", ""] if calls else []
    return head + _speed(review, CALLER, "No other entry shares a source file with a changed one.")


def _contract(review: Review) -> list[str]:
    part = review.contract
    base = part.base_summary or f"no receipt at {review.base.short}: every row ran"
    lines = ["```", f"branch: {part.head_summary}", f"base:   {base}", "```", "", f"- {part.plan}"]
    if part.base_receipt:
        lines.append(f"- the base's receipt: `{part.base_receipt}` at {review.base.short}, refreshed at the head")
    return lines


def _records(review: Review) -> list[str]:
    return [f"- {line}" for line in records_lines(review)]


def _machine_code(review: Review) -> list[str]:
    """Changed functions, then per source what stayed equal, then the SASS diffs folded away."""
    lines = [f"- {line}" for line in changed_heads(review)] or ["- no function's machine code changed"]
    lines += [f"- {line}" for line in unchanged_lines(review)]
    diffs = [block for block in review.diff.changed_blocks() if "\n" in block]
    if diffs:
        lines += ["", "<details><summary>SASS diffs</summary>", "", "```diff", *diffs, "```", "", "</details>"]
    return lines
