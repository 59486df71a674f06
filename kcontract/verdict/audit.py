"""Whether a run checked what its plan claims: every planned task ended with an outcome, every gate of a task that
ran has a result that checked something, and the SUMMARY's counts add up to the plan. What does not is named, one
line each, and fails the run."""

from __future__ import annotations

from kcontract.verdict.outcome import Outcome, Task


def who(task: Task) -> str:
    """`entry e gate 1` or `control c gate 4`."""
    return f"{task.kind} {task.name} gate{'s' if len(task.gates) > 1 else ''} {', '.join(map(str, task.gates))}"


def without_outcome(tasks: list[Task], outcomes: list[Outcome | None]) -> list[Outcome]:
    """Each planned task's outcome; one no worker reported becomes an error that says so (never a pass)."""
    return [o if o is not None else Outcome(t, status="error", detail="planned, but no outcome came back: it did "
                                                                        "not run") for t, o in zip(tasks, outcomes)]


def unchecked(tasks: list[Task], outcomes: list[Outcome]) -> list[str]:
    """Why the run did not check what its plan claims, one line each (empty: it did)."""
    if not tasks:
        return ["the run executed no task"]
    if len(outcomes) != len(tasks):
        return [f"{len(tasks)} tasks planned, {len(outcomes)} outcomes came back"]
    found: list[str] = []
    skipped: dict[tuple[str, str], bool] = {}  # per entry or control: whether every gate it ran was skipped
    for task, outcome in zip(tasks, outcomes):
        found += gaps(task, outcome)
        key = (task.kind, task.name)
        skipped[key] = skipped.get(key, True) and outcome.status == "ran" and all(
            r.skipped for r in outcome.gates.values())
    return found + [f"{kind} {name}: every gate skipped, nothing was checked"
                    for (kind, name), only_skips in skipped.items() if only_skips]


def gaps(task: Task, outcome: Outcome) -> list[str]:
    """Where a task's outcome does not answer for its plan: another task's, a gate with no result, or a gate that
    passed having checked nothing."""
    if outcome.task.name != task.name or outcome.task.kind != task.kind:
        return [f"{who(task)}: its outcome is of {who(outcome.task)}"]
    if outcome.status != "ran":
        return []  # it fails or is missed as it ended
    return ([f"{who(task)}: ran, but gate {g} has no result" for g in task.gates if g not in outcome.gates] +
            [f"{who(task)}: gate {g} passed having checked nothing" for g, r in outcome.gates.items()
             if r.passed and not r.skipped and r.checked == 0])


def disagreements(summary, tasks: list[Task]) -> list[str]:
    """Where the SUMMARY's counts do not add up to the plan's entries and controls."""
    entries = len({t.name for t in tasks if t.kind == "entry"})
    controls = len({t.name for t in tasks if t.kind == "control"})
    found = []
    if summary.kernels != entries or summary.passed + summary.failed != summary.kernels:
        found.append(f"SUMMARY counts {summary.kernels} kernels ({summary.passed} pass, {summary.failed} fail) for "
                     f"{entries} planned entries")
    if summary.controls != controls or summary.red + summary.missed != summary.controls:
        found.append(f"SUMMARY counts {summary.controls} controls ({summary.red} red, {summary.missed} missed) for "
                     f"{controls} planned controls")
    return found
