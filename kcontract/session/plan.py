"""Which tasks a run makes from the contract and the selection options; every option must match something."""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
from dataclasses import dataclass, field

from kcontract.contract.loaded import LoadedContract
from kcontract.errors import UsageError
from kcontract.family.cases import family_cases, main_cases, selected_cases
from kcontract.gatetable import gate
from kcontract.verdict.outcome import Task
from kcontract.verdict.summary import plural


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
    interpret: bool = False  # Triton kernels only, through Triton's interpreter on the CPU

    @property
    def partial(self) -> bool:
        """Whether the run leaves part of the contract out."""
        return bool(self.only or self.controls or self.gate is not None or self.case is not None or
                    self.no_controls or self.interpret)


@dataclass
class Plan:
    """The tasks a run makes, and what planned them: the rows `--stale` refreshes, the shard's coverage."""

    tasks: list[Task]
    refresh: object = None  # receipts.stale's plan, with --stale
    covers: object = None  # what a shard's receipt covers
    notes: list[str] = field(default_factory=list)  # one line each: the stale rows, the shard's share


def plan_tasks(loaded: LoadedContract, contract_path: str, sel: Selection, cache: bool = True) -> list[Task]:
    """One task per entry and gate, largest entries first, then control tasks (each runs the gate it is planted
    at, after the entries whose references it shares); options that match nothing fail."""
    entries = _chosen_entries(loaded, contract_path, sel)
    controls = _chosen_controls(loaded, sel, {e.name for e in entries})
    seed = loaded.seed if sel.seed is None else sel.seed
    task = functools.partial(Task, contract_path=contract_path, seed=seed, case=sel.case, cache=cache,
                             strict_records=sel.strict_records, interpret=sel.interpret)
    tasks = _entry_tasks(loaded, sel, entries, task) + _control_tasks(loaded, sel, controls, task)
    _refuse_empty(loaded, tasks, sel, [e.name for e in entries] + [c.entry for c in controls])
    return [t for t in tasks if t.gates]


def _entry_tasks(loaded: LoadedContract, sel: Selection, entries: list, task) -> list[Task]:
    """A task per entry and gate, the heaviest entries first."""
    return [task("entry", e.name, e.name, gates=[gate], timeout=e.timeout, device_bytes=device_bytes(e))
            for e in sorted(entries, key=lambda e: -weight(e)) for gate in _gates_for(loaded, sel, e.name)]


def _control_tasks(loaded: LoadedContract, sel: Selection, controls: list, task) -> list[Task]:
    """A task per control, at the gate it is planted at, with its entry's time limit unless it has its own."""
    return [task("control", c.name, c.entry, gates=_gates_for(loaded, sel, c.entry, c.gate),
                 timeout=c.timeout or loaded.entry(c.entry).timeout, device_bytes=device_bytes(loaded.entry(c.entry)))
            for c in controls]


def _chosen_entries(loaded: LoadedContract, contract_path: str, sel: Selection) -> list:
    """The entries `--only` picks (none where `--control` names controls); a glob or control that matches nothing
    is a usage error."""
    entries = [e for e in loaded.entries if picked(e.name, sel.only)]
    if sel.only and not entries:
        names = [e.name for e in loaded.entries]
        raise UsageError(f"--only {' '.join(sel.only)} matches no entry; entries: {_few(names)}")
    _refuse_unknown_controls(loaded, contract_path, sel)
    if sel.interpret:
        entries = _interpretable(loaded, sel, entries)
    return [] if sel.controls else entries


def _interpretable(loaded: LoadedContract, sel: Selection, entries: list) -> list:
    """`--interpret`: the entries of Triton kernels among those picked; a selection with none, or `--control`
    naming a control of another kind, is a usage error."""
    triton = _triton_entries(loaded, sel)
    kept = [e for e in entries if e.kernel.triton is not None]
    if sel.only and not kept:
        raise UsageError(f"--interpret runs Triton kernels, and --only {' '.join(sel.only)} picks none; Triton "
                         f"entries: {_few(triton)}")
    return kept


