"""What `kcontract drift` says: the first differing op, every later one, whether the output moved, and the first
op per batch and slot; and the same as JSON."""

from __future__ import annotations

from kcontract.drift.compare import Difference
from kcontract.drift.run import Drift, OpDrift, Placement


def where(d: OpDrift) -> str:
    """`aten.mm in layers.0.attn.qkv` (the model itself where no submodule ran it), naming the output that differs
    where the op returns several: `aten.max output 1 (indices) in ...`."""
    return f"{d.alone.name}{' ' + d.label if d.label else ''} in {d.alone.module or 'the model'}"


def shapes(op) -> str:
    """`[1, 1024] float32, [1024, 3072] float32`."""
    return ", ".join(f"[{', '.join(map(str, shape))}] {dtype}" for shape, dtype in op.inputs)


def amount(d: Difference) -> str:
    """`2,795 of 3,072 elements differ (91.0 %), at most 3 ulps`."""
    ulps = f", at most {d.max_ulps:,} ulps" if d.max_ulps is not None else ""
    return f"{d.differing:,} of {d.elements:,} elements differ ({100 * d.fraction:.1f} %){ulps}"


def lines(drift: Drift) -> list[str]:
    """The report, a line per fact."""
    slots = ", ".join(dict.fromkeys(p.slot for p in drift.placements))
    batches = ", ".join(map(str, dict.fromkeys(p.batch for p in drift.placements)))
    cached = f" after {drift.context:,} cached" if drift.context else ""
    said = [f"drift {drift.target}: {drift.dtype} on {drift.device}, {drift.tokens} token"
            f"{'s' if drift.tokens != 1 else ''}{cached}, batches {batches} at slots {slots}, seed {drift.seed}: "
            f"{drift.ops} ops compared per run"]
    found = drift.first
    if found is None:
        return said + ["no op differs: the request's every op output has the same bits alone and in every batch"]
    placement, first = found
    said += [f"first differing op: #{first.index} {where(first)} (batch {placement.batch}, "
             f"{placement.slot} slot)",
             f"  inputs alone {shapes(first.alone)}; in the batch {shapes(first.batched)}",
             f"  its {first.label or 'output'}: {amount(first.worst)}",
             reaches(placement)]
    later = placement.drifts[1:]
    said.append(f"later differing ops: {len(later)}" + (":" if later else ""))
    said += [f"  #{d.index} {where(d)}: {amount(d.worst)}" for d in later]
    said.append("first differing op per batch and slot:")
    said += [f"  batch {p.batch:>4} {p.slot:<6}  " + (f"#{p.first.index} {where(p.first)}" if p.first else
                                                     "none") for p in drift.placements]
    return said


def reaches(placement: Placement) -> str:
    """Whether the difference reaches the model's output."""
    out = placement.output
    if out is None:
        return "reaches the output: unknown (the output has no part that is the request's)"
    if out.differing:
        return f"reaches the output: yes, {amount(out)}"
    return f"reaches the output: no, the output's {out.elements:,} elements keep their bits (rounded away)"


def as_json(drift: Drift) -> dict:
    """Every placement with every differing op."""
    def op(d: OpDrift) -> dict:
        place, name = d.alone.returns[d.output] if d.alone.returns else (0, "")
        return {"index": d.index, "op": d.alone.name, "output": place, "output_name": name,
                "module": d.alone.module, "inputs_alone": d.alone.inputs,
                "inputs_batched": d.batched.inputs, "elements": d.worst.elements, "differing": d.worst.differing,
                "max_ulps": d.worst.max_ulps}

    found = drift.first
    return {"target": drift.target, "dtype": drift.dtype, "device": drift.device, "tokens": drift.tokens, "context": drift.context,
            "seed": drift.seed, "ops": drift.ops,
            "first": None if found is None else {"batch": found[0].batch, "slot": found[0].slot, **op(found[1])},
            "placements": [{"batch": p.batch, "slot": p.slot, "position": p.position,
                            "differing_ops": [op(d) for d in p.drifts], "uncompared_outputs": p.uncompared,
                            "output": None if p.output is None else {"elements": p.output.elements,
                                                                     "differing": p.output.differing,
                                                                     "max_ulps": p.output.max_ulps}}
                           for p in drift.placements]}
