"""Every aten operator's outputs during one forward, with the module it ran in (views and factories left out)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SKIPPED = {"_unsafe_view", "detach", "lift_fresh", "empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like",
           "full", "randn", "rand", "arange"}  # aliases and fresh tensors: nothing computed from the request
GENERATOR_STATE = {"rng_state", "philox_seed", "philox_offset", "unused", "debug_attn_mask"}  # outputs by schema name
# that hold the random generator's state or a placeholder (a dropout seed and offset some fused ops return), not
# values computed from the request: they differ between calls by design


@dataclass
class Op:
    """One operator call: its name, module path, input shapes and dtypes, its tensor outputs (or the parts of them
    a recording keeps; None for one it needs not) and which of the op's returns each is."""

    index: int
    name: str
    module: str
    module_type: str  # the class of the module it ran in ("" for the model's own code)
    inputs: list[tuple[tuple[int, ...], str]]
    outputs: list[torch.Tensor | None] = field(default_factory=list)
    returns: list[tuple[int, str]] = field(default_factory=list)  # per output, where the op returns several
    # values: its place among them and the schema's name for it ("" where it has none)

    def output_label(self, output: int) -> str:
        """`output 1 (logsumexp)` for an output of an op of several returns, "" for an op of one."""
        if not self.returns:
            return ""
        place, name = self.returns[output]
        return f"output {place}" + (f" ({name})" if name else "")


Keep = Callable[[tuple[str, str], list[torch.Tensor]], list[torch.Tensor | None]]  # (name, module), outputs ->
# the part of each output to keep


class Recorder(TorchDispatchMode):
    """Keeps a copy of each computing op's outputs, or of the part `keep` picks (a later in-place op cannot change
    them), in call order."""

    def __init__(self, keep: Keep | None = None):
        super().__init__()
        self.ops, self.path, self.types = [], [""], [""]
        self.keep = keep or (lambda key, tensors: tensors)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in SKIPPED or any(r.alias_info is not None for r in func._schema.returns):
            return result
        outputs = computed(func, result)
        inputs = [(tuple(a.shape), str(a.dtype).removeprefix("torch.")) for a in args if isinstance(a, torch.Tensor)]
        op = Op(len(self.ops), f"{func.namespace}.{name}", self.path[-1], self.types[-1], inputs)
        kept = self.keep((op.name, op.module), [t for _, _, t in outputs])
        op.outputs = [t.detach().clone() if t is not None else None for t in kept]
        op.returns = [(place, name) for place, name, _ in outputs] if returned(result) > 1 else []
        self.ops.append(op)
        return result


def returned(result) -> int:
    """How many values an op returned."""
    return len(result) if isinstance(result, (tuple, list)) else 1


def computed(func, result) -> list[tuple[int, str, torch.Tensor]]:
    """The op's tensor outputs computed from its inputs, each with its place among the op's returns and the
    schema's name for it: those its schema names as generator state left out."""
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    names = [r.name for r in func._schema.returns]
    if len(names) != len(results):  # one return that is a list of tensors
        names = [""] * len(results)
    return [(place, name, t) for place, (t, name) in enumerate(zip(results, names))
            if isinstance(t, torch.Tensor) and name not in GENERATOR_STATE]


def hooks(model, recorder: Recorder) -> list:
    """Forward hooks that keep the recorder's module path (nothing where the model is no torch Module)."""
    if not isinstance(model, torch.nn.Module):
        return []
    def enter(name: str, module) -> None:
        recorder.path.append(name)
        recorder.types.append(type(module).__name__)

    def leave(module, args, output) -> None:
        recorder.path.pop()
        recorder.types.pop()

    handles = []
    for name, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(lambda m, a, n=name: enter(n, m)))
        handles.append(module.register_forward_hook(leave))
    return handles


def record(model, batch, keep: Keep | None = None) -> tuple[list[Op], torch.Tensor]:
    """The ops of one forward of `batch` (each output's part that `keep` picks; all of it without) and its
    output."""
    recorder = Recorder(keep)
    handles = hooks(model, recorder)
    try:
        with torch.no_grad(), recorder:
            output = model(batch)
    finally:
        for handle in handles:
            handle.remove()
    return recorder.ops, output
