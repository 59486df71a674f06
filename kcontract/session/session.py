"""The session of one command on one contract: the contract loaded once, the machine checked in one place for
every command, and a whole `kcontract run` held in order (`Session.run`): the tasks planned (selection,
`--stale`, shards), checked and built once, run in the pool, reported and written while listeners hear each step,
and closed with the SUMMARY and its exit code. Front doors parse options, build the listeners and print."""

from __future__ import annotations

import functools
import time
from typing import Callable, Iterable

from kcontract.builds.builds import Builds
from kcontract.cachedir import cache_root
from kcontract.cachesize import keep_under_cap
from kcontract.capacity import usable_cores
from kcontract.contract.loader import load_contract
from kcontract.gatetable import launching
from kcontract.receipts.currency import needs_gpu
from kcontract.receipts.durations import gate_case_outputs, gate_live_bytes, gate_seconds, newest_whole_receipt
from kcontract.receipts.stale import plan_stale
from kcontract.receipts.write import run_receipt
from kcontract.refcache import holds_any, reference_root
from kcontract.report.json_report import run_document
from kcontract.session.listeners import Listeners, RunListener
from kcontract.session.options import RunOptions
from kcontract.launch.interpret import interpreter_ready
from kcontract.session.plan import Plan, declared_as_held, interpret_note, plan_tasks, split_by_case
from kcontract.session.prebuild import prebuild
from kcontract.session.preflight import Ready, check_machine
from kcontract.session.run_result import RunResult, run_contract, work_units
from kcontract.session.shard import shard_tasks
from kcontract.session.workers import auto_jobs
from kcontract.verdict.outcome import Outcome, Task

__all__ = ["Plan", "RunResult", "Session"]


