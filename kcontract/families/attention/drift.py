"""The attention families' answer to `kcontract drift`: SDPA is theirs, but a model's padded [B, H, T, D] call
maps to neither ABI (a paged cache of absolute positions), so no entry is written."""

from __future__ import annotations

from kcontract.family.torch_op import FromTorch, TorchOp


def from_torch_op(op: TorchOp) -> FromTorch | None:
    """Why no entry is written, or None for another family's op."""
    if "scaled_dot_product" not in op.name:
        return None
    return FromTorch(said=f"{op.name} belongs to attention, but its padded [B, H, T, D] layout maps to neither "
                          "attention ABI (a cache of absolute positions): write the entry by hand as "
                          "examples/peers/sdpa.py does, docs/families/attention.md")
