"""The attention prompt family: its YAML refuses impossible chunks by name, rows see the right keys, splits keep
image spans whole, and the layout gives every row its last key."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.families.attention import prompt_rows
from kcontract.families.attention.layout import NEVER_WRITTEN
from kcontract.families.attention.prompt import AttentionPrompt
from kcontract.families.attention.prompt_spec import PromptSpec, Sequence
from kcontract.families.attention.prompt_variants import split_points
from kcontract.families.attention.window import Window
from kcontract.gatetable import Suite

CONTRACT = """\
version: 1
seed: 7
entries:
  - name: p
    family: attention.prompt
    kernel: {python: "tests.doubles.prompt:window_prompt"}
    shape: {head_dim: 128, q_heads: 4, kv_heads: 2}
ARITHMETIC    cases:
      - name: c
        cache: CACHE
        sequences:
          - SEQUENCE
"""


def run_check(tmp_path, cache: str, sequence: str, arithmetic: str = ""):
    path = tmp_path / "contract.yaml"
    line = f"    arithmetic: {arithmetic}\n" if arithmetic else ""
    path.write_text(CONTRACT.replace("CACHE", cache).replace("SEQUENCE", sequence).replace("ARITHMETIC", line))
    return CliRunner().invoke(cli, ["check", "--contract", str(path)])


def test_a_contract_contradicting_its_pv_is_refused_with_its_line(tmp_path):
    done = run_check(tmp_path, "{kind: linear, length: 1000}", "{start: 900, rows: 50}",
                     "{score: mma_bf16, score_order: replay, sum_order: split_mma, pv: fp32}")
    assert done.exit_code == 2, done.output
    assert "contract.yaml:8" in done.output and "it needs pv: mma_bf16" in done.output
    assert "Traceback" not in done.output


@pytest.mark.parametrize("cache, sequence, words", [
    ("{kind: linear, length: 1000}", "{start: 900, rows: 50, images: [[940, 960]]}",
     "image span [940, 960] ends after the chunk's last row 949"),
    ("{kind: linear, length: 1000}", "{start: 10, rows: 50, images: [[20, 30], [25, 40]]}",
     "[25, 40] starts at or before the end of the span before it (30)"),
    ("{kind: linear, length: 1000}", "{start: 10, rows: 50, images: [[22, 21]]}", "image span [22, 21] ends before it starts"),
    ("{kind: linear, length: 1000}", "{start: 990, rows: 20}", "rows up to 1009 do not fit a linear cache of 1000"),
    ("{kind: ring, window: 512, ring: 600}", "{start: 2000, rows: 200}", "use a ring of at least 711"),
])
def test_impossible_chunks_are_refused_by_name(tmp_path, cache, sequence, words):
    result = run_check(tmp_path, cache, sequence)
    assert result.exit_code == 2, result.output
    assert "contract.yaml:" in result.output and words in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_a_row_sees_its_window_and_its_image_span():
    seq = Sequence(start=100, rows=50, images=[(90, 110), (130, 140)])
    assert [seq.last_visible(p) for p in (100, 110, 111, 129, 130, 135, 140, 141)] == \
           [110, 110, 111, 129, 140, 140, 140, 141]


def test_splits_never_cut_an_image_span():
    seq = Sequence(start=100, rows=50, images=[(90, 110), (130, 140)])
    cuts = split_points(seq)
    assert cuts and all(not (a < seq.start + k <= b) for k in cuts for a, b in seq.images)
    assert 11 in cuts and 30 in cuts and 41 in cuts  # right after a span, at a span's start, after the second


def family(cache: dict, sequences: list[dict]) -> AttentionPrompt:
    spec = PromptSpec.model_validate({"shape": {"head_dim": 32, "q_heads": 4, "kv_heads": 2},
                                      "cases": [{"name": "c", "cache": cache, "sequences": sequences}]})
    return AttentionPrompt("p", spec, 3)


def test_the_call_gives_each_row_its_last_key_and_the_cache_what_is_written():
    f = family({"kind": "ring", "window": 64, "ring": 100}, [{"start": 300, "rows": 20, "images": [(310, 315)]},
                                                             {"start": 5, "rows": 8, "images": [(0, 6)]}])
    (checked,) = f.checks(Suite.REALISTIC, "c")
    p = checked.problem
    assert p.inputs["row_last"].tolist() == [300 + i if not 10 <= i <= 15 else 315 for i in range(20)] + \
           [6, 6, 7, 8, 9, 10, 11, 12]
    assert p.inputs["seq_row0"].tolist() == [0, 20, 28] and p.inputs["seq_pos0"].tolist() == [300, 5]
    k = p.inputs["k_cache"].materialise()
    seqs = f._seqs("c")
    window = Window(64, 100)
    for i, s in enumerate(seqs):  # every key a row of the chunk sees sits at its ring row
        for pos in range(s.key0, s.seq.end + 1):
            assert np.array_equal(k[i, pos % 100], s.k[pos - s.key0])
    rows = seqs[0].rows(window)
    assert rows[10].first == 310 - 63 and rows[10].pos == 315 and len(rows[10].k) == 315 - 247 + 1


def test_a_resumed_chunk_has_no_keys_past_its_end():
    f = family({"kind": "linear", "length": 400}, [{"start": 300, "rows": 40}])
    seq = f._seqs("c")[0]
    tail = seq.part(25, 15)
    head = seq.part(0, 25)
    assert tail.seq.start == 325 and tail.q.shape[0] == 15 and len(tail.k) == 340
    assert head.seq.end == 324 and len(head.k) == 325
    problem = f._build("head", [head], Window(0, 400))
    k = problem.inputs["k_cache"].materialise()
    assert (k[0, 325:] == NEVER_WRITTEN).all() and not (k[0, :325] == NEVER_WRITTEN).any()


def test_cases_carry_their_image_trait_for_kernel_instances():
    f = family({"kind": "ring", "window": 64, "ring": 100}, [{"start": 300, "rows": 20, "images": [(310, 315)]}])
    assert f.case_traits("c") == {"window": "ring", "images": "spans"}
    g = family({"kind": "linear", "length": 400}, [{"start": 300, "rows": 20}])
    assert g.case_traits("c") == {"window": "none", "images": "none"}



PROMPT_512 = """\
version: 1
seed: 7
targets: [sm_90]
include: [{root}/kernels]
kernels:
  window_prompt:
    cuda:
      source: {root}/kernels/window_prompt.cu
      symbols: {{partials: "window_prompt_partials<{{head_dim}}, {{group}}, {{p_bf16}}>", merge: "window_prompt_merge<{{head_dim}}, {{group}}>"}}
      launch: {{partials: {{threads: 256, dynamic_smem: "128 * {{head_dim}} + 17664"}}}}
      instances:
        - {{head_dim: [128, 256], group: [1, 2, 4, 16], chunk: [256], p_bf16: [0, 1]}}
        - {{head_dim: [512], group: [1, 2, 4, 16], chunk: [256], p_bf16: [0, 1], window: [none], images: [none]}}
