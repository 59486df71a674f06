"""The fused prompt ABI and its declared order window_prompt_wgmma: the numpy double of the fused kernel passes
gates 1-4 with both planted faults red, the replay's quad sums and online merge are the fp32 order they declare, the
double's results lie inside the replayed ranges, natural k-steps group 16 consecutive dims, and contradicting
declarations are refused by name."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.families.attention import replay
from kcontract.families.attention.prompt import AttentionPrompt
from kcontract.families.attention.prompt_layout import ATTEND_ARGS
from kcontract.families.attention.prompt_spec import PromptSpec
from kcontract.families.attention.replay import _merge_online, _quad_sums, exp_interval, replay_row, replay_rows
from kcontract.families.attention.spec import Arithmetic, DecodeSpec
from kcontract.families.attention.tensorcore import kstep, kstep_dims, replay_dots
from kcontract.numerics import round_to
from tests.doubles.prompt_fused import attend_tile, quad_sums
from tests.test_replay import bf16_row, rn32_exact

ROOT = Path(__file__).resolve().parents[1]
FUSED = {"chunk": 64, "score": "mma_bf16", "score_order": "replay_natural", "sum_order": "window_prompt_wgmma",
         "pv": "mma_bf16", "partials": "hidden"}
SUMMARY = ("SUMMARY 2 kernels: 2 pass gates 1-4, 0 fail, 0 known findings; 2 controls: 2 red as planted, 0 missed; "
           "0 limit problems")


def test_the_fused_cpu_contract_passes_and_both_controls_are_red_where_planted(tmp_path):
    report = tmp_path / "run.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KCONTRACT_IN_PROCESS")}
    proc = subprocess.run([sys.executable, "-m", "kcontract", "run", "--contract", "tests/contracts/fused.yaml",
                           "--jobs", "2", "--json", str(report)], cwd=ROOT, env=env | {"COLUMNS": "200"},
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert SUMMARY in proc.stdout, proc.stdout[-3000:]
    for entry in ("np_fused_d128_g2_p32", "np_fused_d64_g2_bf16_sliding"):
        for gate in (1, 2, 3, 4):
            assert re.search(rf"^{entry} gate {gate} .*: pass, \d+ ", proc.stdout, re.M), (entry, gate)
    doc = json.loads(report.read_text())
    for control in doc["controls"]:
        red = [int(g) for g, r in control["gates"].items() if not r["passed"]]
        assert red == [doc["planted"][control["task"]["name"]]], control["task"]
    for entry in doc["entries"]:
        for gate in ("1", "3", "4"):  # row_m is checked bit for bit beside out
            by_output = entry["gates"][gate]["facts"]["by_output"]
            assert by_output["row_m"]["decided"] == by_output["row_m"]["checked"] > 0
            assert by_output["row_m"]["failures"] == 0


def test_quad_sums_add_each_threads_keys_in_order_then_the_butterfly():
    rng = np.random.default_rng(5)
    p = np.exp(rng.standard_normal((7, 64)) * 3).astype(np.float32)
    p[2, 10:40] = 0  # masked keys add exact zeros
    want = []
    for row in p:
        lanes = [np.float32(0)] * 4
        for t in range(8):
            for e in (0, 1):
                lanes = [np.float32(lanes[c] + row[8 * t + 2 * c + e]) for c in range(4)]
        lanes = [np.float32(lanes[c] + lanes[c ^ 1]) for c in range(4)]
        lanes = [np.float32(lanes[c] + lanes[c ^ 2]) for c in range(4)]
        want.append(lanes[0])
    assert np.array_equal(_quad_sums(p.astype(np.float64)), np.array(want, np.float64))
    assert np.array_equal(quad_sums(p), np.array(want, np.float32))


def test_natural_k_steps_take_dims_16s_to_16s_plus_15_in_order():
    rng = np.random.default_rng(9)
    d = 128
    assert np.array_equal(kstep_dims(d, "natural"), np.arange(d).reshape(d // 16, 16))
    q = round_to(rng.standard_normal((3, d)), "bf16")
    k = round_to(rng.standard_normal((200, d)) * 2.0 ** rng.integers(-6, 6, (200, 1)), "bf16")
    acc = np.zeros((3, 200))
    for s in range(d // 16):
        dims = slice(16 * s, 16 * s + 16)
        acc = kstep(acc, np.broadcast_to(q[:, None, dims], (3, 200, 16)), np.broadcast_to(k[None, :, dims],
                                                                                         (3, 200, 16)))
    assert np.array_equal(replay_dots(q, k, grouping="natural"), acc)
    assert not np.array_equal(replay_dots(q, k), acc)  # the decode grouping rounds elsewhere
    with pytest.raises(ValueError, match="a k-step grouping of decode or natural, given: 'wgmma'"):
        kstep_dims(d, "wgmma")


def online_exact(m, l, o, expf):
    """The online merge of one row in exact rationals, each step rounded to fp32: L, O and bf16(RN(O / L))."""
    big_m, big_l, big_o = -np.inf, 0.0, [0.0] * len(o[0])
    for mc, lc, oc in zip(m, l, o):
        new = max(big_m, mc)
        a = expf(np.float32(big_m - new)) if big_m > -np.inf else 0.0
        b = expf(np.float32(mc - new))
        big_l = rn32_exact(Fraction(lc) * Fraction(b) + Fraction(rn32_exact(Fraction(big_l) * Fraction(a))))
        big_o = [rn32_exact(Fraction(x) * Fraction(b) + Fraction(rn32_exact(Fraction(y) * Fraction(a))))
                 for x, y in zip(oc, big_o)]
        big_m = new
    return round_to(np.array([rn32_exact(Fraction(y) / Fraction(big_l)) for y in big_o]), "bf16")


def merge_inputs(rng, nch: int, d: int):
    """Chunk maxima tens of nats apart (fp32), l_c >= 1 and signed o_c (fp32) for one row."""
    m = np.float32(rng.uniform(-30, 30, nch)).astype(np.float64)
    l = np.float32(1 + rng.uniform(0, 60, nch)).astype(np.float64)
    o = np.float32(rng.standard_normal((nch, d)) * l[:, None]).astype(np.float64)
    return m, l, o


def test_the_online_merge_replay_is_the_exact_fp32_order_and_bounds_every_expf_within_its_ulps(monkeypatch):
    rng = np.random.default_rng(17)
    for trial in range(6):
        m, l, o = merge_inputs(rng, 7, 5)
        lo, hi = _merge_online(m[None], l[None], l[None], o[None], o[None])
        for _ in range(4):  # expf anywhere in its interval: each call a random fp32 value inside
            def pick(x):
                a, b = exp_interval(np.array([float(x)]))
                steps = int(rng.integers(0, 2 * replay.EXP_ULPS + 1))
                v = np.float32(a[0])
                for _ in range(steps):
                    v = min(np.nextafter(v, np.float32(np.inf)), np.float32(b[0]))
                return float(v)

            got = online_exact(m, l, o, pick)
            assert np.all((lo[0] <= got) & (got <= hi[0])), trial
    monkeypatch.setattr(replay, "EXP_ULPS", 0)  # expf = RN32(exp): the interval is one value, the replay exact
    for trial in range(6):
        m, l, o = merge_inputs(rng, 6, 5)
        lo, hi = _merge_online(m[None], l[None], l[None], o[None], o[None])
        want = online_exact(m, l, o, lambda x: float(np.float32(np.exp(np.float64(x)))))
        assert np.array_equal(lo[0], want) and np.array_equal(hi[0], want), trial


def peaked_tile(rng, n: int, d: int, group: int, heights: list[float]):
    """bf16 q [G, D], k and v [n, 1, D] with one key per 64-key chunk raised by heights[c] nats."""
    q, k, v, scale = bf16_row(rng, group, n, d, k_rms=0.15)
    qf = q.mean(axis=0)
    for c, h in enumerate(heights):
        j = 64 * c + int(rng.integers(64))
        if j < n:
            k[j, 0] = round_to(qf * h / (float(qf @ q.mean(axis=0)) * scale), "bf16")
    return q, k, v, scale


@pytest.mark.parametrize("heights", [[0] * 10, [0, 2, 1, 4, 3, 6, 5, 8, 7, 10], [5, 50, 10, 80, 0, 110, 20, 108, 3, 60]])
@pytest.mark.parametrize("p_bf16", [False, True])
def test_the_doubles_fp32_results_lie_inside_the_replayed_ranges(p_bf16, heights):
    """Rows of one tile over ten chunks whose maxima are close, rise chunk by chunk, or lie up to 110 nats apart
    (some rescales underflow to 0); the later rows' windows start chunks later, so their first chunks are all
    masked. The double without O's rescale lies outside."""
    rng = np.random.default_rng(31 + p_bf16)
    d, group, n = 64, 2, 640
    q, k, v, scale = peaked_tile(rng, n, d, group, heights)
    qs = round_to(q[None] + 0.3 * rng.standard_normal((12, group, d)), "bf16")  # each row its own query
    firsts = np.array([0, 0, 5, 63, 64, 130, 200, 300, 390, 400, 500, 600])
    lasts = np.array([639, 620, 600, 639, 450, 639, 330, 639, 500, 639, 630, 639])
    outside = 0
    for rescale_o in (True, False):
        y, top = attend_tile(qs, k[:, 0], v[:, 0], firsts, lasts, 0, np.float32(scale), p_bf16, "natural",
                             rescale_o)
        got = round_to(y.astype(np.float64), "bf16")
        for i, (first, last) in enumerate(zip(firsts, lasts)):
            found = replay_row(qs[i], k[first:last + 1], v[first:last + 1], first, last, scale, 64, group,
                               order="window_prompt_wgmma", p_round="bf16" if p_bf16 else "none",
                               grouping="natural")
            lo, hi = found["out"]
            inside = (lo <= got[i]) & (got[i] <= hi)
            if rescale_o:
                assert np.all(inside), i
                assert np.array_equal(found["row_m"][0], top[i].astype(np.float64)), i
                assert np.mean(lo == hi) > 0.6, (i, np.mean(lo == hi))
            else:
                outside += int((~inside).sum())
    assert outside > 100, outside


