"""`Builds`, the one owner of compiled kernels: units grouped once, each (unit, SM) compiled once, another kernel
kind one more builder, and a kernel's build as a job carries it."""

from __future__ import annotations

from pathlib import Path

from kcontract.builds import builds as builds_module
from kcontract.builds.builds import Builds
from kcontract.contract.loader import load_contract
from kcontract.toolchain import units
from tests.helpers.fake_builder import TextBuilder, TextKernel
from tests.helpers.toolchain import toolchain

ROOT = Path(__file__).resolve().parents[1]
GATE5 = ROOT / "tests" / "contracts" / "gate5" / "contract.yaml"


def test_units_are_grouped_once_and_each_module_compiled_once(monkeypatch):
    toolchain()
    grouped = []
    real = units.group_units
    monkeypatch.setattr("kcontract.builds.cuda.group_units", lambda uses: grouped.append(1) or real(uses))
    loaded = load_contract(str(GATE5))
    builds = Builds.of(loaded)
    compiled = []
    cuda_build = builds.cuda.build
    monkeypatch.setattr(builds.cuda, "build", lambda *a: compiled.append(a[:2]) or cuda_build(*a))
    entry = loaded.entry("tiny")
    for _ in range(3):
        assert builds.unit(entry.kernel.cuda).label.endswith("tiny.cu")
        builds.module(entry.kernel.cuda, "sm_80")
        builds.kernel(entry.kernel.cuda, ["sm_80", "sm_90"])
    assert grouped == [1]
    assert [[u.shown for u in batch] for batch, _ in compiled] == [["../../cuda/tiny.cu"]] * 2
    assert [list(sms.values()) for _, sms in compiled] == [[["sm_80"]], [["sm_90"]]]  # each SM once, however often
    # asked


def test_another_kernel_kind_is_one_more_builder_that_no_caller_knows(tmp_path):
    source = tmp_path / "k.txt"
    source.write_text("code")
    kernel = TextKernel(str(source), {"main": "k_main"}, {})
    text = TextBuilder(tmp_path)
    builds = Builds([kernel], tmp_path, ["sm_80", "sm_90"], tmp_path / "cache",
                    builders=[*builds_module.default_builders(tmp_path / "cache", tmp_path), text])
    build = builds.kernel(kernel, ["sm_80", "sm_90"])
    assert build.kind == "text" and list(build.modules) == ["sm_80", "sm_90"]
    assert build.on("sm_90").lowered == {"k_main": "text_k_main"} and build.toolchain == "text-1"
    assert Path(build.on("sm_80").path).read_text() == "codesm_80"
    builds.module(kernel, "sm_80")
    assert text.compiles == [("k.txt", "sm_80"), ("k.txt", "sm_90")]


def test_asks_for_other_sms_compile_in_one_batch(tmp_path):
    kernels = []
    for name in ("a", "b"):
        (tmp_path / f"{name}.txt").write_text(name)
        kernels.append(TextKernel(str(tmp_path / f"{name}.txt"), {"main": f"{name}_main"}, {}))
    text = TextBuilder(tmp_path)
    batches = []
    real = text.build
    text.build = lambda units, sms, progress=None: batches.append(dict(sms)) or real(units, sms, progress)
    builds = Builds(kernels, tmp_path, ["sm_80", "sm_90"], tmp_path / "cache", builders=[text])
    built = builds.build_each([([kernels[0]], ["sm_80", "sm_90"]), ([kernels[1]], ["sm_90"])])
    assert len(batches) == 1 and sorted(batches[0].values()) == [["sm_80", "sm_90"], ["sm_90"]]
    assert built.compiled == 3 and sorted(text.compiles) == [("a.txt", "sm_80"), ("a.txt", "sm_90"), ("b.txt", "sm_90")]
    assert len(builds.build_each([([kernels[1]], ["sm_90", "sm_80"])]).modules) == 2
    assert len(batches) == 2 and text.compiles[3:] == [("b.txt", "sm_80")]  # only what was not built
