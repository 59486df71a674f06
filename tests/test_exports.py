"""Constants a kernel exports, read back from its cubin: variable templates named as a compile unit's exports,
lowered by NVRTC and read from the ELF symbol table; the production kernels' exports against contract.yaml."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import pytest
import yaml

from kcontract.errors import KContractError
from kcontract.toolchain.build import build
from kcontract.toolchain.cache import CompileCache, compile_key
from kcontract.toolchain.exports import ExportError, module_exports, name_expression, read_export, read_exports
from kcontract.toolchain.units import KernelUse, Unit, group_units
from tests.helpers.toolchain import toolchain

ROOT = Path(__file__).resolve().parents[1]
LABEL = "tests/cuda/exports.cu"  # exports per SM, and the shapes refused
CONTRACT = ROOT / "contract.yaml"
SMS = ("sm_80", "sm_90")  # sm_90's exports see __CUDA_ARCH__ 900, sm_80's 800


def built(units: list[Unit], sms, cache_dir: Path):
    """Every unit built for every SM the toolchain builds for (skipping where it builds for none); no failure."""
    tool = toolchain()
    sms = [sm for sm in sms if tool.builds(sm)]
    if not sms:
        pytest.skip(f"nvrtc {tool.nvrtc.version} builds for none of the SMs this test needs")
    result = build(units, sms, CompileCache(cache_dir), ROOT, jobs=1, toolchain=tool)
    assert not result.failures, [failure.log for failure in result.failures]
    return result, sms


def unit(label: str, exports, expressions=()) -> Unit:
    return Unit(label, ROOT / label, (), tuple(expressions), ("test",), exports=tuple(exports))


EXPORTS = ("&ex::kExportBytes<128, 4>", "&ex::kExportBytes<512, 16>", "&ex::kExportPerSm<64>",
           "&ex::kExportPieces<256>", "&ex::kExportNegative<7>", "&ex::kExportWide<3>")
REFUSED = ("&ex::kUninitialised<1>", "&ex::kExportShort<5>", "&ex::kTable")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """tests/cuda/exports.cu built for sm_80 and sm_90 with every export this file reads, and a kernel."""
    return built([unit(LABEL, EXPORTS + REFUSED, ("ex_fill",))], SMS,
                 tmp_path_factory.mktemp("cache"))


def test_exports_read_back_per_sm(small):
    result, sms = small
    for sm in sms:
        module = result.modules[(unit(LABEL, ()).ident, sm)]
        optin = 227 * 1024 if sm == "sm_90" else 163 * 1024
        assert module_exports(module, EXPORTS) == {
            "&ex::kExportBytes<128, 4>": 1024 + 32 * 128 * 4, "&ex::kExportBytes<512, 16>": 1024 + 32 * 512 * 16,
            "&ex::kExportPerSm<64>": optin - 64, "&ex::kExportPieces<256>": 32, "&ex::kExportNegative<7>": -7,
            "&ex::kExportWide<3>": (1 << 40) + 3}
        assert module_exports(module, ["ex::kExportPieces<256>"]) == {"&ex::kExportPieces<256>": 32}  # & added
        cubin = Path(module.cubin_path).read_bytes()
        assert read_export(cubin, module.lowered["&ex::kExportPerSm<64>"]) == optin - 64
        assert module.lowered["&ex::kExportBytes<128, 4>"] == "_ZN2ex12kExportBytesILi128ELi4EEE"
    per_sm = {sm: module_exports(result.modules[(unit(LABEL, ()).ident, sm)],
                                 ["&ex::kExportPerSm<64>"]) for sm in sms}
    assert len(sms) < 2 or len(set(map(str, per_sm.values()))) == 2, per_sm


def test_refused_exports_say_why(small):
    result, sms = small
    module = result.modules[(unit(LABEL, ()).ident, sms[0])]
    cubin = Path(module.cubin_path).read_bytes()
    cases = {
        "&ex::kUninitialised<1>": "NOBITS",
        "&ex::kExportShort<5>": "2 bytes long; an exported integer is 4 or 8 bytes",
        "&ex::kTable": "12 bytes long",
    }
    for expression, why in cases.items():
        with pytest.raises(ExportError, match=why) as caught:
            read_export(cubin, module.lowered[expression])
        assert caught.value.mangled == module.lowered[expression]
        assert isinstance(caught.value, KContractError)
    with pytest.raises(ExportError, match="not defined in the cubin's symbol table"):
        read_export(cubin, "_ZN2ex12kExportBytesILi1ELi1EEE")  # never instantiated
    with pytest.raises(ExportError, match="STT_FUNC symbol, not a variable"):
        read_export(cubin, "ex_fill")
    with pytest.raises(ExportError, match="not an ELF cubin"):
        read_export(b"not a cubin", "x")
    with pytest.raises(ExportError, match=r"&ex::kExportBytes<1, 1> was not compiled into this module"):
        module_exports(module, ["&ex::kExportBytes<1, 1>"])
    assert read_exports(cubin, []) == {}


def test_an_export_that_does_not_exist_fails_the_compile(tmp_path):
    tool = toolchain()
    if not tool.builds("sm_80"):
        pytest.skip(f"nvrtc {tool.nvrtc.version} cannot build for sm_80")
    result = build([unit(LABEL, ["&ex::kExportMissing<1>"])], ["sm_80"], CompileCache(tmp_path),
                   ROOT, jobs=1, toolchain=tool)
    assert not result.modules and len(result.failures) == 1
    assert "kExportMissing" in result.failures[0].log


def test_exports_are_kept_in_the_cache_and_leave_other_keys_alone(small, tmp_path):
    result, sms = small
    module = result.modules[(unit(LABEL, ()).ident, sms[0])]
    meta = json.loads((Path(module.cubin_path).parent / "meta.json").read_text())
    assert meta["facts"]["exports"] == list(EXPORTS + REFUSED)
    assert set(EXPORTS + REFUSED) | {"ex_fill"} == set(meta["lowered"])
    again, _ = built([unit(LABEL, EXPORTS + REFUSED, ("ex_fill",))], sms[:1],
                     Path(module.cubin_path).parents[2])
    hit = again.modules[(unit(LABEL, ()).ident, sms[0])]
    assert hit.cached and hit.key == module.key and module_exports(hit, EXPORTS) == module_exports(module, EXPORTS)
    # a unit that exports nothing keys its compile as before units could export
    args = dict(toolchain="t", label="k.cu", source=b"src", headers={"h.cuh": b"h"}, names=("k<1>",), sm="sm_80",
                options=("-O3",))
    legacy = {"toolchain": "t", "label": "k.cu", "source": hashlib.sha256(b"src").hexdigest(),
              "headers": {"h.cuh": hashlib.sha256(b"h").hexdigest()}, "names": ["k<1>"], "sm": "sm_80",
              "options": ["-O3"]}
    assert compile_key(**args) == compile_key(**args, exports=()) == hashlib.sha256(
        json.dumps(legacy, sort_keys=True).encode()).hexdigest()
    assert compile_key(**args, exports=("&ns::k<1>",)) != compile_key(**args)


def test_units_gather_their_uses_exports():
    source = ROOT / "kernels" / "window_decode.cu"
    uses = [KernelUse("entry", "a", "partials", "window_decode_partials<128, 4>", "kernels/window_decode.cu", source,
                      (), exports=("&wd::kExportPvKeyGroups<128, 4>", "&wd::kExportMergeRuns<128, 4>")),
            KernelUse("entry", "b", "partials", "window_decode_partials<256, 4>", "kernels/window_decode.cu", source,
                      (), exports=("&wd::kExportPvKeyGroups<256, 4>", "&wd::kExportPvKeyGroups<128, 4>")),
            KernelUse("entry", "c", "merge", "window_decode_merge<256, 4>", "kernels/window_decode.cu", source, ())]
    [grouped] = group_units(uses)
    assert grouped.exports == ("&wd::kExportMergeRuns<128, 4>", "&wd::kExportPvKeyGroups<128, 4>",
                               "&wd::kExportPvKeyGroups<256, 4>")
    assert group_units(uses[2:])[0].exports == ()
    assert name_expression(" wd::kExportPvKeyGroups<128, 4>") == "&wd::kExportPvKeyGroups<128, 4>"
    assert name_expression("&wd::kX<1>") == "&wd::kX<1>"


# The production kernels: what each exports, by its launched symbol's template arguments.
PRODUCTION = {
    "window_decode": {"partials": "wd::kExportPartialsSmemBytes<{head_dim}, {group}>",
                      "key_groups": "wd::kExportPvKeyGroups<{head_dim}, {group}>",
                      "merge_runs": "wd::kExportMergeRuns<{head_dim}, {group}>"},
    "window_prompt": {"partials": "wp::kExportPartialsSmemBytes<{head_dim}, {group}, {p_bf16}>"},
    "window_prompt_fused": {"attend": "wf::kExportAttendSmemBytes<{head_dim}, {group}, {p_bf16}>"},
}


def contract_kernels() -> tuple[list[str], dict]:
    """contract.yaml's targets and its `kernels:` section."""
    data = yaml.safe_load(CONTRACT.read_text())
    return list(data["targets"]), data["kernels"]


