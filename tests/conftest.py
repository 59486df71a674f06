"""Shared pytest settings and fixtures: no Hypothesis deadline, since a loaded 2-core CI machine stalls at random;
one compile and reference cache for the whole test run, outside the checkout (seeded from the one `kcontract check`
left beside the contract); one whole run of the CPU contract for the tests that read one and one compile of the
repository's contract, each shared by every xdist worker."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",  # Hypothesis's own caches, outside the checkout
                      str(Path(tempfile.gettempdir()) / "kcontract-tests-hypothesis"))
from hypothesis import settings  # noqa: E402 (it reads the storage folder when imported)

settings.register_profile("kcontract", deadline=None, print_blob=True, database=None)  # no .hypothesis/ here
settings.load_profile("kcontract")

SHARED_ENV = "KCONTRACT_TESTS_SHARED"  # the test run's folder that every xdist worker sees


def pytest_configure(config):
    """In the controlling process: xdist deals test files in item order, a folder for the run (workers inherit its
    path) with the processes' bytecode and, unless one is given, the run's cache in it, so that no test leaves a
    cache inside the checkout."""
    if hasattr(config, "workerinput") or os.environ.get(SHARED_ENV):
        return
    if hasattr(config.option, "loadscopereorder"):  # xdist's files in LONGEST_FIRST's order, not by test count
        config.option.loadscopereorder = False
    shared = Path(tempfile.mkdtemp(prefix="kcontract-tests-"))
    config.kcontract_shared = shared
    os.environ[SHARED_ENV] = str(shared)
    config.kcontract_seeding = compiled_once(shared / "pycache")
    if "KCONTRACT_CACHE" not in os.environ:
        os.environ["KCONTRACT_CACHE"] = str(shared / "cache")
        seed_cache(shared / "cache")
    share_blas_threads(config)


def compiled_once(folder: Path):
    """Every Python process the tests start (CLI runs, kcontract's workers, xdist's) writes and reuses bytecode in
    the run's folder, even where the environment forbids writing it beside the sources: hundreds of processes then
    compile kcontract's modules once, and nothing is written in the checkout. The folder starts with links to the
    bytecode installed beside the interpreter's own modules (tests/helpers/bytecode.py), which no process then
    compiles again; returns that seeding, or None where the environment names a folder of its own."""
    from tests.helpers.bytecode import Seeding

    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if os.environ.get("PYTHONPYCACHEPREFIX"):
        return None
    os.environ["PYTHONPYCACHEPREFIX"] = str(folder)
    return Seeding(folder, Path(__file__).resolve().parents[1])


def seed_cache(cache: Path) -> None:
    """The run's cache starts as a copy of the one README's first command leaves beside contract.yaml (its entries
    are keyed by their sources, options and toolchain, so none is trusted that does not match); the checkout's
    copy is only read."""
    beside = Path(__file__).resolve().parents[1] / ".kcontract-cache"
    if beside.is_dir():
        shutil.copytree(beside, cache, dirs_exist_ok=True)


def share_blas_threads(config) -> None:
    """Under xdist, each worker (and every process it starts) gets its share of the cores' BLAS threads, as
    kcontract's own workers do (docs/decisions/0022), unless the environment sets them."""
    workers = config.getoption("numprocesses", default=None)
    if not workers:
        return
    cores = os.cpu_count() or 1
    count = cores if isinstance(workers, str) else int(workers)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, str(max(1, cores // max(1, count))))


# test files that take longest, in the order xdist hands them out first (its loadfile scheduler deals files in item
# order once pytest_configure turns off its reordering by test count), so no long file starts last and leaves the
# other workers idle; the rest follow in collection order
LONGEST_FIRST = ("test_installed.py", "test_triton_interpret.py", "test_patches.py",
                 "test_triton_matmul.py", "test_mutate.py", "test_install.py", "test_pytest_plugin.py",
                 "test_refcache.py", "test_drift.py", "test_bad_input.py",
                 "test_decode_rigor.py", "test_shard_merge.py", "test_check.py", "test_fused_prompt.py",
                 "test_triton_kind.py", "test_init.py", "test_case_split.py", "test_order_probes.py",
                 "test_matmul_kernel.py", "test_replay.py", "test_user_code_exits.py", "test_bench_plot.py",
                 "test_family_example.py", "test_sassdiff.py", "test_replay_blocks.py", "test_receipt_rows.py",
                 "test_run_stale.py")


def pytest_collection_modifyitems(config, items):
    """The longest test files first (LONGEST_FIRST), each file's items kept together and in order."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_unconfigure(config):
    seeding = getattr(config, "kcontract_seeding", None)
    if seeding is not None:
        seeding.stop()
    shared = getattr(config, "kcontract_shared", None)
    if shared is not None:
        shutil.rmtree(shared, ignore_errors=True)


@pytest.fixture(scope="session")
def cpu_contract_run(tmp_path_factory) -> SimpleNamespace:
    """The CPU contract run whole by the installed console script from the repository root, at 80 columns with no
    terminal, writing a JSON report and a receipt: proc, report and receipt. The first worker to ask runs it; the
    others wait for it and read what it left."""
    from tests.helpers.cli import kcontract

    folder = shared_folder("cpu_run", tmp_path_factory)
    report, receipt, done = folder / "run.json", folder / "whole.json", folder / "proc.json"
    with first_to_ask(folder, done) as first:
        if first:
            proc = kcontract("run", "--contract", "tests/contracts/cpu.yaml", "--jobs", "2", "--json", str(report),
                             "--receipt", str(receipt))
            done.write_text(json.dumps({"args": proc.args, "returncode": proc.returncode, "stdout": proc.stdout,
                                        "stderr": proc.stderr}))
    saved = json.loads(done.read_text())
    proc = subprocess.CompletedProcess(saved["args"], saved["returncode"], saved["stdout"], saved["stderr"])
    return SimpleNamespace(proc=proc, report=report, receipt=receipt)


@pytest.fixture(scope="session")
def repository_checked(tmp_path_factory) -> Path:
    """`kcontract check` of the repository's contract run once into the test run's cache, for every xdist worker:
    its cubins for every target SM and their machine code are cached for the tests that check or record them.
    Returns that cache folder."""
    from tests.helpers.cli import kcontract

    folder = shared_folder("repository_checked", tmp_path_factory)
    with first_to_ask(folder, folder / "done") as first:
        if first:
            done = kcontract("check", "--contract", "contract.yaml", timeout=1800)
            assert done.returncode == 0, f"kcontract check of the repository: exit {done.returncode}\n" \
                                         f"{(done.stdout + done.stderr)[-3000:]}"
            (folder / "done").touch()
    return Path(os.environ["KCONTRACT_CACHE"])


def shared_folder(name: str, tmp_path_factory) -> Path:
    """A folder of the test run's that every xdist worker sees."""
    base = Path(os.environ[SHARED_ENV]) if os.environ.get(SHARED_ENV) else tmp_path_factory.mktemp("shared")
    folder = base / name
    folder.mkdir(exist_ok=True)
    return folder


@contextmanager
def first_to_ask(folder: Path, done: Path):
    """Hold the folder's lock; yields whether the work is still to do (`done` is not there yet)."""
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield not done.is_file()
