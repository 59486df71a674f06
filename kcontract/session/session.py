"""The session of one `kcontract run`: the contract loaded once, the tasks planned (selection, `--stale`,
shards), checked and built once, run in the pool while listeners hear of each step and task, and written
(JSON, JUnit, the receipt). Front doors parse options, call it and print."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from kcontract.builds.builds import Builds
from kcontract.cachedir import cache_root
from kcontract.cachesize import keep_under_cap
from kcontract.contract.loader import load_contract
from kcontract.errors import UsageError
from kcontract.gatetable import launching
from kcontract.capacity import usable_cores
from kcontract.receipts.currency import needs_gpu
from kcontract.receipts.durations import gate_seconds, newest_whole_receipt
from kcontract.receipts.receipt import Receipt, ReceiptError
from kcontract.receipts.stale import plan_stale
from kcontract.receipts.write import run_receipt
from kcontract.report.json_report import run_document, write_json
from kcontract.report.junit import junit_document, write_junit
from kcontract.session.plan import plan_tasks
from kcontract.session.prebuild import prebuild
from kcontract.session.run_result import run_contract
from kcontract.session.workers import auto_jobs
from kcontract.session.shard import shard_tasks
from kcontract.session.options import RunOptions
from kcontract.session.preflight import Ready, check_machine
from kcontract.verdict.outcome import Task


@dataclass
class Plan:
    """The tasks a run makes, and what planned them: the rows `--stale` refreshes, the shard's coverage."""

    tasks: list[Task]
    refresh: object = None  # receipts.stale's plan, with --stale
    covers: object = None  # what a shard's receipt covers
    notes: list[str] = field(default_factory=list)  # one line each: the stale rows, the shard's share