def instances(cuda: dict) -> list[dict[str, int]]:
    """Every template-argument combination a kernel's `instances` list (head_dim, group, p_bf16 where given)."""
    found = []
    for block in cuda["instances"]:
        keys = [k for k in ("head_dim", "group", "p_bf16") if k in block]
        for values in itertools.product(*(block[k] for k in keys)):
            combination = dict(zip(keys, values))
            if combination not in found:
                found.append(combination)
    return found


@pytest.fixture(scope="module")
def production(tmp_path_factory):
    """Each production kernel's source built once per target SM with every export of every instance (the kernels
    themselves are not instantiated: the compiles are quick), and the values read back: {(source, sm): {name
    expression: value}}."""
    targets, kernels = contract_kernels()
    units = []
    for name, exports in PRODUCTION.items():
        cuda = kernels[name]["cuda"]
        names = [name_expression(template.format(**args)) for args in instances(cuda) for template in exports.values()]
        units.append(unit(cuda["source"], names))
    result, sms = built(units, targets, tmp_path_factory.mktemp("cache"))
    values = {(u.label, sm): module_exports(result.modules[(u.ident, sm)], u.exports) for u in units for sm in sms}
    return values, sms, targets, kernels


def test_production_kernels_export_their_layouts_shared_memory_on_each_sm(production):
    """A few instances' launch bytes, pinned: the layouts docs/kernel-contract.md describes (the prompt kernel's ring
    grows with the SM's opt-in; the fused kernel gives 0 where wgmma traps)."""
    values, sms, _, _ = production
    pinned = {
        ("kernels/window_decode.cu", "wd::kExportPartialsSmemBytes<128, 4>"): 37888,
        ("kernels/window_decode.cu", "wd::kExportPartialsSmemBytes<256, 8>"): 58368,
        ("kernels/window_decode.cu", "wd::kExportPartialsSmemBytes<512, 16>"): 99328,
        ("kernels/window_prompt.cu", "wp::kExportPartialsSmemBytes<512, 8, 0>"):
            {"sm_80": 161280, "sm_86": 87552, "sm_89": 87552, "sm_90a": 230400, "sm_100": 230400, "sm_120": 87552,
             "sm_121": 87552},
        ("kernels/window_prompt.cu", "wp::kExportPartialsSmemBytes<256, 2, 1>"):
            {"sm_80": 115200, "sm_86": 94720, "sm_89": 94720, "sm_90a": 115200, "sm_100": 115200, "sm_120": 94720,
             "sm_121": 94720},
        ("kernels/window_prompt.cu", "wp::kExportPartialsSmemBytes<128, 3, 0>"): 74496,
        ("kernels/window_prompt_fused.cu", "wf::kExportAttendSmemBytes<256, 2, 1>"): {"sm_90a": 166912, "sm_100": 166912},
        ("kernels/window_prompt_fused.cu", "wf::kExportAttendSmemBytes<512, 16, 0>"): {"sm_90a": 224256, "sm_100": 224256},
        ("kernels/window_prompt_fused.cu", "wf::kExportAttendSmemBytes<128, 4, 0>"): {"sm_90a": 109568, "sm_100": 109568},
    }
    for (source, variable), want in pinned.items():
        for sm in sms:
            expected = want if isinstance(want, int) else want.get(sm, 0)
            assert values[(source, sm)][name_expression(variable)] == expected, (variable, sm)


