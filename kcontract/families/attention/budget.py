"""The working budget a float64 reference cuts its work into: where references compute on a GPU, the bytes of
working arrays a replay or a score replay holds at once, whatever the rows, keys and chunks of the call."""

from __future__ import annotations

WORKING_BYTES = 2 << 30  # float64 working arrays at once: blocks of rows and pieces of chunks are cut to fit


def working_values() -> int:
    """float64 values the budget holds (WORKING_BYTES read at each call)."""
    return WORKING_BYTES // 8
