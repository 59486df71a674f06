"""What running one entry or control produced, as plain picklable data, and the progress it reports."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from kcontract.gates.base import GateResult, Offender
from kcontract.gates.range_verdict import joined, trimmed


OUT_OF_MEMORY = "out of memory"  # a task's status where the device had too little memory beside other tasks


@dataclass
class Task:
    """One entry, or one control standing in for its entry, to run in a worker."""

    kind: str  # "entry" or "control"
    name: str  # entry or control name
    entry: str  # the entry whose family and cases are used
    contract_path: str  # as the user wrote it (workers share the parent's working directory)
    gates: list[int]
    seed: int
    case: str | None = None
    timeout: float = 300.0  # seconds each gate of the task may take in its worker
    cache: bool = True  # take references from the on-disk cache (False: `--no-cache`)
    strict_records: bool = False  # gate 5's toolchain findings fail (`--strict-records`)
    device_bytes: int = 0  # device memory its largest case holds at once (its calls' buffers and reference)
    interpret: bool = False  # its Triton kernel runs through Triton's interpreter on the CPU (`--interpret`)

    @property
    def key(self) -> tuple:
        """What tells it from a run's other tasks, the same in a worker's copy: kind, name, gates and case."""
        return self.kind, self.name, tuple(self.gates), self.case


@dataclass
class Span:
    """Where and when one task ran in the pool: its gates, declared device bytes, worker slot and
    `time.monotonic()` stamps of when it was ready, when its device bytes fit and it started, and when it ended."""

    gates: list[int]
    device_bytes: int
    slot: int
    queued: float
    started: float
    ended: float


@dataclass
class Outcome:
    """A task's result: per-gate results, or how it died."""

    task: Task
    status: str = "ran"  # "ran", "crashed", "timed out", "error", "environment" (the machine cannot run it),
    # "interrupted" (the run was stopped before the task ended), "out of memory" (too little device memory beside
    # other tasks: the runner runs it again alone)
    detail: str = ""  # one line: how it crashed or what raised
    trace: str = ""  # the traceback behind an error, shown with --verbose
    gates: dict[int, GateResult] = field(default_factory=dict)
    seconds: float = 0.0
    fatal: bool = False  # the worker cannot run another task (a faulted GPU context)
    kernel: dict = field(default_factory=dict)  # which compiled kernel ran (source, SM, toolchain, cubin sha256)
    spans: list[Span] = field(default_factory=list)  # when and where each task behind it ran (the pool's clock)

    def failed_gates(self) -> list[int]:
        """Gates that went red (every gate when the task did not run to the end)."""
        if self.status != "ran":
            return list(self.task.gates)
        return [g for g, r in sorted(self.gates.items()) if not r.passed]


@dataclass
class Progress:
    """A worker's report: a case of a gate finished (result None), or a whole gate (with its result)."""

    task: Task
    gate: int
    case: str | None = None
    result: GateResult | None = None


def merge_outcomes(outcomes: list[Outcome]) -> list[Outcome]:
    """One outcome per entry or control, its gates gathered from the per-gate tasks (a gate split into a task per
    case joined into one result, as one task running its cases gives), in first-seen order."""
    merged: dict[tuple[str, str], Outcome] = {}
    for o in outcomes:
        key = (o.task.kind, o.task.name)
        if key not in merged:
            merged[key] = dataclasses.replace(o, task=dataclasses.replace(o.task, gates=list(o.task.gates)),
                                              gates=dict(o.gates))
            continue
        m = merged[key]
        if m.task.case != o.task.case:
            m.task.case = None  # the cases of a split gate: the merged task is the whole gate
        m.task.gates = sorted(set(m.task.gates) | set(o.task.gates))
        both = {g: joined(m.gates[g], r) for g, r in o.gates.items() if g in m.gates}
        m.gates = dict(sorted({**m.gates, **o.gates, **both}.items()))
        m.seconds += o.seconds
        m.spans = m.spans + o.spans
        m.kernel = m.kernel or o.kernel
        if m.status == "ran" and o.status != "ran":
            m.status, m.detail, m.trace, m.fatal = o.status, o.detail, o.trace, o.fatal
    for m in merged.values():
        m.gates = {g: trimmed(r) for g, r in m.gates.items()}
    return list(merged.values())


def outcome_from_plain(data: dict) -> Outcome:
    """An Outcome back from its JSON form (a report's or a receipt row's), gate results and offenders included."""
    task_fields = {f.name for f in dataclasses.fields(Task)}
    task = Task(**{k: v for k, v in (data.get("task") or {}).items() if k in task_fields})
    gates = {}
    for number, plain in (data.get("gates") or {}).items():
        fields = {k: v for k, v in plain.items() if k in GateResult.__dataclass_fields__}
        if isinstance(fields.get("worst"), dict):
            fields["worst"] = Offender(**fields["worst"])
        fields["causes"] = tuple(fields.get("causes") or ())
        gates[int(number)] = GateResult(**fields)
    kept = {k: data[k] for k in ("status", "detail", "trace", "seconds", "fatal", "kernel") if k in data}
    return Outcome(task, gates=gates, **kept)
