"""Which tasks a run makes from the contract and the selection options; every option must match something."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from kcontract.contract.loaded import LoadedContract
from kcontract.errors import UsageError
from kcontract.family.cases import family_cases, main_cases
from kcontract.gatetable import gate
from kcontract.verdict.outcome import Task


@dataclass(frozen=True)
class Selection:
    """What the user asked `run` for."""

    only: tuple[str, ...] = ()
    controls: tuple[str, ...] = ()
    gate: int | None = None
    case: str | None = None
    seed: int | None = None
    no_controls: bool = False
    strict_records: bool = False

    @property
    def partial(self) -> bool:
        """Whether the run leaves part of the contract out."""
        return bool(self.only or self.controls or self.gate is not None or self.case is not None or
                    self.no_controls)


def plan_tasks(loaded: LoadedContract, contract_path: str, sel: Selection, cache: bool = True) -> list[Task]:
    """One task per entry and gate, largest entries first, then control tasks (each runs the gate it is planted
    at, after the entries whose references it shares); options that match nothing fail."""
    seed = loaded.seed if sel.seed is None else sel.seed
    names = [e.name for e in loaded.entries]
    entries = [e for e in loaded.entries if picked(e.name, sel.only)]
    if sel.only and not entries:
        raise UsageError(f"--only {' '.join(sel.only)} matches no entry; entries: {_few(names)}")
    missing = [c for c in sel.controls if c not in {k.name for k in loaded.controls}]
    if missing:
        raise UsageError(f"--control {', '.join(missing)}: no such control in {contract_path}; controls: "
                         f"{_few([c.name for c in loaded.controls])}")
    if sel.controls:
        entries = []
    chosen = {e.name for e in entries}
    controls = [] if sel.no_controls else [
        c for c in loaded.controls if c.name in sel.controls or (not sel.controls and c.entry in chosen)]
    if sel.gate is not None and not sel.controls:
        controls = [c for c in controls if c.gate == sel.gate]

    def gates_for(entry_name: str, planted: int | None = None) -> list[int]:
        entry = loaded.entry(entry_name)
        gates = [g for g in entry.gates if (sel.gate is None or g == sel.gate) and (planted is None or g == planted)]
        if sel.case is not None:
            gates = [g for g in gates if sel.case in family_cases(entry.family, g)]
        return gates

    tasks = [Task("entry", e.name, e.name, contract_path, [gate], seed, sel.case, e.timeout, cache,
                  sel.strict_records, device_bytes(e)) for e in sorted(entries, key=lambda e: -weight(e))
             for gate in gates_for(e.name)]
    tasks += [Task("control", c.name, c.entry, contract_path, gates_for(c.entry, c.gate), seed, sel.case,
                   c.timeout or loaded.entry(c.entry).timeout, cache, sel.strict_records,
                   device_bytes(loaded.entry(c.entry))) for c in controls]
    _refuse_empty(loaded, tasks, sel, [e.name for e in entries] + [c.entry for c in controls])
    return [t for t in tasks if t.gates]


def start_order(tasks: list[Task], durations: dict[tuple[str, str, int], float] | None = None) -> list[int]:
    """The order the pool starts tasks in (outcomes keep the plan's): entries and the controls at gates without
    references (which share none with their entry and run every variant) longest first by `durations` (seconds
    per kind, name and gate when they last ran; a task with a gate not among them first, in plan order), then the
    controls that share their entry's references."""
    durations = durations or {}

    def rank(index: int) -> tuple[bool, float]:
        task = tasks[index]
        shares = task.kind == "control" and any(gate(g).references for g in task.gates)
        known = [durations.get((task.kind, task.name, g)) for g in task.gates]
        return shares, -(float("inf") if None in known else sum(known))

    return sorted(range(len(tasks)), key=rank)


def picked(name: str, globs: tuple[str, ...]) -> bool:
    """Whether `--only` globs pick the name (no globs pick every name)."""
    return not globs or any(fnmatch.fnmatch(name, g) for g in globs)


def device_bytes(entry) -> int:
    """Device memory the entry's largest case holds where a GPU runs it: its calls' buffers (a kernel on the
    device), its drawn inputs and reference, and the reference's working arrays (references compute on the GPU
    there). A worker's memory pool is capped at it (runner/execute.py)."""
    family, on_device = entry.family, entry.kernel.cuda is not None or bool(entry.kernel.python and entry.kernel.device)
    return max((family.case_bytes(c) + (family.case_buffer_bytes(c) if on_device else 0) +
                family.reference_device_bytes(c) for c in main_cases(family)), default=0)


def weight(entry) -> int:
    """How heavy an entry's gates are: the host bytes of its largest case."""
    family = entry.family
    return max((family.case_bytes(c) for c in main_cases(family)), default=0)


def _refuse_empty(loaded: LoadedContract, tasks: list[Task], sel: Selection, considered: list[str]) -> None:
    """A selection that leaves nothing to check is a usage error that says why."""
    if any(t.gates for t in tasks):
        for task in tasks:
            if not task.gates and task.kind == "control" and task.name in sel.controls:
                raise UsageError(f"--control {task.name}: nothing of it matches --gate/--case")
        return
    subject = ", ".join(sorted(set(considered))[:6]) or "the selected entries"
    if sel.case is not None:
        known = sorted({c for name in set(considered) for g in loaded.entry(name).gates
                        for c in family_cases(loaded.entry(name).family, g)})
        raise UsageError(f"--case {sel.case}: {subject} has no such case"
                         f"{' under --gate ' + str(sel.gate) if sel.gate else ''}; cases: {_few(known)}")
    if sel.gate is not None:
        why = f" (gate {sel.gate} checks launch records of CUDA kernels)" if not gate(sel.gate).launches else ""
        raise UsageError(f"--gate {sel.gate}: {subject} runs no gate {sel.gate}{why}")
    raise UsageError("nothing to run: the selection holds no entry or control")


def _few(names: list[str]) -> str:
    """Up to eight names and a count of the rest."""
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "") if names else "none"