def test_rows_replayed_together_in_the_online_order_get_the_bounds_each_gets_alone():
    rng = np.random.default_rng(12)
    d, group = 64, 2
    q, k, v, scale = bf16_row(rng, group, 400, d, k_rms=0.3)
    rows = [(round_to(q + 0.2 * rng.standard_normal(q.shape), "bf16"), k[first:pos + 1], v[first:pos + 1], first,
             pos, None) for first, pos in ((10, 300), (64, 383), (0, 290))]  # five chunks each
    together = replay_rows(rows, scale, 64, group, order="window_prompt_wgmma", p_round="bf16", grouping="natural")
    for row, got in zip(rows, together):
        alone = replay_row(*row[:5], scale, 64, group, order="window_prompt_wgmma", p_round="bf16",
                           grouping="natural")
        for name in ("out", "row_m"):
            assert all(np.array_equal(a, b) for a, b in zip(alone[name], got[name])), name


def fused_spec(**fields) -> dict:
    return {"abi": "fused", "shape": {"head_dim": 64, "q_heads": 4, "kv_heads": 2}, "arithmetic": dict(FUSED),
            "cases": [{"name": "c", "cache": {"kind": "linear", "length": 400},
                       "sequences": [{"start": 200, "rows": 70}, {"start": 0, "rows": 10}]}]} | fields


