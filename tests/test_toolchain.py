"""The toolchain at hand: NVRTC and headers found in the documented order, compiles for every SM, resources, the
compile cache, include and kernel scans."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from kcontract.contract.model import DEFAULT_TARGETS
from kcontract.errors import EnvironmentProblem
from kcontract.exitcodes import ExitCode
from kcontract.numerics.fused import RAW_SOURCES, SOURCES
from kcontract.toolchain import locate, tools
from kcontract.toolchain.build import build
from kcontract.toolchain.cache import CompileCache
from kcontract.toolchain.globals import base_name, find_globals
from kcontract.toolchain.headers import local_headers
from kcontract.toolchain.locate import Part, Toolchain, find_toolchain
from kcontract.toolchain.nvrtc import Compiled, Failed, compile_cubin, load
from kcontract.toolchain.resources import parse_ptxas_log, res_usage
from kcontract.toolchain.units import KernelUse, group_units
from tests.helpers.fused import elementwise_source

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "cuda" / "tiny.cu"


def _compile(sm: str, names=("tiny_scale<32>", "tiny_round"), source: bytes | None = None):
    tool = find_toolchain()
    return compile_cubin(str(tool.nvrtc.path), source if source is not None else TINY.read_bytes(), "tiny.cu",
                         tuple(names), sm, (), (str(TINY.parent), str(tool.headers.path)))


def needs(tool: str) -> None:
    """Skip, saying why, where this environment has no such disassembler (kcontract[tools] brings both)."""
    try:
        tools.find_tool(tool)
    except EnvironmentProblem as problem:
        pytest.skip(problem.message)


def buildable() -> list[str]:
    """The default targets this environment's NVRTC builds for."""
    return [sm for sm in DEFAULT_TARGETS if find_toolchain().builds(sm)]


