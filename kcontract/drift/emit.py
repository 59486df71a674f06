"""A contract entry for the first differing op: each installed family is asked whether the op is its own
(`Family.from_torch_op`); the one that answers gives the entry and its Python kernel module, written beside the
contract, or says why it writes none."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from kcontract.atomicfile import write_atomic
from kcontract.drift.run import Drift, OpDrift
from kcontract.family.registry import family_class, family_names
from kcontract.family.torch_op import FromTorch, TorchOp


@dataclass
class Emitted:
    """What was written, or why nothing was."""

    written: list[Path]
    said: str


def captured(drift: Drift, first: OpDrift) -> TorchOp:
    """The first differing op as families see it: its operands alone and in every batch where it differed."""
    batched = [d.batched.inputs for placement in drift.placements for d in placement.drifts if d.index == first.index]
    alone = first.alone
    return TorchOp(alone.name, alone.module, alone.module_type, alone.inputs, batched, drift.device, drift.target,
                   drift.seed)


def answer(op: TorchOp) -> tuple[str, FromTorch] | None:
    """The first installed family that covers the op, with its answer."""
    for name in family_names():
        found = family_class(name)
        made = found.from_torch_op(op) if found is not None else None
        if made is not None:
            return name, made
    return None


def emit(drift: Drift, path: Path) -> Emitted:
    """The entry for the drift's first differing op, written to `path` with its kernel module beside it."""
    found = drift.first
    if found is None:
        return Emitted([], "no contract written: no op differs")
    op = captured(drift, found[1])
    answered = answer(op)
    if answered is None:
        return Emitted([], f"no contract written: no installed family covers {op.name}; it would need a family "
                           f"whose ABI takes {op.name}'s operands ({', '.join(str(list(s)) for s, _ in op.operands)})")
    family, made = answered
    if made.entry is None:
        return Emitted([], f"no contract written: {made.said}")
    module = re.sub(r"\W", "_", path.stem) + "_kernels"
    name = re.sub(r"\W", "_", f"{op.module or 'model'}_{op.name.split('.')[-1]}")
    entry = {"name": name, **made.entry, "kernel": {"python": f"{module}:{made.function}", "device": op.device != "cpu"}}
    document = {"version": 1, "seed": drift.seed, "entries": [entry]}
    header = (f"# Written by `kcontract drift {drift.target}`: its first differing op, {op.name} in "
              f"{op.module or 'the model'}, as a {family} entry.\n"
              f"# Swap `{made.function}` for `{made.swap}` in {module}.py to run the same op a row at a time.\n")
    kernel_path = path.with_name(f"{module}.py")
    write_atomic(path, (header + yaml.safe_dump(document, sort_keys=False, width=200)).encode())
    write_atomic(kernel_path, made.source.encode())
    return Emitted([path, kernel_path], f"wrote {path} (entry {name}, family {family}) and {kernel_path}")
