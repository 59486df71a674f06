"""The working budget a float64 reference cuts its work into: where references compute on a GPU, the bytes of
working arrays a replay or a score replay holds at once, whatever the rows, keys and chunks of the call."""

from __future__ import annotations

WORKING_BYTES = 2 << 30  # float64 working arrays at once: blocks of rows and pieces of chunks are cut to fit
HOST_WORKING_BYTES = 8 << 20  # on numpy, at most this: blocks that stay in cache, their temporaries reused


def working_values(on_host: bool = False) -> int:
    """float64 values the budget holds (read at each call); `on_host`: numpy's, smaller."""
    return (min(WORKING_BYTES, HOST_WORKING_BYTES) if on_host else WORKING_BYTES) // 8


def replay_device_bytes(rows: int, q_heads: int, head_dim: int, keys: int, chunk: int, partials: bool,
                        key_bytes: int) -> int:
    """Device bytes a replay of `rows` rows of up to `keys` keys holds at most: the working budget, every row's
    bounds gathered in fp32 (out's ends and row_m; with `partials`, m, l's ends and o's ends of every chunk), and
    `key_bytes` of keys copied as given."""
    per_row = q_heads * (2 * head_dim + 1)
    if partials:
        per_row += q_heads * (keys // chunk + 2) * (2 * head_dim + 3)
    return WORKING_BYTES + rows * per_row * 4 + key_bytes
