"""Kernels that fail: one kills its process, one never returns, one raises, one writes floats, and bad references."""

from __future__ import annotations

import os
import time

import numpy as np


def aborts(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part, scale,
           kv_heads):
    """Dies with SIGABRT, as a kernel hitting a device-side assert takes its process down."""
    os.abort()


def hangs(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part, scale,
           kv_heads):
    """Never returns, as a kernel stuck in a spin loop."""
    while True:
        time.sleep(0.05)


def raises(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part, scale,
           kv_heads):
    """Raises with text that looks like rich markup, which must print as written."""
    raise ValueError("out[b] = 1 failed [/] here")


def writes_floats(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part,
                  scale, kv_heads):
    """Writes float32 values into the bf16 (uint16 bits) output instead of bit patterns."""
    out[...] = np.ones(out.shape, np.float32)


NOT_A_FUNCTION = 3  # a kernel reference naming this is refused at load time


def wrong_signature(q, k, v):
    """Takes positional buffers the ABI does not pass."""
