"""The rmsnorm family's answer to `kcontract drift`: it covers a model's RMSNorm, but writes no entry for one
that computes in the model's own dtype, since its ABI takes bf16 rows and weights."""

from __future__ import annotations

from kcontract.family.torch_op import FromTorch, TorchOp


def from_torch_op(op: TorchOp) -> FromTorch | None:
    """Why no entry is written, or None for another family's op."""
    if op.name != "aten.rms_norm" and not op.module_type.endswith("RMSNorm"):
        return None
    return FromTorch(said=f"{op.name} in {op.module or 'the model'} belongs to the rmsnorm family, whose ABI takes "
                          "bf16 rows and weights; register torch's rms_norm at this hidden size as "
                          "examples/peers/torch_trio.py does")
