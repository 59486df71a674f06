"""A replay cut into blocks of rows and pieces of chunks within its working budget: the same bits as whole, and
no more memory than the family declares."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from kcontract.families.attention import budget
from kcontract.families.attention.replay import Gathered, cut, replay_rows
from tests.helpers.replay_rows import sequence_rows

ORDERS = (("split_mma", "none", 1), ("split_chain", "bf16", 1), ("split_lanes", "none", 1),
          ("online_mma", "bf16", 1), ("online_mma", "none", 2), ("online_mma", "bf16", 3))
KERNEL = {"pv_key_groups": 2, "merge_runs": 3}  # split_lanes' counts, as a kernel exports them


@pytest.mark.parametrize("order,p_round,chains", ORDERS)
@pytest.mark.parametrize("scored", (False, True))
def test_blocks_and_pieces_change_no_bit(order, p_round, chains, scored):
    rng = np.random.default_rng(5)
    rows, scale = sequence_rows(rng, 4, 2, 32, [(10, 300), (64, 383), (70, 340), (1, 300), (130, 420)], scored)
    kw = dict(order=order, p_round=p_round, grouping="natural", chains=chains, kernel=KERNEL)
    whole = replay_rows(rows, scale, 64, 2, **kw)
    unit = budget.working_values()
    for values in (1, 30_000, 200_000):  # a row and a chunk at a time, then pieces of a few chunks
        assert cut(5, 5, 4, 2, 32, 64, order == "online_mma", values) != (5, 5)
        blocked = replay_rows(rows, scale, 64, 2, values=values, **kw)
        for a, b in zip(whole, blocked):
            assert a.keys() == b.keys()
            for name in a:
                assert all(np.array_equal(x, y) for x, y in zip(a[name], b[name])), (values, name)
    assert cut(5, 5, 4, 2, 32, 64, True, unit) == (5, 5)  # the default budget takes these rows whole


def test_a_hidden_partial_is_not_gathered():
    rows, scale = sequence_rows(np.random.default_rng(6), 4, 2, 32, [(0, 200), (10, 250)])
    found = replay_rows(rows, scale, 64, 2, order="online_mma", grouping="natural", partials=False)
    assert all(set(f) == {"out", "row_m"} for f in found)


@pytest.mark.parametrize("order,p_round,chains", (ORDERS[0], ORDERS[4]))
def test_the_declared_device_bytes_hold_a_measured_peak(monkeypatch, order, p_round, chains):
    """numpy's peak (tracemalloc) while a budget of 4 MiB cuts 24 rows of 8 chunks at D = 128 (16 query heads over
    one key head, as the head-dim-512 prompts): within what replay_device_bytes declares at that budget, and the
    budget used, not idle. The peak is read as the bounds go to the host (there, float64 copies in host memory)."""
    monkeypatch.setattr(budget, "WORKING_BYTES", 4 << 20)
    peaks, to_host = [], Gathered.rows

    def measured(self):
        peaks.append(tracemalloc.get_traced_memory()[1])
        return to_host(self)

    monkeypatch.setattr(Gathered, "rows", measured)
    rng = np.random.default_rng(7)
    spans = [(0, 480 + r) for r in range(24)]
    rows, scale = sequence_rows(rng, 16, 1, 128, spans, scored=True)
    keys = rows[0][1].base.nbytes + rows[0][2].base.nbytes  # one buffer each of k and v, copied as given
    tracemalloc.start()
    try:
        replay_rows(rows, scale, 64, 16, order=order, p_round=p_round, grouping="natural", chains=chains,
                    partials=order != "online_mma")
    finally:
        tracemalloc.stop()
    peak = peaks[0]
    declared = budget.replay_device_bytes(24, 16, 128, 504, 64, order != "online_mma", keys)
    assert peak <= declared, (peak, declared)
    assert peak >= budget.WORKING_BYTES // 4, (peak, budget.WORKING_BYTES)
