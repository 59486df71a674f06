"""Benchmark calls of the rmsnorm family, and torch's rms_norm on the same call as the peer."""

from __future__ import annotations

import numpy as np

from kcontract.problem import BenchCall, KernelLaunch, OutputSpec

X_RMS, W_RMS = 1.0, 1.0  # realistic magnitudes: never time on zeros


def rmsnorm_call(rows: int, hidden: int, eps: float, residual: bool, abi: tuple[str, ...]) -> BenchCall:
    """`rows` rows of `hidden`: x (and r) read once, w once, out (and h_out) written once."""
    inputs = {"x": ((rows, hidden), X_RMS), "w": ((hidden,), W_RMS)}
    outputs = {"out": OutputSpec((rows, hidden), "bf16")}
    if residual:
        inputs["residual"] = ((rows, hidden), X_RMS)
        outputs["h_out"] = OutputSpec((rows, hidden), "bf16")
    moved = 2 * (rows * hidden * (len(outputs) + len(inputs) - 1) + hidden)
    return BenchCall(label=f"h{hidden}{' residual' if residual else ''}", size={"rows": rows, "hidden": hidden},
                     random_inputs=inputs, fixed_inputs={}, outputs=outputs,
                     scalars={"hidden": np.int32(hidden), "eps": np.float32(eps)},
                     launches=(KernelLaunch("rmsnorm", (rows, 1, 1), abi),), bytes=moved,
                     peer=lambda timer, repeat: torch_rms_norm(timer, repeat, rows, hidden, eps, residual))


def torch_rms_norm(timer, repeat: int, rows: int, hidden: int, eps: float, residual: bool):
    """Median microseconds of torch.nn.functional.rms_norm (after x + r where fused) on the same call."""
    try:
        import torch
    except ImportError:
        return None, "no torch"
    x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
    r = torch.randn_like(x) if residual else None
    w = torch.randn(hidden, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.ExternalStream(timer.stream.ptr)

    def launch(_stream) -> None:
        with torch.cuda.stream(stream):
            h = x + r if residual else x
            torch.nn.functional.rms_norm(h, (hidden,), w, eps)
    try:
        return timer.events(launch, repeat), "torch rms_norm" + (" after x + r" if residual else "")
    finally:
        del x, r, w
        torch.cuda.empty_cache()
