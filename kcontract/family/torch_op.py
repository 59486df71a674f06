"""A torch operator as `kcontract drift` captured it, and what a family makes of it: a contract entry with its
Python kernel module, or why it writes none. Families answer through `Family.from_torch_op`."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TorchOp:
    """The first op whose output for a request followed its batch."""

    name: str  # `aten.mm`
    module: str  # the module path it ran in ("" for the model's own code)
    module_type: str  # that module's class name
    operands: list[tuple[tuple[int, ...], str]]  # tensor inputs, alone: shape and dtype
    batched: list[list[tuple[tuple[int, ...], str]]]  # its tensor inputs in each batch where it differed
    device: str  # cpu or cuda
    target: str  # the model, `module:factory`
    seed: int


@dataclass
class FromTorch:
    """A family's entry for the op (its mapping without `kernel`, and the kernel module's source with the
    function to call and the one to swap in), or `said`: why the family, which covers the op, writes none."""

    entry: dict | None = None
    source: str = ""
    function: str = ""
    swap: str = ""
    said: str = ""
    notes: list[str] = field(default_factory=list)