class Session:
    """One command on one contract: the contract loaded once, its kernels' `Builds` made once when first asked for,
    and what the machine check found (`ready`)."""

    def __init__(self, contract_path: str, *, compile_jobs: int | None = None, progress=None, recompile: bool = False,
                 import_kernels: bool = True):
        """`compile_jobs`: worker processes for cold compiles (default: one per usable core); `progress` hears each
        batch of compiles; `recompile`: compile every kernel afresh and compare it with the cache;
        `import_kernels`: import the Python kernels to check their arguments (commands that only read receipts
        need not)."""
        self.path = contract_path
        self.started, self.begun = time.monotonic(), time.time()  # begun: wall clock, as cache items are stamped
        self.loaded = load_contract(contract_path, import_kernels=import_kernels)
        self._compiles = {"jobs": compile_jobs or usable_cores(), "progress": progress, "recompile": recompile}
        self.ready: Ready | None = None

    @functools.cached_property
    def builds(self) -> Builds:
        """The contract's kernels, built where first asked for (a command that builds nothing makes no cache)."""
        return Builds.of(self.loaded, **self._compiles)

    def machine(self, *, cuda: bool, gpu: bool, outputs: dict[str, str | None] | None = None, names=(), tools=(),
                say: Callable[[str], None] | None = None, quiet: bool = False, path: str | None = None) -> Ready:
        """The machine checked for what a command needs, the one place every command checks it (preflight.py):
        writable outputs, the cache folder, the toolchain (`cuda`), the tools, the GPU (`gpu`; `names`: the kernels
        that need it). `say` hears its lines (`quiet`: only the notes that a folder was made); `path`: the contract
        as workers are given it (default the session's)."""
        self.ready = check_machine(self.loaded, path or self.path, cuda=cuda, gpu=gpu, outputs=outputs, names=names,
                                   tools=tools)
        for line in self.ready.said(quiet) if say else []:
            say(line)
        return self.ready

    def ready_for(self, tasks: list[Task], outputs: dict[str, str | None] | None = None,
                  path: str | None = None) -> list[str]:
        """Check the machine the tasks need (the toolchain where CUDA kernels compile, the GPU where they launch,
        writable outputs) and build every cubin they load once; the lines to say."""
        by_name, gpu = kernels(self.loaded), self.on_gpu(tasks)
        if any(t.interpret for t in tasks):
            interpreter_ready()
        ready = self.machine(cuda=any(by_name[t.name].cuda is not None for t in tasks), gpu=bool(gpu),
                             outputs=outputs, names=gpu, path=path)
        built = prebuild(self.loaded, self.builds, tasks, ready.sm)
        return ready.lines + ([built] if built else [])

    def run(self, options: RunOptions, listeners: Iterable[RunListener]) -> RunResult:
        """A whole run in order: plan; check the machine and build once; run the tasks; report and write (the
        listeners' `on_result`); with `--stale`, refresh the receipt's rows. Listeners hear every note, step and
        task; the result closes with the SUMMARY line and its exit code (none where the run was cut short)."""
        hear = Listeners(listeners)
        plan = self.plan(options)
        hear.notes(plan.notes)
        if options.stale and not plan.tasks:
            return self.refresh(plan, options, RunResult(plan=plan))
        hear.notes(self.prepare(plan, options))
        result = self.tasks(plan, options, hear)
        if result.summary.interrupted:
            hear.on_note(f"interrupted: {result.finished} of {result.started} tasks finished; nothing written")
            return result.ends(None, result.summary.exit_code)
        result.document = self.document(result)
        hear.on_result(result)
        hear.notes(self.prune())
        if options.stale:
            return self.refresh(plan, options, result)
        return result.ends(result.summary.line(), result.summary.exit_code)

    def plan(self, options: RunOptions) -> Plan:
        """The tasks for `options`, refused where they cannot go together or match nothing."""
        options.check()
        refresh = plan_stale(self.loaded, options.receipt, options.recheck) if options.stale else None
        tasks = plan_tasks(self.loaded, self.path, options.selection, cache=options.cache)
        plan = Plan(tasks, refresh)
        if refresh is not None:
            plan.tasks = refresh.select(tasks)
            plan.notes.append(refresh.line())
        if options.selection.interpret:
            plan.notes.append(interpret_note(self.loaded, plan.tasks))
        if options.shard:
            part = shard_tasks(self.loaded, plan.tasks, options.shard)
            plan.tasks, plan.covers = part.tasks, part.covers
            plan.notes.append(part.line)
        return plan

    def on_gpu(self, tasks: list[Task]) -> list[str]:
        """The tasks' kernels that launch on a GPU."""
        return on_gpu(self.loaded, tasks)

    def prepare(self, plan: Plan, options: RunOptions) -> list[str]:
        """Check the machine and build every cubin once (`ready_for`); returns the lines to say (what was found and
        built, how many workers and why) and fixes the worker count."""
        lines = self.ready_for(plan.tasks, outputs={"json": options.json, "junit": options.junit,
                                                    "receipt": options.receipt})
        self.jobs = options.jobs
        if options.jobs == "auto":
            self.jobs, why = auto_jobs(self.loaded, gpu=bool(self.on_gpu(plan.tasks)))
            lines.append(f"--jobs auto: {why}")
        return lines

    def tasks(self, plan: Plan, options: RunOptions, hear: RunListener) -> RunResult:
        """Run the planned tasks in the pool, the longest first where the newest whole receipt beside the contract
        says how long they took on this kind of machine, each declaring the device bytes it held there; `hear`
        hears the start, every step and finished task, and the stop."""
        gpu = bool(self.on_gpu(plan.tasks))
        finished: list[Outcome] = []

        def done(outcome: Outcome) -> None:
            finished.append(outcome)
            hear.on_task_done(outcome)

        receipt, device = newest_whole_receipt(self.path)[0], "gpu" if gpu else "cpu"
        cold = not options.cache or not holds_any(reference_root(self.path))  # plan as cold runs take and hold
        durations = gate_seconds(receipt, device, cold)
        tasks = split_by_case(self.loaded, declared_as_held(plan.tasks, gate_live_bytes(receipt, device, cold)),
                              durations, gate_case_outputs(receipt, device))
        hear.on_start(work_units(self.loaded, tasks))
        try:
            result = run_contract(self.loaded, tasks, self.jobs, hear.on_step, done, whole=options.whole,
                                  gpu=gpu, durations=durations, empty_ok=options.shard is not None,
                                  builds=self.builds, device_sm=self.ready.sm if self.ready else None)
        finally:
            hear.on_stop()
        result.plan, result.finished, result.started = plan, len(finished), len(tasks)
        return result

    def document(self, result: RunResult) -> dict:
        """The run's JSON document."""
        return run_document(result.entries, result.controls, result.summary, result.planted,
                            self.ready.toolchain if self.ready else None, since=self.started)

    def prune(self) -> list[str]:
        """Keep the contract's cache under its cap, sparing what this session used; the note saying what went."""
        pruned = keep_under_cap(cache_root(self.path), self.begun)
        return [f"note: {pruned}"] if pruned else []

    def refresh(self, plan: Plan, options: RunOptions, result: RunResult) -> RunResult:
        """`--stale`: the re-run rows written into the receipt over its other rows; closes with the whole receipt's
        SUMMARY, how many rows ran, and its exit code."""
        refresh, summary = plan.refresh, result.summary
        document = result.document or {"entries": [], "controls": [], "toolchain": None}
        notes = summary.notes if summary is not None else refresh.previous.notes if refresh.previous else []
        receipt = run_receipt(self.loaded, document, refresh.previous, mode="stale", seed=self.loaded.seed,
                              wall_s=self.seconds(), gpu=needs_gpu(self.loaded), keep_rows=True, notes=notes)
        if document["entries"] or document["controls"] or refresh.dropped:
            receipt.write(options.receipt)
        return result.ends(f"{receipt.summary} (re-ran {len(refresh.rerun)} of {refresh.total} rows)",
                           receipt.exit_code)

    def seconds(self) -> float:
        """Seconds since the session began."""
        return time.monotonic() - self.started


def kernels(loaded) -> dict:
    """Each entry's and control's kernel, by name."""
    return {e.name: e.kernel for e in loaded.entries} | {c.name: c.kernel for c in loaded.controls}


def on_gpu(loaded, tasks: list[Task]) -> list[str]:
    """The tasks' kernels that launch on a GPU."""
    by_name = kernels(loaded)
    return sorted({t.name for t in tasks if by_name[t.name].launcher() != "python" and not t.interpret
                   and any(g in launching() for g in t.gates)})