def _triton_entries(loaded: LoadedContract, sel: Selection) -> list[str]:
    """The contract's Triton entries; none, or `--control` naming a control of another kind, is a usage error."""
    triton = [e.name for e in loaded.entries if e.kernel.triton is not None]
    if not triton:
        raise UsageError(f"--interpret runs Triton kernels through Triton's interpreter, and {loaded.path} has no "
                         f"Triton entry")
    others = [c for c in sel.controls if loaded.entry(loaded.control(c).entry).kernel.triton is None]
    if others:
        raise UsageError(f"--interpret --control {', '.join(others)}: not a control of a Triton entry; Triton "
                         f"entries: {_few(triton)}")
    return triton


def interpret_note(loaded: LoadedContract, tasks: list[Task]) -> str:
    """What `--interpret` runs and leaves out, in one line."""
    entries = {t.name for t in tasks if t.kind == "entry"}
    controls = {t.name for t in tasks if t.kind == "control"}
    others = sum(e.kernel.triton is None for e in loaded.entries)
    return (f"--interpret: {plural(len(entries), 'Triton entry', 'Triton entries')} and "
            f"{plural(len(controls), 'control')} through Triton's interpreter on the CPU (numpy's arithmetic, not "
            f"a GPU's); {plural(others, 'entry', 'entries')} of other kernel kinds not run")


def _refuse_unknown_controls(loaded: LoadedContract, contract_path: str, sel: Selection) -> None:
    """A `--control` that names no control of the contract is a usage error listing those it has."""
    missing = [c for c in sel.controls if c not in {k.name for k in loaded.controls}]
    if missing:
        raise UsageError(f"--control {', '.join(missing)}: no such control in {contract_path}; controls: "
                         f"{_few([c.name for c in loaded.controls])}")


def _chosen_controls(loaded: LoadedContract, sel: Selection, chosen: set[str]) -> list:
    """The controls named, else those planted on the chosen entries (at `--gate` where given)."""
    if sel.no_controls:
        return []
    controls = [c for c in loaded.controls if c.name in sel.controls or (not sel.controls and c.entry in chosen)]
    if sel.gate is not None and not sel.controls:
        controls = [c for c in controls if c.gate == sel.gate]
    return controls


def _gates_for(loaded: LoadedContract, sel: Selection, entry_name: str, planted: int | None = None) -> list[int]:
    """The entry's gates the selection keeps (`planted`: only a control's gate), with `--case` among their cases."""
    entry = loaded.entry(entry_name)
    gates = [g for g in entry.gates if (sel.gate is None or g == sel.gate) and (planted is None or g == planted)]
    if sel.case is not None:
        gates = [g for g in gates if selected_cases(entry.family, g, sel.case)]
    return gates


def picked(name: str, globs: tuple[str, ...]) -> bool:
    """Whether `--only` globs pick the name (no globs pick every name)."""
    return not globs or any(fnmatch.fnmatch(name, g) for g in globs)


def device_bytes(entry) -> int:
    """Device memory the entry's largest case holds where a GPU runs it: its calls' buffers (a kernel on the
    device), its drawn inputs and reference, and the reference's working arrays (references compute on the GPU
    there). A worker's memory pool is capped at it (runner/execute.py)."""
    kernel = entry.kernel
    family, on_device = entry.family, kernel.compiled is not None or bool(kernel.python and kernel.device)
    return max((family.case_bytes(c) + (family.case_buffer_bytes(c) if on_device else 0) +
                family.reference_device_bytes(c) for c in main_cases(family)), default=0)


HELD_ROOM = 1.25  # a task's room over what it last held: the pool rounds blocks up and splits cached ones
HELD_SLACK = 256 << 20  # and a floor of room for small tasks


def declared_as_held(tasks: list[Task], held: dict[tuple[str, str, int], int]) -> list[Task]:
    """Tasks on the device whose every gate an earlier run measured (`held`: bytes per kind, name and gate, the
    receipt's live_gpu_mb) declare what those gates held at most, with room; the others keep their family's
    estimate."""
    found = []
    for task in tasks:
        known = [held.get((task.kind, task.name, g)) for g in task.gates]
        if task.device_bytes and known and None not in known:
            task = dataclasses.replace(task, device_bytes=int(max(known) * HELD_ROOM) + HELD_SLACK)
        found.append(task)
    return found


