"""Kernels that fail as processes: one kills its process, one never returns."""

from __future__ import annotations

import os
import time


def aborts(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part, scale):
    """Dies with SIGABRT, as a kernel hitting a device-side assert takes its process down."""
    os.abort()


def hangs(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part, scale):
    """Never returns, as a kernel stuck in a spin loop."""
    while True:
        time.sleep(0.05)