entries:
  - name: p512
    family: attention.prompt
    kernel: window_prompt
    shape: {{head_dim: 512, q_heads: 16, kv_heads: 1}}
    cases:
      - name: c
        cache: {cache}
        sequences: [{sequence}]
"""


FUSED_512 = """\
version: 1
seed: 7
targets: [sm_90a]
include: [{root}/kernels]
kernels:
  window_prompt_fused:
    cuda:
      source: {root}/kernels/window_prompt_fused.cu
      symbols: {{attend: "window_prompt_attend<{{head_dim}}, {{group}}, {{p_bf16}}>"}}
      launch: {{attend: {{threads: 256, dynamic_smem: 224256}}}}
      instances:
        - {{head_dim: [128, 256], group: [1, 2, 4, 16], chunk: [64], p_bf16: [0, 1]}}
        - {{head_dim: [512], group: [1, 2, 4, 16], chunk: [64], p_bf16: [0, 1], window: [none], images: [none]}}
entries:
  - name: p512
    family: attention.prompt
    kernel: window_prompt_fused
    abi: fused
    shape: {{head_dim: 512, q_heads: 16, kv_heads: 1}}
    arithmetic: {{chunk: 64, score: mma_bf16, score_order: replay_natural, sum_order: online_mma, pv: mma_bf16, exp: expf, prob_round: none, div: ieee, out: bf16, partials: hidden}}
    cases:
      - name: c
        cache: {cache}
        sequences: [{sequence}]
