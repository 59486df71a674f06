"""Launch shapes as integer expressions of template arguments: the grammar, and a clear refusal outside it."""

from __future__ import annotations

import pytest

from kcontract.contract.kernels import _integer, fill_launch


@pytest.mark.parametrize("text, want", [
    ("17408 + 160 * {head_dim}", 17408 + 160 * 512),
    ("{group} % 2", 0),
    ("max(16640, 8448 * (3 - 2 * {p_bf16})) + (4 - {head_dim} // 512) * 1000", 25344 + 3000),
    ("min({group}, 4) * 10", 40),
])
def test_expressions_of_template_arguments(text, want):
    assert _integer(text, {"head_dim": 512, "group": 16, "p_bf16": 0}) == (want, None)


@pytest.mark.parametrize("text", ["2 ** {group}", "abs({group})", "max({group})", "{group} / 2", "__import__('os')"])
def test_other_expressions_are_refused_by_name(text):
    value, why = _integer(text, {"group": 16})
    assert value == 0 and "min(...) and max(...)" in why and repr(text) in why


def test_shared_memory_per_target_sm():
    from kcontract.contract.model import CudaKernel

    def filled(launch: dict, targets: list[str]):
        kernel = CudaKernel(source="k.cu", symbols={"main": "k"}, launch={"main": launch})
        return fill_launch(kernel, {"head_dim": 512}, targets)

    kernel, why = filled({"dynamic_smem": "min({smem_optin}, 150000) - {head_dim}"}, ["sm_86", "sm_90", "sm_100"])
    assert why is None and kernel.launch["main"].dynamic_smem == {"sm_86": 101376 - 512, "sm_90": 149488,
                                                                  "sm_100": 149488}
    kernel, why = filled({"dynamic_smem": "min({smem_optin}, 50000)"}, ["sm_86", "sm_90"])
    assert why is None and kernel.launch["main"].dynamic_smem == 50000  # the same everywhere: one value
    kernel, why = filled({"dynamic_smem": {"sm_86": 1000, "sm_90": 2000}}, ["sm_90a"])  # as `mutate` writes it back
    assert why is None and kernel.launch["main"].dynamic_smem == 2000
    assert filled({"dynamic_smem": {"sm_86": 1000}}, ["sm_90"])[1] == (
        "launch `main` dynamic_smem: bytes for every target SM, none given for sm_90")
    assert filled({"dynamic_smem": "{smem_optin} + 1000000"}, ["sm_90"])[1] == (
        "launch `main` dynamic_smem on sm_90 between 0 and 1048576, given: 1232448")
    assert "names {smem_optin}, which the family does not give" in filled({"threads": "{smem_optin}"}, ["sm_90"])[1]
