"""The collection tree: a contract file, an entry (its gates as items) and `control` (the controls as items)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcontract.gatetable import title
from kcontract.pytest_plugin.failures import (
    Crash,
    FailureRepr,
    KcontractFailure,
    KnownFindingPasses,
)
from kcontract.pytest_plugin.markers import family_marker, gate_marker
from kcontract.pytest_plugin.runner import TaskRunner, gpu_skip_reason, needs_gpu
from kcontract.pytest_plugin.stash import RUNNER
from kcontract.pytest_plugin.verdict import judge_control, judge_entry
from kcontract.report.lines import who

CONTROLS = "control"  # the name of the node that holds a contract's controls


class ContractFile(pytest.File):
    """A contract given with --kcontract."""

    def __init__(self, *, run, **kwargs):
        super().__init__(**kwargs)
        self.run = run

    def collect(self):
        """An entry node per entry with gates to run, then the controls' node."""
        for entry in self.run.loaded.entries:
            if self.run.entry_tasks(entry.name):
                yield EntryNode.from_parent(self, name=entry.name, run=self.run)
        if self.run.control_tasks():
            yield ControlNode.from_parent(self, name=CONTROLS, run=self.run)


class EntryNode(pytest.Collector):
    """One entry: an item per gate it runs."""

    def __init__(self, *, run, **kwargs):
        super().__init__(**kwargs)
        self.run = run

    def collect(self):
        """An item per gate, named `gate<N>`."""
        for task in self.run.entry_tasks(self.name):
            yield TaskItem.from_parent(self, name=gate_marker(task.gates[0]), run=self.run, task=task)


class ControlNode(pytest.Collector):
    """The contract's controls: an item per control, run at the gate it is planted at."""

    def __init__(self, *, run, **kwargs):
        super().__init__(**kwargs)
        self.run = run

    def collect(self):
        """An item per control, named as the control."""
        for task in self.run.control_tasks():
            yield TaskItem.from_parent(self, name=task.name, run=self.run, task=task)


def skip(reason: str) -> None:
    """Skip the running item, reported at its entry or control in the contract file."""
    raise pytest.skip.Exception(reason, _use_item_location=True)


class TaskItem(pytest.Item):
    """One kcontract task: an entry's gate, or a control at its planted gate."""

    def __init__(self, *, run, task, **kwargs):
        super().__init__(**kwargs)
        self.run, self.task = run, task
        family = run.loaded.entry(task.entry).family_name
        for marker in ("kcontract", gate_marker(task.gates[0]), family_marker(family)):
            self.add_marker(marker)
        if needs_gpu(run, task):
            self.add_marker("gpu")
        if task.kind == "control":
            self.extra_keyword_matches.add(task.entry)  # -k ENTRY takes its controls too, as `run --only` does

    def runtest(self) -> None:
        """Skip where the machine has no GPU the task needs; else run the task in a worker and report its verdict."""
        reason = gpu_skip_reason(self.run, self.task)
        if reason is not None:
            skip(reason)
        runner = self.config.stash.get(RUNNER, None)
        if runner is None:
            runner = self.config.stash[RUNNER] = TaskRunner()
        ours = [i.task for i in self.session.items if isinstance(i, TaskItem) and i.run is self.run]
        problem = runner.prepare(self.run, ours or [self.task])
        if problem is not None:
            raise KcontractFailure(problem)
        outcome = runner.run(self.task, self.run.worker_path(), self.run.loaded, str(self.run.path))
        verbose = self.config.get_verbosity() > 0
        if self.task.kind == "entry":
            self._report(judge_entry(outcome, self.run.loaded.known_findings, self.run.arg, verbose))
        else:
            self._report(judge_control(outcome, self.run.loaded.control(self.task.name).gate, verbose))

    def _report(self, verdict) -> None:
        """Fail with kcontract's lines, xfail a known finding, skip a gate that had nothing to run, or pass."""
        self.user_properties.append(("kcontract", verdict.text))
        if verdict.note:
            self.warn(KnownFindingPasses(verdict.note))
        if verdict.state == "failed":
            raise KcontractFailure(verdict.text)
        self.add_report_section("call", "kcontract", verdict.text)
        if verdict.state == "known":
            pytest.xfail(f"known finding: {verdict.text.splitlines()[0]}")
        if verdict.state == "skipped":
            skip(verdict.text)

    def repr_failure(self, excinfo, style=None):
        """kcontract's lines for a red gate or a missed control; pytest's own report for anything else."""
        if isinstance(excinfo.value, KcontractFailure):
            path, line, _ = self.reportinfo()
            text = excinfo.value.text
            return FailureRepr(text, Crash(str(path), (line or 0) + 1, text.splitlines()[0] if text else ""))
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        """The contract file, the line its entry or control starts at, and what the item checks."""
        line = self.run.line(self.task)
        return Path(self.run.absolute), (line - 1 if line else 0), f"{who(self.task)}: {title(self.task.gates[0])}"