def test_the_contract_launches_with_what_the_kernels_export():
    """Every production launch with dynamic shared memory reads it from the kernel: no size is copied into YAML."""
    _, kernels = contract_kernels()
    for name, exports in PRODUCTION.items():
        cuda = kernels[name]["cuda"]
        for role, shape in cuda["launch"].items():
            named = shape["dynamic_smem"].strip("{}")
            assert cuda["exports"][named] == exports[role], (name, role)


def test_window_decode_exports_the_split_order_counts(production):
    """KG = 256 DT / D key groups (DT = 8, 4 or 2 dims per thread for up to 4, 8 or 16 query heads per key head) and
    8 merge runs: what the `split_lanes` replay reads, pinned here from the kernel's documented layout."""
    values, sms, _, kernels = production
    cuda = kernels["window_decode"]["cuda"]
    exports = PRODUCTION["window_decode"]
    for sm in sms:
        found = values[(cuda["source"], sm)]
        for args in instances(cuda):
            dims = 8 if args["group"] <= 4 else 4 if args["group"] <= 8 else 2
            groups, runs = (name_expression(exports[k].format(**args)) for k in ("key_groups", "merge_runs"))
            assert found[groups] == 256 * dims // args["head_dim"], (groups, sm)
            assert found[runs] == 8, (runs, sm)


def test_a_stand_in_is_launched_with_its_entrys_exports_and_a_kernel_of_its_own_with_its_own():
    """The stale-record control's patch shrinks the V ring (3 stages for 4): launched as its entry is, it still gets
    the production layout's bytes, so a layout mutant meets the kernel's exact-size trap; the control that gives its
    own launch keeps it."""
    from kcontract.builds.builds import Builds
    from kcontract.contract.loader import load_contract
    from kcontract.toolchain.exports import kernel_exports

    toolchain()
    loaded = load_contract(str(CONTRACT), import_kernels=False)
    entry = loaded.entry("decode_d512_g16")
    stale = loaded.control("decode_stale_record").kernel.cuda
    builds = Builds.of(loaded, jobs=1)
    found, errors = builds.launch_exports(entry.kernel.cuda, stale, ["sm_90a"])
    assert not errors and found["sm_90a"]["partials_smem"] == 99328
    assert kernel_exports(builds.module(stale, "sm_90a"), stale)["partials_smem"] == 99328 - 512 * 16 * 2
    over = loaded.control("decode_smem_over_limit").kernel.cuda
    assert builds.launch_exports(entry.kernel.cuda, over, ["sm_90a"]) == ({}, [])  # 110,000 bytes, its own