def test_a_fused_call_is_one_attend_launch_with_row_maxima_and_no_partials():
    f = AttentionPrompt("p", PromptSpec.model_validate(fused_spec()), 3)
    assert f.kernel_abi() == ATTEND_ARGS and f.kernel_abi()[7:9] == ("out", "row_m")
    assert [s["symbol"] for s in f.launch_shapes()] == ["attend"]
    problem = f.exactness("c")[0].problem
    assert set(problem.outputs) == {"out", "row_m"} and problem.outputs["row_m"].shape == (80, 4)
    assert "n_part" not in problem.scalars
    (launch,) = problem.launches
    # G = 2: tiles of 32 rows with both query heads of a key head; 70 rows take 3 tiles, 10 rows 1
    assert launch.role == "attend" and launch.grid == (4, 2, 1) and launch.args == ATTEND_ARGS
    inv = f.invariance("c")[0]
    assert inv.outputs == ("out", "row_m")
    labels = [variant.label for variant in inv.variants]
    assert "rerun" in labels and not any("n_part" in label for label in labels)
    split = AttentionPrompt("s", PromptSpec.model_validate(fused_spec(abi="split", arithmetic={})), 3)
    assert f.case_buffer_bytes("c") < split.case_buffer_bytes("c")  # no partials
    call = f.bench_calls([1024], [1])[0]
    assert call.label == "prompt d64 4/2 P32 fused" and set(call.outputs) == {"out", "row_m"}
    assert [launch.grid for launch in call.launches] == [(16, 2, 1)]  # 512 rows in tiles of 32, per key head


