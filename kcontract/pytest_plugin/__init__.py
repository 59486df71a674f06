"""`pytest --kcontract CONTRACT`: one pytest item per entry x gate and one per control, run by kcontract's workers.

This module holds the hooks only and imports nothing heavy: pytest loads it in every session of an environment
with kcontract installed, and it stays inert until `--kcontract` is given.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kcontract.pytest_plugin.markers import register_static
from kcontract.pytest_plugin.stash import RUNNER, RUNS


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--kcontract CONTRACT` (repeatable), `--kcontract-seed N` and `--kcontract-no-cache`."""
    group = parser.getgroup("kcontract", "kernel contracts (kcontract)")
    group.addoption("--kcontract", action="append", default=[], metavar="CONTRACT",
                    help="Check this kcontract contract file: an item per entry x gate and per control (repeatable).")
    group.addoption("--kcontract-seed", type=int, default=None, metavar="N",
                    help="Run the contracts at this seed instead of their own.")
    group.addoption("--kcontract-no-cache", action="store_true", default=False,
                    help="Compute every float64 reference afresh (a cold run).")


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers; with --kcontract, load every contract (a bad one is a usage error) and collect it."""
    register_static(config)
    typed = config.getoption("kcontract")
    if not typed or config.getoption("help", False):
        return
    from kcontract.pytest_plugin.contracts import add_collection_args, load_runs
    from kcontract.pytest_plugin.markers import register_families

    runs = load_runs(config, typed)
    config.stash[RUNS] = {run.path: run for run in runs}
    register_families(config, runs)
    add_collection_args(config, runs)


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    """A contract given with --kcontract becomes a ContractFile; every other file is left to other plugins."""
    runs = parent.config.stash.get(RUNS, None)
    if not runs:
        return None
    run = runs.get(file_path.resolve())
    if run is None:
        return None
    from kcontract.pytest_plugin.nodes import ContractFile

    try:
        file_path.relative_to(parent.config.rootpath)
        named = {}
    except ValueError:  # outside the rootdir pytest would give it an empty id: its absolute path, shown relative
        named = {"nodeid": file_path.as_posix()}
    return ContractFile.from_parent(parent, path=file_path, run=run, **named)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """End the workers and keep each contract's cache under its cap, as `kcontract run` does."""
    runner = session.config.stash.get(RUNNER, None)
    if runner is not None:
        runner.close()
        session.config.stash[RUNNER] = None
        from kcontract.pytest_plugin.contracts import prune_caches

        prune_caches(session.config.stash[RUNS].values(), runner.began)
