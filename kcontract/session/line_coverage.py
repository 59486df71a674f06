"""`kcontract coverage` as a session step: each CUDA entry's source instrumented, its stand-ins run on the GPU,
each entry's coverage judged and written; nothing printed here."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kcontract.cachedir import CACHE_ENV, cache_root
from kcontract.coverage.campaign import Campaign, judge_runs, prepare, save, workdir
from kcontract.coverage.report import entry_report
from kcontract.errors import UsageError
from kcontract.receipts.carried import entry_node_sha256
from kcontract.receipts.receipt import Receipt
from kcontract.session.derived import Derived, Progress, interrupted
from kcontract.session.outputs import measured_at, require_receipt
from kcontract.session.preflight import device_target
from kcontract.verdict.summary import plural

Say = Callable[[str], None]


@dataclass(frozen=True)
class CoverageOptions:
    """What `kcontract coverage` was asked for."""

    sm: str | None = None
    prepare_only: bool = False
    jobs: int | str = "auto"
    json: str | None = None
    receipt: str | None = None


@dataclass
class Covered:
    """The campaign, each entry's report, and the SM instrumented."""

    campaign: Campaign
    reports: list
    sm: str

    def failing(self) -> list:
        """Reports below a floor, with an argument that no longer holds, or whose stand-in did not run."""
        return [r for r in self.reports if r.problems or self.campaign.entries[r.entry].failed]


def coverage_session(session, names, options: CoverageOptions, say: Say, progress: Progress) -> Covered:
    """Check the entries and the machine, instrument, run the stand-ins (unless prepared only), judge each entry
    and write the JSON and the receipt."""
    loaded = session.loaded
    chosen = chosen_entries(loaded, names)
    session.machine(cuda=True, gpu=False, outputs={"json": options.json}, say=say)
    require_receipt(options.receipt)
    sm = options.sm or device_target(loaded)
    os.environ[CACHE_ENV] = str(cache_root(session.path).resolve())  # stand-ins share inputs and references
    campaign = prepare(loaded, chosen, sm)
    say(f"coverage: {plural(len(chosen), 'entry', 'entries')}, {plural(len(campaign.sources), 'source')} "
        f"instrumented in {workdir(loaded)}")
    if not options.prepare_only:
        judge_runs(campaign, run_standins(workdir(loaded) / "contract.yaml", options.jobs, progress, say))
        save(campaign, workdir(loaded))
    covered = Covered(campaign, [entry_report(campaign, campaign.entries[n], loaded.entry(n).coverage)
                                 for n in chosen], sm)
    _write(loaded, covered, options)
    return covered


def chosen_entries(loaded, names) -> list[str]:
    """The CUDA entries named (default: every one), or a usage error naming what is not one."""
    cuda = [e.name for e in loaded.entries if e.kernel.cuda is not None]
    for name in names:
        if name not in [e.name for e in loaded.entries]:
            raise UsageError(f"{name}: no such entry in {loaded.path}; CUDA entries: {', '.join(cuda[:8])}")
        if name not in cuda:
            raise UsageError(f"{name}: coverage counts the lines of a CUDA kernel; its kernel is "
                             f"{loaded.entry(name).kernel.label}")
    if not cuda:
        raise UsageError(f"{loaded.path} has no CUDA entry: coverage counts the lines of CUDA kernels")
    return list(names) or cuda


def run_standins(contract: Path, jobs, progress: Progress, say: Say) -> list:
    """Every stand-in through the ordinary runner, on the GPU; a run cut short raises KeyboardInterrupt."""
    derived = Derived(str(contract), None, say)
    tasks = derived.tasks(c.name for c in derived.loaded.controls)
    built = derived.build(tasks)
    if built:
        say(built)
    outcomes, _ = derived.run(tasks, derived.workers(jobs), progress)
    if interrupted(outcomes):
        raise KeyboardInterrupt
    return outcomes


def _write(loaded, covered: Covered, options: CoverageOptions) -> None:
    """Every entry's coverage as JSON, and into the receipt (a run's, not a preparation's)."""
    documents = {r.entry: {**r.as_dict(), "source_sha256": covered.campaign.sources[r.source].sha256,
                           "node_sha256": entry_node_sha256(loaded, r.entry), "sm": covered.sm}
                 for r in covered.reports}
    if options.json:
        Path(options.json).write_text(json.dumps(documents, indent=1) + "\n")
    if options.receipt and not options.prepare_only:
        commit = measured_at(loaded)
        with Receipt.updating(options.receipt) as receipt:
            receipt.put_coverage({n: {**d, "measured_at": commit} for n, d in documents.items()})