"""


@pytest.mark.parametrize("template", [PROMPT_512, FUSED_512], ids=["split", "fused"])
@pytest.mark.parametrize("cache, sequence, trait", [
    ("{kind: linear, length: 1000}", "{start: 900, rows: 50, images: [[920, 930]]}", "images spans"),
    ("{kind: ring, window: 512, ring: 700}", "{start: 900, rows: 50}", "window ring"),
])
def test_head_dim_512_refuses_image_spans_and_a_window_by_name(tmp_path, template, cache, sequence, trait):
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    path = tmp_path / "contract.yaml"
    path.write_text(template.format(root=root, cache=cache, sequence=sequence))
    result = CliRunner().invoke(cli, ["check", "--contract", str(path)])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert trait in text and "is not an instance of" in text and "refused, not run untested" in text


def test_one_shared_replay_gives_every_row_the_bounds_of_its_own(monkeypatch):
    import kcontract.families.attention.shared_scores as shared
    from kcontract.families.attention import budget
    from kcontract.families.attention.prompt import with_shared_scores
    from kcontract.families.attention.reference import call_reference

    monkeypatch.setattr(budget, "WORKING_BYTES", 4000 * shared.SHARE * 8)  # blocks of 4000 scores: several
    spec = PromptSpec.model_validate({
        "shape": {"head_dim": 64, "q_heads": 4, "kv_heads": 2},
        "arithmetic": {"score": "mma_bf16", "score_order": "replay"},
        "cases": [{"name": "c", "cache": {"kind": "ring", "window": 300, "ring": 400},
                   "sequences": [{"start": 700, "rows": 20, "images": [(705, 709)]}]}]})
    f = AttentionPrompt("p", spec, 5)
    seq, window = f._seqs("c")[0], Window(300, 400)
    a = spec.arithmetic
    alone = call_reference(seq.rows(window), a, f.scale, 3)
    shared_rows = with_shared_scores(seq, window, f.scale)
    assert all(r.extra["scores"].shape == (4, len(r.k)) for r in shared_rows)
    together = call_reference(shared_rows, a, f.scale, 3)
    for x, y in zip(alone.expected, together.expected):
        assert x.output == y.output and np.array_equal(x.lo, y.lo) and np.array_equal(x.hi, y.hi), x.output


def test_a_benchmarked_prompt_chunk_counts_only_visible_keys():
    from kcontract.families.attention.prompt_bench import prompt_call
    from kcontract.families.attention.spec import Shape

    call = prompt_call(Shape(head_dim=512, q_heads=16, kv_heads=1), keys=1024, chunk=256, scale=0.04, p_bf16=False)
    twin = prompt_call(Shape(head_dim=512, q_heads=16, kv_heads=1), keys=1024, chunk=256, scale=0.04, p_bf16=True)
    assert call.label == "prompt d512 16/1 P32" and twin.label == "prompt d512 16/1 bf16 P"  # both get timed
    rows = np.arange(512, 1024)  # the chunk's own positions; row p sees keys 0 .. p
    assert call.size == {"rows": 512, "keys": 1024} and call.bound == "compute"
    assert call.flops == 4 * 16 * 512 * int((rows + 1).sum())
    assert call.fixed_inputs["row_last"].tolist() == rows.tolist()
    assert call.fixed_inputs["seq_pos0"].tolist() == [512] and call.fixed_inputs["seq_row0"].tolist() == [0, 512]
    assert [launch.grid for launch in call.launches] == [(32, 1, 4), (16, 512, 1)]  # bands fastest
    assert call.peer.keywords["sdpa"]["queries"] == 512 and call.peer.keywords["sdpa"]["causal"] == "lower_right"
    # issued tensor work: band b (rows 512 + 16 b ..) runs chunks 0 .. its last row // 256, 16 heads, scores plus
    # one PV per part of p (P32: three)
    chunks = sum((512 + 16 * b + 15) // 256 + 1 for b in range(32))
    assert call.mma_flops == chunks * 16 * (2 * 16 * 256 * 512) * (1 + 3)
    assert twin.mma_flops == chunks * 16 * (2 * 16 * 256 * 512) * (1 + 1)


def test_a_prompt_bench_row_says_how_far_it_is_from_the_mma_ceiling():
    import dataclasses

    from kcontract.bench.run import _line, timing_row
    from kcontract.families.attention.prompt_bench import prompt_call
    from kcontract.families.attention.spec import Shape

    call = prompt_call(Shape(head_dim=256, q_heads=16, kv_heads=8), keys=8192, chunk=256, scale=0.06, p_bf16=True)
    row = timing_row("e", call, us=1000.0, graph_us=990.0, ceiling={"read_gbps": 4000.0, "mma_tflops": 600.0},
                     peer_us=None, peer_note="no kernel")
    useful, issued = call.flops / 1e9, call.mma_flops / 1e9  # TFLOP/s at 1000 us
    assert row["tflops"] == round(useful, 1) and row["issued_tflops"] == round(issued, 1)
    assert row["mma_ratio"] == round(useful / 600, 3) and row["issued_ratio"] == round(issued / 600, 3)
    line = _line(row)
    assert f"TFLOP/s useful = {100 * useful / 600:.0f} % of the mma ceiling ({round(issued, 1)} TFLOP/s issued" in line
    decode = timing_row("d", dataclasses.replace(call, mma_flops=0), 1000.0, 990.0,
                        {"read_gbps": 4000.0, "mma_tflops": 600.0}, None, "no kernel")
    assert "mma_ratio" not in decode  # a call that counts no tensor work is judged by its bytes only


def test_the_receipt_shows_prompt_speed_in_tflops():
    from kcontract.receipts.receipt import Receipt
    from kcontract.report.receipt import receipt_markdown

    row = {"call": "prompt d512 16/1", "size": {"rows": 512, "keys": 8192}, "us": 1000.0, "graph_us": 990.0,
           "gbps": 100.0, "ratio": 0.02, "tflops": 130.5, "peer_us": 2000.0, "peer": "efficient", "peer_tflops": 65.2}
    text = receipt_markdown(Receipt({"bench": [row], "bench_ceiling": {"read_gbps": 4500, "copy_gbps": 4200}}))
    assert ("| prompt d512 16/1 | rows 512, keys 8192 | 1000.0 | 990.0 | 100.0 | 2 % | 130.5 | efficient | 2000.0 | "
            "65.2 |") in text
    row |= {"mma_tflops": 600.0, "issued_tflops": 261.0, "mma_ratio": 0.2175, "issued_ratio": 0.435}
    ceiling = {"read_gbps": 4500, "copy_gbps": 4200, "mma_tflops": 600}
    text = receipt_markdown(Receipt({"bench": [row], "bench_ceiling": ceiling}))
    assert "bf16 mma.sync ceiling 600 TFLOP/s" in text
    assert "| 100.0 | 22 % mma, 44 % issued | 130.5 |" in text


def test_a_sliding_chunk_with_image_spans_is_also_run_started_earlier():
    from kcontract.families.attention.prompt_variants import PromptPlan, plan_prompt_variants

    f = family({"kind": "ring", "window": 64, "ring": 140}, [{"start": 300, "rows": 20, "images": [(310, 315)]}])
    seq = f._seqs("c")[0]
    window = Window(64, 140)
    assert seq.key0 == 300 - 37 - 63  # keys reach back to the window of a row 37 rows sooner
    built = []
    plan = PromptPlan([seq], seq, window, lambda label, seqs, **kw: built.append((label, seqs)) or
                      f._build(label, seqs, kw.get("window", window), **{k: v for k, v in kw.items() if k != "window"}))
    variants = {v.label: v for v in plan_prompt_variants(plan, f._build("base", [seq], window))}
    earlier = variants["seq0_earlier37"]
    assert earlier.row_map == {b: 37 + b for b in range(20)}
    assert earlier.problem.inputs["seq_pos0"].tolist() == [263]
    assert earlier.problem.inputs["row_last"][37 + 10:37 + 16].tolist() == [315] * 6  # the span, 37 rows later


FUSED_ORDER = {"chunk": 64, "score": "mma_bf16", "score_order": "replay_natural", "sum_order": "online_mma",
               "pv": "mma_bf16", "partials": "hidden"}


@pytest.mark.parametrize("fields, drawn", [({}, 2), ({"abi": "fused", "arithmetic": FUSED_ORDER}, 4)])
def test_merge_stress_straddles_a_chunk_edge_inside_every_tile_of_rows(monkeypatch, fields, drawn):
    import kcontract.families.attention.prompt as prompt

    seen = []
    monkeypatch.setattr(prompt, "same_query_sequence",
                        lambda seq, row: seen.append((seq, row)) or prompt_rows.same_query_sequence(seq, row))
    spec = PromptSpec.model_validate({"shape": {"head_dim": 32, "q_heads": 4, "kv_heads": 2}, **fields,
                                      "stress": {"chunks": 10, "gap_nats": 30.0},
                                      "cases": [{"name": "c", "cache": {"kind": "linear", "length": 1000},
                                                 "sequences": [{"start": 900, "rows": 50}]}]})
    AttentionPrompt("p", spec, 3).merge_stress()
    chunk = spec.arithmetic.chunk
    assert len(seen) == drawn
    across = [seq for seq, _ in seen[1::2]]  # the second of each pair: base, then rising maxima where online
    for seq in across:
        edge = seq.start + prompt.STRADDLE
        assert edge % chunk == 0 and seq.start < edge <= seq.start + seq.rows - 1
        assert edge // chunk % 3 == 0  # the chunk whose peak sits on its first key, which the edge row sees
        assert all((edge - seq.start) % tile for tile in (2, 4, 8, 16, 32, 64))  # no tile of rows ends at the edge
    if drawn == 4:
        assert seen[3][1] is seen[2][1] and seen[1][1] is seen[0][1]  # both ends with the base row, both rising