class Session:
    """One run of one contract: the contract loaded once, and its kernels' `Builds`, made once."""

    def __init__(self, contract_path: str, *, compile_jobs: int | None = None, progress=None, recompile: bool = False):
        """`compile_jobs`: worker processes for cold compiles (default: one per usable core); `progress` hears each
        batch of compiles; `recompile`: compile every kernel afresh and compare it with the cache."""
        self.path = contract_path
        self.started, self.begun = time.monotonic(), time.time()  # begun: wall clock, as cache items are stamped
        self.loaded = load_contract(contract_path)
        self.builds = Builds.of(self.loaded, jobs=compile_jobs or usable_cores(), progress=progress,
                                recompile=recompile)
        self.ready: Ready | None = None

    def plan(self, options: RunOptions) -> Plan:
        """The tasks for `options`, refused where they cannot go together or match nothing."""
        options.check()
        refresh = plan_stale(self.loaded, options.receipt, options.recheck) if options.stale else None
        tasks = plan_tasks(self.loaded, self.path, options.selection, cache=options.cache)
        plan = Plan(tasks, refresh)
        if refresh is not None:
            plan.tasks = refresh.select(tasks)
            plan.notes.append(refresh.line())
        if options.shard:
            part = shard_tasks(self.loaded, plan.tasks, options.shard)
            plan.tasks, plan.covers = part.tasks, part.covers
            plan.notes.append(part.line)
        return plan

    def on_gpu(self, tasks: list[Task]) -> list[str]:
        """The tasks' kernels that launch on a GPU."""
        return on_gpu(self.loaded, tasks)

    def prepare(self, plan: Plan, options: RunOptions) -> list[str]:
        """Check the machine (toolchain, GPU, writable outputs) and build every cubin once; returns the lines to
        say (what was built, how many workers and why) and fixes the worker count in `options`' place."""
        self.ready, lines = ready_for(self.loaded, self.path, plan.tasks, self.builds, outputs={
            "json": options.json, "junit": options.junit, "receipt": options.receipt})
        self.jobs = options.jobs
        if options.jobs == "auto":
            self.jobs, why = auto_jobs(self.loaded, gpu=bool(self.on_gpu(plan.tasks)))
            lines.append(f"--jobs auto: {why}")
        return lines

    def run(self, plan: Plan, options: RunOptions, on_step, on_done):
        """Run the tasks in the pool, the longest first where the newest whole receipt beside the contract says
        how long they took on this kind of machine; listeners hear of every step and finished task."""
        gpu = bool(self.on_gpu(plan.tasks))
        durations = gate_seconds(newest_whole_receipt(self.path)[0], "gpu" if gpu else "cpu")
        return run_contract(self.loaded, plan.tasks, self.jobs, on_step, on_done, whole=options.whole, gpu=gpu,
                            durations=durations, empty_ok=options.shard is not None, builds=self.builds,
                            device_sm=self.ready.sm if self.ready else None)

    def document(self, result) -> dict:
        """The run's JSON document."""
        return run_document(result.entries, result.controls, result.summary, result.planted,
                            self.ready.toolchain if self.ready else None)

    def write(self, plan: Plan, result, document: dict, options: RunOptions) -> list[str]:
        """The JSON report, JUnit XML and the receipt (whole, a shard's); returns the notes to say."""
        if options.json:
            write_json(options.json, document)
        if options.junit:
            write_junit(options.junit, junit_document(result.entries, result.controls, result.planted,
                                                      result.summary))
        pruned = keep_under_cap(cache_root(self.path), self.begun)
        if options.receipt and not options.stale:
            self.receipt(plan, result, document, options).write(options.receipt)
        return [f"note: {pruned}"] if pruned else []

    def receipt(self, plan: Plan, result, document: dict, options: RunOptions) -> Receipt:
        """The receipt of a whole run or a shard's, over what the receipt already there carries."""
        seed = options.selection.seed
        return run_receipt(self.loaded, document, _previous(options.receipt),
                           mode=f"shard {options.shard}" if options.shard else "whole",
                           seed=self.loaded.seed if seed is None else seed, wall_s=self.seconds(),
                           gpu=needs_gpu(self.loaded), keep_rows=False, notes=result.summary.notes, covers=plan.covers)

    def refresh(self, plan: Plan, options: RunOptions, document: dict | None, summary) -> tuple[str, int]:
        """`--stale`: the re-run rows written into the receipt over its other rows; the whole receipt's SUMMARY
        with how many rows ran, and its exit code."""
        refresh = plan.refresh
        document = document or {"entries": [], "controls": [], "toolchain": None}
        notes = summary.notes if summary is not None else refresh.previous.notes if refresh.previous else []
        receipt = run_receipt(self.loaded, document, refresh.previous, mode="stale", seed=self.loaded.seed,
                              wall_s=self.seconds(), gpu=needs_gpu(self.loaded), keep_rows=True, notes=notes)
        if document["entries"] or document["controls"] or refresh.dropped:
            receipt.write(options.receipt)
        return f"{receipt.summary} (re-ran {len(refresh.rerun)} of {refresh.total} rows)", receipt.exit_code

    def seconds(self) -> float:
        """Seconds since the session began."""
        return time.monotonic() - self.started

def kernels(loaded) -> dict:
    """Each entry's and control's kernel, by name."""
    return {e.name: e.kernel for e in loaded.entries} | {c.name: c.kernel for c in loaded.controls}


def on_gpu(loaded, tasks: list[Task]) -> list[str]:
    """The tasks' kernels that launch on a GPU."""
    by_name = kernels(loaded)
    return sorted({t.name for t in tasks if by_name[t.name].launcher() != "python"
                   and any(g in launching() for g in t.gates)})


def ready_for(loaded, path: str, tasks: list[Task], builds: Builds, outputs: dict[str, str | None] | None = None
              ) -> tuple[Ready, list[str]]:
    """Check the machine the tasks need (the toolchain where CUDA kernels compile, the GPU where they launch,
    writable outputs) and build every cubin they load once, through `builds`; what was found, and the lines to
    say."""
    by_name, gpu = kernels(loaded), on_gpu(loaded, tasks)
    ready = check_machine(loaded, path, cuda=any(by_name[t.name].cuda is not None for t in tasks), gpu=bool(gpu),
                          outputs=outputs, names=gpu)
    built = prebuild(loaded, builds, tasks, ready.sm)
    return ready, ready.lines + ([built] if built else [])


def _previous(path: str) -> Receipt | None:
    """The receipt already at `path` (its mutation scores, coverage and bench rows carry over where the kernel is
    unchanged), or None."""
    try:
        return Receipt.read(path)
    except ReceiptError:
        return None
