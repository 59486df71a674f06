"""Launch shapes as integer expressions of template arguments: the grammar, and a clear refusal outside it."""

from __future__ import annotations

import pytest

from kcontract.contract.kernels import _integer


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
