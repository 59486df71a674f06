"""kcontract installs into the kernel author's environment: beside torch's CUDA 13 toolkit wheels (compiling
with their NVRTC, `pip check` clean), and with the CUDA 12 extras no CUDA 13 wheel comes along. These tests
install from the package index into fresh virtual environments; they skip, saying so, where none is reachable."""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.helpers.pip_env import fresh_venv, pip, pip_started, resolved, resolving, stop

ROOT = Path(__file__).resolve().parents[1]
TORCH_CU130 = ["cuda-toolkit[nvrtc,cudart]==13.0.2", "cuda-bindings>=13.0.3,<14"]  # what torch 2.11+cu130 requires
TORCH_CU128 = ["nvidia-cuda-nvrtc-cu12==12.8.93", "nvidia-cuda-runtime-cu12==12.8.90"]  # torch's cu128 pins
CUDA13 = ("nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "nvidia-cuda-nvdisasm", "nvidia-cuda-cuobjdump",
          "cupy-cuda13x", "cuda-toolkit")


def _index_reachable() -> bool:
    if os.environ.get("PIP_NO_INDEX"):
        return False
    try:
        urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=10).close()
        return True
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _index_reachable(), reason="no package index reachable (pypi.org) to install from")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A copy of the checkout's tracked files to install from: building the package writes kcontract.egg-info
    into its source tree, which other tests running beside these read entry points from."""
    where = tmp_path_factory.mktemp("source") / "kcontract"
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if listed.returncode == 0 and listed.stdout:
        for name in listed.stdout.decode().split("\0"):
            if name and (ROOT / name).is_file():
                (where / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, where / name)
    else:
        shutil.copytree(ROOT, where, ignore=shutil.ignore_patterns(".git", ".venv", ".kcontract-cache", "*.egg-info",
                                                                   "__pycache__", "build"))
    return where


@pytest.fixture(scope="module")
def resolver(tmp_path_factory) -> Path:
    """One fresh virtual environment for the dry-run resolutions, which install nothing into it; its python."""
    return fresh_venv(tmp_path_factory.mktemp("resolver") / "venv")


@pytest.fixture(scope="module")
def built(tmp_path_factory, source, resolver) -> str:
    """The source built once into a wheel, as a requirement with `{}` for its extras: resolving it reads the same
    metadata as `-e source[...]` without building it again for every resolution."""
    folder = tmp_path_factory.mktemp("wheel")
    done = pip(resolver, "wheel", "--quiet", "--no-deps", "-w", str(folder), str(source))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = folder.glob("kcontract-*.whl")
    return f"kcontract{{}} @ {wheel.as_uri()}"


@pytest.fixture(scope="module")
def install_started(tmp_path_factory, source):
    """A fresh environment, and kcontract's install into it beside torch's CUDA 13 toolkit, started."""
    python = fresh_venv(tmp_path_factory.mktemp("installed") / "venv")
    started = pip_started(python, "install", "--quiet", "--no-compile", *TORCH_CU130, "-e", str(source))
    yield python, started
    stop(started)


@pytest.fixture(scope="module")
def resolutions_started(tmp_path_factory, built, resolver):
    """Every dry-run resolution the tests read, started side by side: {name: (pip, its report)}."""
    folder = tmp_path_factory.mktemp("reports")
    asks = {"cuda12": (*TORCH_CU128, built.format("[cuda12]")), "cu12": (*TORCH_CU128, built.format("[cu12]")),
            "beside_torch": (*TORCH_CU130, built.format("[cu13]")),
            "pinned": (built.format("[compile,tools]"), "-c", str(ROOT / "constraints" / "cuda-13.5.37.txt")),
            "plain": (built.format(""),)}
    started = {name: (resolving(resolver, folder / f"{name}.json", *requirements), folder / f"{name}.json")
               for name, requirements in asks.items()}
    yield started
    for proc, _ in started.values():
        stop(proc)


@pytest.fixture(scope="module")
def resolutions(resolutions_started) -> dict[str, dict[str, str]]:
    """What each started resolution would install: {name: {package: version}}."""
    found = {name: resolved(proc, report) for name, (proc, report) in resolutions_started.items()}
    failed = {name: text for name, text in found.items() if isinstance(text, str)}
    assert not failed, failed
    return found


def test_it_installs_beside_torchs_cuda_13_toolkit_and_compiles_with_its_nvrtc(tmp_path, install_started,
                                                                             resolutions_started):
    python, started = install_started  # the resolutions run meanwhile
    out, err = started.communicate(timeout=900)
    assert started.returncode == 0, out[-3000:] + err[-3000:]
    checked = pip(python, "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    version = subprocess.run([str(python), "-c", "from importlib.metadata import version; "
                              "print(version('nvidia-cuda-nvrtc'))"], capture_output=True, text=True).stdout.strip()
    assert version.startswith("13.0."), version
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CUDA_HOME", "CUDA_PATH")}
    env["KCONTRACT_CACHE"] = str(tmp_path / "cache")
    proc = subprocess.run([str(python.with_name("kcontract")), "check", "--contract",
                           str(ROOT / "tests" / "contracts" / "gate5" / "contract.yaml")],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"toolchain: nvrtc {version} (nvidia-cuda-nvrtc wheel), headers 13.0.96 (nvidia-cuda-runtime wheel)" \
        in proc.stderr
    assert f"gate 5: no records for nvrtc-{version}+headers-13.0.96 (records exist for cuda-13.5.37)" in proc.stdout
    assert "SUMMARY check passed" in proc.stdout and "gate-5 controls: 2 red as planted, 0 missed" in proc.stdout


def test_the_cuda_12_extras_bring_no_cuda_13_wheel(resolutions):
    for extra in ("cuda12", "cu12"):
        found = resolutions[extra]
        assert found["nvidia-cuda-nvrtc-cu12"] == "12.8.93" and "cupy-cuda12x" in found
        assert not [name for name in found if name in CUDA13 or (name == "cuda-bindings" and
                                                                 found[name].startswith("13"))], found


def test_the_cuda_13_extra_takes_ranges_and_the_constraints_file_pins_the_records_toolchain(resolutions):
    beside_torch = resolutions["beside_torch"]
    assert beside_torch["nvidia-cuda-nvrtc"].startswith("13.0.") and "cupy-cuda13x" in beside_torch
    pinned = resolutions["pinned"]
    assert {pinned[n] for n in CUDA13[:4]} == {"13.5.37"} and "cupy-cuda13x" not in pinned
    plain = resolutions["plain"]
    assert not [name for name in plain if name.startswith(("nvidia-", "cuda-", "cupy"))], plain