SPLIT_SECONDS = 8.0  # a range gate that took this long when it last ran runs a task per case, side by side


def split_by_case(loaded: LoadedContract, tasks: list[Task], durations: dict,
                  outputs: dict | None = None) -> list[Task]:
    """Each entry's range gate (references and ranges: gates 1, 3 and 4) that took SPLIT_SECONDS or more when it
    last ran (`durations`: seconds per kind, name and gate) and has several cases, as a task per case declaring the
    gate's device bytes, so its cases run side by side (their results join into one row); the rest as they are.
    Each case's share of its gate's seconds goes into `durations` under (kind, name, gate, case), by the outputs
    it checked (`outputs`: per gate, outputs checked per case label, as receipts/durations.gate_case_outputs
    reads them), so the pool starts the longest cases first."""
    found = []
    for task in tasks:
        cases = _cases_apart(loaded, task, durations)
        found += [dataclasses.replace(task, case=case) for case in cases] if cases else [task]
        if cases:
            key = (task.kind, task.name, *task.gates)
            _share_out(durations, key, cases, (outputs or {}).get(key) or {})
    return found


def _share_out(durations: dict, key: tuple, cases: list[str], checked: dict[str, int]) -> None:
    """A split gate's seconds shared out among its cases by the outputs each checked (a case's parts, such as
    `case/order_probes`, counted as its own), under (kind, name, gate, case); nothing where none were counted."""
    total = sum(checked.values())
    for case in cases if total else []:
        mine = sum(n for label, n in checked.items() if label == case or label.startswith(case + "/"))
        durations[(*key, case)] = durations[key] * mine / total


def _cases_apart(loaded: LoadedContract, task: Task, durations: dict) -> list[str]:
    """The cases a task runs apart, or [] where it stays whole."""
    if task.kind != "entry" or task.case is not None or len(task.gates) != 1:
        return []
    number = task.gates[0]
    if not gate(number).references or durations.get((task.kind, task.name, number), 0.0) < SPLIT_SECONDS:
        return []
    cases = family_cases(loaded.entry(task.entry).family, number)
    return cases if len(cases) > 1 else []


def weight(entry) -> int:
    """How heavy an entry's gates are: the host bytes of its largest case."""
    family = entry.family
    return max((family.case_bytes(c) for c in main_cases(family)), default=0)


def _refuse_empty(loaded: LoadedContract, tasks: list[Task], sel: Selection, considered: list[str]) -> None:
    """A selection that leaves nothing to check is a usage error that says why."""
    if not any(t.gates for t in tasks):
        raise _nothing_matches(loaded, sel, considered)
    for task in tasks:
        if not task.gates and task.kind == "control" and task.name in sel.controls:
            raise UsageError(f"--control {task.name}: nothing of it matches --gate/--case")


def _nothing_matches(loaded: LoadedContract, sel: Selection, considered: list[str]) -> UsageError:
    """Why a selection holds nothing to check: the case, the gate, or nothing at all."""
    subject = ", ".join(sorted(set(considered))[:6]) or "the selected entries"
    if sel.case is not None:
        known = sorted({c.rpartition("/")[2] for name in set(considered) for g in loaded.entry(name).gates
                        for c in family_cases(loaded.entry(name).family, g)})  # bare names: each picks every suite's
        return UsageError(f"--case {sel.case}: {subject} has no such case"
                          f"{' under --gate ' + str(sel.gate) if sel.gate else ''}; cases: {_few(known)}")
    if sel.gate is not None:
        why = f" (gate {sel.gate} checks launch records of CUDA kernels)" if not gate(sel.gate).launches else ""
        return UsageError(f"--gate {sel.gate}: {subject} runs no gate {sel.gate}{why}")
    return UsageError("nothing to run: the selection holds no entry or control")


def _few(names: list[str]) -> str:
    """Up to eight names and a count of the rest."""
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "") if names else "none"
