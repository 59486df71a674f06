"""The words and cells a review shows in markdown and in text alike: speed rows, their caption, the exactness and
records lines, and the machine code's verdicts."""

from __future__ import annotations

from kcontract.gatetable import exactness_gate, records_gate
from kcontract.review.contract import Records
from kcontract.review.result import Review
from kcontract.review.speed import CallSpeed, noise_floor
from kcontract.sassdiff.diff import EQUAL

SPEED_COLUMNS = ("call", "base", "head", "change", "noise", "verdict")


def speed_cells(call: CallSpeed) -> tuple[str, ...]:
    """A call's row: name, base and head microseconds, change and noise in percent, verdict."""
    if call.base_us is None:
        return call.name, "", f"{call.head_us:,.1f}", "", "", call.verdict
    return (call.name, f"{call.base_us:,.1f}", f"{call.head_us:,.1f}", f"{call.change_pct:+.1f} %",
            f"{call.noise_pct:.1f} %", call.verdict)


def speed_caption(review: Review, calls: list[CallSpeed]) -> str:
    """How the calls were timed, and the noise floor they were judged against."""
    s = review.settings
    floor = noise_floor(calls)
    noise = f"; noise floor (A against A, B against B, and A loaded again) {floor:.1f} %" if floor is not None else ""
    return (f"ABBA x{s.rounds} against {review.base.short}, one process on one GPU; GPU µs, each slot a median of "
            f"{s.repeat} CUDA-event timings with L2 flushed, sides the medians of their slots{noise}; a call fails "
            f"{s.max_slower:g} % slower beyond its noise")


def callers_verdict(calls: list[CallSpeed]) -> str:
    """`unchanged`, or how many of the callers moved."""
    moved = [c for c in calls if c.verdict != "unchanged"]
    return "unchanged" if not moved else f"{len(moved)} of {len(calls)} calls moved"


def exactness_lines(review: Review) -> list[str]:
    """The exactness of the rows the review ran, of the head's whole receipt and of the base's."""
    part, number = review.contract, exactness_gate().number
    lines = [f"Gate {number}, the rows this review ran: {part.exactness_run.line()}.",
             f"Gate {number}, every row of the head's receipt: {part.exactness_head.line()}."]
    if part.exactness_base is not None:
        lines.append(f"Gate {number}, the base's receipt: {part.exactness_base.line()}.")
    return lines


def records_lines(review: Review) -> list[str]:
    """The records gate at the head against the base: rows that hold and fail, and limit problems."""
    part, number = review.contract, records_gate().number
    head, base = part.records_head, part.records_base
    lines = [f"Gate {number} at the head: {_records(head)}" + (f" (base: {_records(base)})." if base else ".")]
    lines += [f"Gate {number} fails at the head: {name}" for name in head.failed]
    return lines


def _records(records: Records) -> str:
    """`27 entries' launch records hold, 0 fail; 0 limit problems`."""
    return (f"{len(records.passed)} entries' launch records hold, {len(records.failed)} fail; "
            f"{records.limit_problems if records.limit_problems is not None else '?'} limit problems")


def unchanged_lines(review: Review) -> list[str]:
    """Per source: the SMs and functions whose machine code is equal; then the count of identical bytes and SASS."""
    diff = review.diff
    equal = sum(r.verdict in EQUAL for r in review.diff.results)
    return diff.source_lines() + [f"{equal} of {len(diff.results)} functions x SMs equal ({diff.summary()})"]


def changed_heads(review: Review) -> list[str]:
    """The first line of each changed function's block: verdict, source, function and SMs."""
    return [block.splitlines()[0] for block in review.diff.changed_blocks()]
