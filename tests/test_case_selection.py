"""`--case` picks a case by its name in every gate's suite, or one gate's case by its suite-qualified name."""

from __future__ import annotations

from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.family.cases import selected_cases
from kcontract.gatetable import Suite
from tests.helpers.cli import ROOT


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


def test_an_unknown_case_is_one_line_listing_the_bare_names():
    done = CliRunner().invoke(cli, ["run", "--contract", str(ROOT / "tests" / "contracts" / "cpu.yaml"), "--only",
                                    "np_decode_d128_g4", "--case", "nope"])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1, done.output
    assert "--case nope: np_decode_d128_g4 has no such case; cases: linear1024, linear_3000, merge-stress, " \
           "ring640_w512" in done.output, done.output
