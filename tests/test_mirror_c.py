"""Partials at fp32 resolution and mirror C (exact scores): faults the bf16 output hides go red on plain rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kcontract.contract.loader import load_contract
from kcontract.launch.python import PythonLauncher
from kcontract.gatetable import Suite

ROOT = Path(__file__).resolve().parent.parent
CPU = load_contract(str(ROOT / "tests" / "contracts" / "cpu.yaml"))


def family_of(entry: str, **arith):
    base = CPU.entry(entry).family
    spec = base.spec.model_copy(update={"arithmetic": base.spec.arithmetic.model_copy(update=arith)})
    return type(base)(entry, spec, CPU.seed)


def failures_per_row(family, kernel: str, case: str) -> dict[str, dict[str, int]]:
    """{row tag: {output: outputs outside their range}} for one gate-4 case run by a Python kernel."""
    checked = family.checks(Suite.EXACT, case)[0]
    got = PythonLauncher(kernel).run(checked.problem)
    reference = checked.compute_reference()
    found: dict[str, dict[str, int]] = {}
    for exp in reference.expected:
        raw = got[exp.output]
        values = raw.astype(np.float64) if exp.fmt == "fp32" else (raw.astype(np.uint32) << 16).view(np.float32)
        mask = np.ones(raw.shape, bool) if exp.mask is None else exp.mask
        bad = mask & ~((values >= exp.lo) & (values <= exp.hi))
        for row, tag in enumerate(checked.notes["rows"]):
            found.setdefault(tag, {})[exp.output] = found.get(tag, {}).get(exp.output, 0) + int(bad[row].sum())
    return found


@pytest.mark.parametrize("kernel, entry, output", [
    ("tests.doubles.controls:exp_error_1e4", "np_decode_d512_g16", "part_l"),
    ("tests.doubles.controls:bf16_scores", "np_decode_d128_g4", "part_l"),
    ("tests.doubles.controls:prescaled_q_bf16", "np_decode_d256_g3", "part_l"),
])
def test_faults_the_output_hides_are_red_on_plain_rows(kernel, entry, output):
    family = family_of(entry)
    case = next(c for c in family.cases(Suite.EXACT) if c.startswith("mirror-C/"))
    faulty = failures_per_row(family, kernel, case)
    plain = [tag for tag in faulty if tag.endswith("plain")]
    assert plain and all(faulty[tag][output] > 0 for tag in plain), faulty
    correct = failures_per_row(family, "tests.doubles.decode:window_decode", case)
    assert all(n == 0 for counts in correct.values() for n in counts.values()), correct


def test_mirror_c_scores_are_exact_in_fp32_and_not_in_bf16():
    from kcontract.families.attention import mirrors
    from kcontract.numerics import from_bits, round_to

    family = family_of("np_decode_d512_g16")
    layout, window = next(iter(family._mirror_layouts().items()))
    for row in family._mirror_c_rows(layout, window, family._mirror_positions(window)):
        q, k = from_bits(row.q, "bf16"), from_bits(row.k, "bf16")
        s = np.einsum("nd,hd->nh", k[:, 0, :], q) * mirrors.C_SCALE
        assert np.array_equal(round_to(s, "fp32"), s) and not np.array_equal(round_to(s, "bf16"), s)
        assert np.abs(q).max() <= mirrors.C_MAX and not np.array_equal(round_to(q * mirrors.C_SCALE, "bf16"),
                                                                       q * mirrors.C_SCALE)


def test_a_kernel_that_hides_its_partials_is_checked_on_its_output_only():
    hidden = family_of("np_decode_d128_g4", partials="hidden")
    case = hidden.cases(Suite.REALISTIC)[0]
    assert [e.output for e in hidden.checks(Suite.REALISTIC, case)[0].compute_reference().expected] == ["out"]
    shown = family_of("np_decode_d128_g4")
    assert [e.output for e in shown.checks(Suite.REALISTIC, case)[0].compute_reference().expected] == [
        "out", "part_m", "part_l", "part_o"]


def test_mirror_c_scores_are_exact_under_the_h200_tensor_core_model():
    """E_j = 0 holds for tensor-core kernels too: the probe-validated k-step model gives the exact dot products."""
    from kcontract.families.attention import mirrors
    from kcontract.numerics import from_bits
    from tests.helpers.decode_rows import Row, mma_scores

    family = family_of("np_decode_d512_g16")
    layout, window = next(iter(family._mirror_layouts().items()))
    for data in family._mirror_c_rows(layout, window, family._mirror_positions(window))[:3]:
        row = Row(from_bits(data.q, "bf16"), from_bits(data.k, "bf16"), from_bits(data.v, "bf16"), data.first,
                  mirrors.C_SCALE)
        exact = np.einsum("nd,hd->hn", row.k[:, 0, :], row.q)
        assert np.array_equal(mma_scores(row).astype(np.float64), exact)
        scaled = (mma_scores(row) * np.float32(mirrors.C_SCALE)).astype(np.float64)
        assert np.array_equal(scaled, exact * mirrors.C_SCALE)
