"""The order the pool starts a run's tasks in: the longest first, where earlier runs say how long they took."""

from __future__ import annotations

from kcontract.gatetable import gate
from kcontract.verdict.outcome import Task


def start_order(tasks: list[Task], durations: dict[tuple[str, str, int], float] | None = None) -> list[int]:
    """The order the pool starts tasks in (outcomes keep the plan's): entries and the controls at gates without
    references (which share none with their entry and run every variant) longest first by `durations` (seconds
    per kind, name and gate when they last ran, or per kind, name, gate and case for a task of one case of a split
    gate; a task with a gate not among them first, in plan order), then the controls that share their entry's
    references."""
    durations = durations or {}

    def rank(index: int) -> tuple[bool, float]:
        task = tasks[index]
        shares = task.kind == "control" and any(gate(g).references for g in task.gates)
        known = [durations.get((task.kind, task.name, g, task.case), durations.get((task.kind, task.name, g)))
                 for g in task.gates]
        return shares, -(float("inf") if None in known else sum(known))

    return sorted(range(len(tasks)), key=rank)
