"""The numpy double behind CuPy arrays: a stand-in for a user's own GPU kernel taken through DLPack."""

from __future__ import annotations

from .decode import window_decode as host_decode


def window_decode(q, k_cache, v_cache, row_pos, row_slot, part_m, part_l, part_o, out, *, win, ring, n_part, scale,
                  kv_heads):
    """Copies the device buffers to the host, runs the double, and writes its outputs back to the device."""
    import cupy

    host = {name: cupy.asnumpy(array) for name, array in dict(q=q, k_cache=k_cache, v_cache=v_cache, row_pos=row_pos,
                                                               row_slot=row_slot).items()}
    outputs = {name: cupy.asnumpy(array) for name, array in  # poisoned, as the launcher handed them over
               dict(part_m=part_m, part_l=part_l, part_o=part_o, out=out).items()}
    host_decode(**host, **outputs, win=win, ring=ring, n_part=n_part, scale=scale, kv_heads=kv_heads)
    for name, array in dict(part_m=part_m, part_l=part_l, part_o=part_o, out=out).items():
        array[...] = cupy.asarray(outputs[name])
