"""The host memory a gate's inputs and references take at their peak (tracemalloc: numpy's arrays included), to
hold against what the entry declares."""

from __future__ import annotations

import tracemalloc

from kcontract.gatetable import gate


def gate_peak(family, number: int, case: str) -> int:
    """Bytes allocated at the peak while one case's checks of a range gate are drawn and their references computed
    (numpy), above what was held before."""
    tracemalloc.start()
    try:
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        for checked in family.checks(gate(number).suite, case):
            checked.compute_reference()
            del checked
        return tracemalloc.get_traced_memory()[1] - held
    finally:
        tracemalloc.stop()