@pytest.mark.parametrize("fields, words", [
    ({"chunk": 256}, "it needs score_order: replay_natural, exp: expf, prob_round: none or bf16, div: ieee, "
                     "out: bf16, chunk: 64, no rescales"),
    ({"score_order": "replay"}, "it needs score_order: replay_natural"),
    ({"partials": "checked"}, "sum_order: window_prompt_wgmma merges online and writes no partials: it needs "
                              "partials: hidden"),
    ({"pv": "fp32"}, "sum_order: window_prompt_wgmma sums p times V on tensor cores: it needs pv: mma_bf16"),
    ({"prob_round": "bf16_numerator"}, "prob_round: none or bf16"),
    ({"sum_order": "window_prompt_mma", "partials": "checked"}, "it needs score_order: replay, exp: expf"),
    ({"score": "fp32", "sum_order": "any"}, "score_order: replay_natural replays tensor-core k-steps: it needs "
                                            "score: mma_bf16"),
])
def test_contradicting_arithmetic_is_refused_by_field(fields, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        Arithmetic(**(FUSED | fields))


@pytest.mark.parametrize("fields, words", [
    ({"arithmetic": {"score": "mma_bf16", "score_order": "replay", "sum_order": "window_prompt_mma"}},
     "abi: fused is one launch that merges online and writes no partials: it needs sum_order: window_prompt_wgmma "
     "and partials: hidden, given: sum_order: window_prompt_mma, partials: checked"),
    ({"abi": "split"}, "sum_order: window_prompt_wgmma is the fused kernel's order (one launch, an online merge): it "
                       "needs abi: fused"),
])
def test_an_abi_contradicting_its_order_is_refused(fields, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        PromptSpec.model_validate(fused_spec(**fields))


def test_a_decode_entry_cannot_declare_the_fused_order():
    with pytest.raises(ValueError, match="a decode entry cannot declare it"):
        DecodeSpec.model_validate({"shape": {"head_dim": 64, "q_heads": 2, "kv_heads": 1}, "arithmetic": FUSED,
                                   "cases": [{"name": "c", "cache": {"kind": "linear", "length": 100},
                                              "rows": [99]}]})


def test_a_fused_entry_needs_a_kernel_that_takes_the_fused_abi(tmp_path):
    path = tmp_path / "contract.yaml"
    path.write_text(f"""\
version: 1
seed: 1
entries:
  - name: p
    family: attention.prompt
    kernel: {{python: "tests.doubles.prompt:window_prompt"}}
    abi: fused
    shape: {{head_dim: 64, q_heads: 2, kv_heads: 1}}
    arithmetic: {json.dumps(FUSED)}
    cases:
      - {{name: c, cache: {{kind: linear, length: 300}}, sequences: [{{start: 100, rows: 20}}]}}
""")
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    result = CliRunner().invoke(cli, ["check", "--contract", str(path)])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "contract.yaml:6" in text and "row_m" in text and "cannot" in text, text