@pytest.fixture
def rediscover(monkeypatch):
    """find_toolchain and find_tool afresh, with no CUDA toolkit or override in the environment unless a test
    sets one."""
    for var in ("CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX", locate.NVRTC_ENV, locate.INCLUDE_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(locate, "toolkit_roots", _roots_from_env)
    monkeypatch.setattr(locate, "_ldconfig_nvrtc", lambda: None)
    find_toolchain.cache_clear()
    tools.find_tool.cache_clear()
    yield
    find_toolchain.cache_clear()
    tools.find_tool.cache_clear()


def _roots_from_env():
    """Toolkit roots from $CUDA_HOME alone (the machine's own /usr/local/cuda left out)."""
    import os

    home = os.environ.get("CUDA_HOME")
    return [(Path(home).resolve(), "$CUDA_HOME")] if home and Path(home).is_dir() else []


def _toolkit(tmp_path: Path) -> Path:
    """A CUDA toolkit layout: lib64/libnvrtc.so (the real library), include/ (real headers), version.json naming
    patch versions of the real NVRTC's major.minor."""
    real = find_toolchain()
    major_minor = ".".join(real.nvrtc.version.split(".")[:2])
    nvrtc, cudart = f"{major_minor}.901", f"{major_minor}.902"
    root = tmp_path / "cuda"
    (root / "lib64").mkdir(parents=True)
    for lib in real.nvrtc.path.parent.glob("libnvrtc*"):
        (root / "lib64" / lib.name).symlink_to(lib)
    (root / "lib64" / "libnvrtc.so").symlink_to(real.nvrtc.path)
    shutil.copytree(real.headers.path, root / "include")
    (root / "version.json").write_text(json.dumps({"cuda_nvrtc": {"version": nvrtc},
                                                   "cuda_cudart": {"version": cudart}}))
    return root


def test_the_environment_toolchain_is_found_loaded_and_named():
    tool = find_toolchain()
    major, minor = load(str(tool.nvrtc.path)).version()
    assert tool.nvrtc.version.startswith(f"{major}.{minor}")
    assert (tool.headers.path / "cuda_bf16.h").is_file() and tool.headers.major == major
    assert tool.id == (f"cuda-{tool.nvrtc.version}" if tool.nvrtc.version == tool.headers.version
                       else f"nvrtc-{tool.nvrtc.version}+headers-{tool.headers.version}")
    assert tool.describe().startswith(f"nvrtc {tool.nvrtc.version} ({tool.nvrtc.origin}), headers ")
    assert all(tool.builds(sm) for sm in DEFAULT_TARGETS if int(sm[3:]) in tool.sms)


def test_ids_name_nvrtc_and_headers_and_arch_specific_targets_follow_their_sm():
    nvrtc, headers = Part(Path("lib"), "13.0.88", "w"), Part(Path("inc"), "13.0.96", "w")
    tool = Toolchain(nvrtc, headers, (80, 90, 120))
    assert tool.id == "nvrtc-13.0.88+headers-13.0.96"
    assert replace(tool, headers=replace(headers, version="13.0.88")).id == "cuda-13.0.88"
    assert tool.builds("sm_90a") and tool.builds("sm_120") and not tool.builds("sm_121")
    assert tool.as_dict()["nvrtc"] == "13.0.88" and tool.as_dict()["headers"] == "13.0.96"


def test_a_cuda_toolkit_serves_when_no_wheel_does(tmp_path, monkeypatch, rediscover):
    root = _toolkit(tmp_path)
    find_toolchain.cache_clear()
    monkeypatch.setattr(locate, "wheel_file", lambda dist, suffix: None)
    monkeypatch.setenv("CUDA_HOME", str(root))
    tool = find_toolchain()
    assert tool.nvrtc.path == (root / "lib64" / "libnvrtc.so").resolve() or tool.nvrtc.path.name == "libnvrtc.so"
    assert tool.nvrtc.origin == f"CUDA toolkit {root.resolve()} ($CUDA_HOME)" == tool.headers.origin
    major_minor = ".".join(tool.nvrtc.version.split(".")[:2])
    assert (tool.nvrtc.version, tool.headers.version) == (f"{major_minor}.901", f"{major_minor}.902")
    assert tool.id == f"nvrtc-{major_minor}.901+headers-{major_minor}.902"


def test_an_explicit_nvrtc_wins_and_a_wrong_one_is_named(tmp_path, monkeypatch, rediscover):
    real = find_toolchain()
    find_toolchain.cache_clear()
    monkeypatch.setenv(locate.NVRTC_ENV, str(real.nvrtc.path))
    assert find_toolchain().nvrtc.origin == locate.NVRTC_ENV
    find_toolchain.cache_clear()
    monkeypatch.setenv(locate.NVRTC_ENV, str(tmp_path / "libnvrtc.so.13"))
    with pytest.raises(EnvironmentProblem, match=r"KCONTRACT_NVRTC=.*libnvrtc\.so\.13: no such file"):
        find_toolchain()


def test_no_nvrtc_anywhere_says_how_to_get_one(monkeypatch, rediscover):
    monkeypatch.setattr(locate, "wheel_file", lambda dist, suffix: None)
    with pytest.raises(EnvironmentProblem) as caught:
        find_toolchain()
    assert caught.value.exit_code == ExitCode.ENVIRONMENT
    assert caught.value.message.startswith("no NVRTC found: install a toolchain: pip install 'kcontract[cu13]'")


def test_headers_of_another_major_version_are_not_used(tmp_path, monkeypatch, rediscover):
    real = find_toolchain()
    find_toolchain.cache_clear()
    monkeypatch.setenv(locate.NVRTC_ENV, str(real.nvrtc.path))
    monkeypatch.setattr(locate, "header_candidates", lambda: [Part(real.headers.path, "11.8", "old toolkit")])
    with pytest.raises(EnvironmentProblem, match=rf"NVRTC .* found, but no CUDA {real.nvrtc.major} headers"):
        find_toolchain()


def test_an_sm_the_toolchain_cannot_build_is_skipped_not_failed(tmp_path):
    real = find_toolchain()
    older = replace(real, sms=tuple(s for s in real.sms if s != 121))
    source = tmp_path / "k.cu"
    source.write_text('extern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n')
    result = build(_unit(source, ("k",)), ["sm_90", "sm_121"], CompileCache(tmp_path / "c"), tmp_path, jobs=1,
                   toolchain=older)
    assert (result.compiled, result.failures, result.skipped) == (1, [], ["sm_121"])


def test_missing_tool_names_the_extra(monkeypatch, rediscover):
    needs("nvdisasm")
    tools.find_tool.cache_clear()
    monkeypatch.setattr(tools, "tool_candidates", lambda name: [])
    with pytest.raises(EnvironmentProblem, match=r"nvdisasm not found \(this command disassembles cubins\): pip "
                                                 r"install 'kcontract\[tools\]'"):
        tools.tool_path("nvdisasm")
    monkeypatch.undo()
    tools.find_tool.cache_clear()
    found = tools.find_tool("nvdisasm")
    assert found.path.name == "nvdisasm" and found.version != "unknown"


def test_every_default_target_compiles_with_mangled_names():
    for sm in buildable():
        result = _compile(sm)
        assert isinstance(result, Compiled), (sm, getattr(result, "log", ""))
        assert result.cubin[:4] == b"\x7fELF"
        assert result.lowered == {"tiny_scale<32>": "_Z10tiny_scaleILi32EEvPffi", "tiny_round": "tiny_round"}
        assert f"for '{sm}'" in result.log


def test_the_bench_ceiling_kernels_compile_for_every_default_target(tmp_path):
    from kcontract.bench.ceiling import MMA_SOURCE, READ_SOURCE

    for sm in buildable():
        for source, name in ((READ_SOURCE, "read_all"), (MMA_SOURCE, "mma_loop")):
            result = _compile(sm, (name,), source.encode())
            assert isinstance(result, Compiled), (sm, name, getattr(result, "log", ""))
    needs("nvdisasm")
    cubin = tmp_path / "mma.cubin"
    cubin.write_bytes(_compile("sm_90", ("mma_loop",), MMA_SOURCE.encode()).cubin)
    assert "HMMA.16816.F32.BF16" in tools.run_tool("nvdisasm", ["-c", str(cubin)])  # the timed loop is tensor work


def test_cubins_are_byte_identical_across_compiles():
    assert _compile("sm_90").cubin == _compile("sm_90").cubin


def test_a_compile_error_carries_the_nvrtc_log():
    bad = TINY.read_bytes().replace(b"v * a;", b"v * undefined_thing;")
    result = _compile("sm_80", source=bad)
    assert isinstance(result, Failed)
    assert 'identifier "undefined_thing" is undefined' in result.log
    wrong_name = _compile("sm_80", names=("tiny_scale<32>", "no_such_kernel"))
    assert isinstance(wrong_name, Failed) and "no_such_kernel" in wrong_name.log


def test_ptxas_report_agrees_with_cuobjdump(tmp_path):
    needs("cuobjdump")
    for sm in ("sm_80", "sm_90", "sm_120"):
        result = _compile(sm)
        cubin = tmp_path / f"{sm}.cubin"
        cubin.write_bytes(result.cubin)
        ours, theirs = parse_ptxas_log(result.log), res_usage(cubin)
        assert set(ours) == set(theirs) == {"_Z10tiny_scaleILi32EEvPffi", "tiny_round"}
        reserved = 1024 if sm != "sm_80" else 0  # cuobjdump's SHARED counts the reserved 1 KiB on sm_90+
        for name, facts in ours.items():
            assert facts.registers == theirs[name]["REG"]
            assert facts.stack == theirs[name]["STACK"]
            assert facts.static_smem + reserved == theirs[name]["SHARED"]
        assert ours["_Z10tiny_scaleILi32EEvPffi"].static_smem == 128
        assert ours["_Z10tiny_scaleILi32EEvPffi"].barriers == 1


def test_ptxas_log_with_spills_and_device_functions():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Function properties for _Z6helperf
ptxas         .     24 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z3bigPf' for 'sm_90'
ptxas info    : Function properties for _Z3bigPf
ptxas         .     456 bytes stack frame, 848 bytes spill stores, 892 bytes spill loads
ptxas info    : Used 64 registers, used 2 barriers, 4096 bytes smem
ptxas info    : Compile time = 10.0 ms"""
    facts = parse_ptxas_log(log)
    assert list(facts) == ["_Z3bigPf"]
    big = facts["_Z3bigPf"]
    assert (big.registers, big.static_smem, big.stack, big.spill_stores, big.spill_loads, big.barriers) == \
        (64, 4096, 456, 848, 892, 2)


def _unit(source: Path, names: tuple[str, ...], label: str = "k.cu"):
    uses = [KernelUse("entry", "e", f"r{i}", n, label, source, ()) for i, n in enumerate(names)]
    return group_units(uses)


def test_cache_hits_and_keys_follow_headers(tmp_path):
    (tmp_path / "inc").mkdir()
    header = tmp_path / "inc" / "scale.cuh"
    header.write_text("#pragma once\n#define SCALE 2.0f\n")
    source = tmp_path / "k.cu"
    source.write_text('#include "inc/scale.cuh"\nextern "C" __global__ void k(float* x) { x[0] *= SCALE; }\n')
    cache = CompileCache(tmp_path / "cache")
    units = _unit(source, ("k",))
    first = build(units, ["sm_80", "sm_90"], cache, tmp_path, jobs=1)
    assert (first.compiled, first.cached, first.failures) == (2, 0, [])
    again = build(units, ["sm_80", "sm_90"], cache, tmp_path, jobs=1)
    assert (again.compiled, again.cached) == (0, 2)
    assert again.module(units[0], "sm_90").cubin_path.read_bytes()[:4] == b"\x7fELF"
    header.write_text("#pragma once\n#define SCALE 3.0f\n")
    changed = build(units, ["sm_80", "sm_90"], cache, tmp_path, jobs=1)
    assert (changed.compiled, changed.cached) == (2, 0)
    assert changed.module(units[0], "sm_90").key != first.module(units[0], "sm_90").key


def test_parallel_build_reports_failures_per_sm(tmp_path):
    good, bad = tmp_path / "good.cu", tmp_path / "bad.cu"
    good.write_text('extern "C" __global__ void g(float* x) { x[0] = 1.0f; }\n')
    bad.write_text('extern "C" __global__ void b(float* x) { x[0] = oops; }\n')
    units = _unit(good, ("g",), "good.cu") + _unit(bad, ("b",), "bad.cu")
    result = build(units, ["sm_80", "sm_90"], CompileCache(tmp_path / "cache"), tmp_path, jobs=2)
    assert result.compiled == 2
    assert sorted(f.sm for f in result.failures) == ["sm_80", "sm_90"]
    error = result.failures[0].error()
    assert error.exit_code == ExitCode.FAILED
    assert "bad.cu does not compile for" in error.message and 'identifier "oops" is undefined' in error.message


def test_local_headers_follow_nested_quoted_includes(tmp_path):
    (tmp_path / "a.cuh").write_text('#include "sub/b.cuh"\n#include <cuda_bf16.h>\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.cuh").write_text('#include "c.cuh"\n')
    (tmp_path / "sub" / "c.cuh").write_text("// leaf\n")
    (tmp_path / "k.cu").write_text('#include "a.cuh"\n  #  include "missing.cuh"\n')
    found = local_headers(tmp_path / "k.cu", [])
    assert [p.relative_to(tmp_path.resolve()).as_posix() for p in found] == ["a.cuh", "sub/b.cuh", "sub/c.cuh"]


def test_find_globals_skips_comments_strings_macros_and_instantiations(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text('''// __global__ void commented(int);
/* __global__ void block_commented() */
#define DECLARE __global__ void macro_kernel()
template <int D, typename T>
__global__ void __launch_bounds__(256, 2) window_decode(const T* q) {}
extern "C" __global__ void
  plain_kernel(float* x) { const char* s = "__global__ void str()"; }
static __global__ __launch_bounds__(128) void other(int) {}
namespace ns { __global__ void in_ns(int); }
template __global__ void window_decode<128, float>(const float*);
''')
    found = [(k.name, k.line) for k in find_globals(source)]
    assert found == [("window_decode", 5), ("plain_kernel", 7), ("other", 8), ("in_ns", 9)]
    assert base_name("ns::window_decode<128, 256>") == "window_decode"
    assert base_name("tiny_round") == "tiny_round"


@pytest.mark.parametrize("name", [*sorted(SOURCES), *sorted(RAW_SOURCES)])
def test_the_fused_kernels_compile(name):
    """What CuPy compiles on a GPU compiles here first: a source error would otherwise show only there."""
    tool = find_toolchain()
    source = elementwise_source(name) if name in SOURCES else RAW_SOURCES[name].encode()
    built = compile_cubin(str(tool.nvrtc.path), source, f"{name}.cu", (f"kcontract_{name}",), "sm_90", (),
                          (str(tool.headers.path),))
    assert isinstance(built, Compiled), getattr(built, "log", built)
