"""`--case` picks a case by its name in every gate's suite, or one gate's case by its suite-qualified name."""

from __future__ import annotations

from kcontract.family.cases import selected_cases
from kcontract.gatetable import Suite


class _Family:
    """The cases a family names per suite, as the matmul family names them."""

    suites = frozenset(Suite)

    def cases(self, suite: Suite) -> list[str]:
        prefix = {Suite.STRESS: "stress/", Suite.EXACT: "exact/"}.get(suite, "")
        return [prefix + name for name in ("m5_k600", "m512_k4096")]


def test_a_bare_name_picks_its_case_in_every_suite_and_a_qualified_name_one_suite():
    family = _Family()
    assert [selected_cases(family, g, "m5_k600") for g in (1, 2, 3, 4)] == [
        ["m5_k600"], ["m5_k600"], ["stress/m5_k600"], ["exact/m5_k600"]]
    assert [selected_cases(family, g, "exact/m5_k600") for g in (1, 2, 3, 4)] == [[], [], [], ["exact/m5_k600"]]
    assert selected_cases(family, 4, None) == ["exact/m5_k600", "exact/m512_k4096"]
    assert selected_cases(family, 4, "m5") == [] and selected_cases(family, 5, "m5_k600") == []
