"""`kcontract drift TARGET`: the first torch operator whose output for one request depends on its batch."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kcontract.commands.common import Count, err, out, require_writable, user_errors
from kcontract.errors import EnvironmentProblem, UsageError
from kcontract.usercode import UserCodeExit, user_code

SLOTS = ("first", "middle", "last")
DTYPES = ("float32", "bfloat16", "float16")


def _batches(text: str) -> list[int]:
    """`2,8,64` as batch sizes from 2 to 4,096."""
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or any(not 2 <= s <= 4096 for s in sizes):
        raise UsageError(f"--batch {text}: batch sizes from 2 to 4,096, comma-separated, such as 2,8,64")
    return sorted(set(sizes))


def _slots(text: str) -> list[str]:
    """`first,middle,last` or any of them."""
    slots = [s.strip() for s in text.split(",")]
    if not slots or any(s not in SLOTS for s in slots):
        raise UsageError(f"--slot {text}: first, middle or last, comma-separated")
    return slots


@click.command("drift", short_help="The first torch op that breaks batch invariance.")
@click.argument("target")
@click.option("--batch", "batch_text", default="2,8,64", show_default=True, help="Batch sizes the request joins.")
@click.option("--slot", "slot_text", default="first,middle,last", show_default=True, help="Where in each batch.")
@click.option("--tokens", type=Count(1, 65536, "a token count"), default=1, show_default=True,
              help="Tokens per request (1: one step of generation).")
@click.option("--context", type=Count(0, 1 << 20, "a token count"), default=0, show_default=True,
              help="Cached positions before each request's tokens, given to the factory as `context`.")
@click.option("--dtype", type=click.Choice(DTYPES), help="The model's dtype (default: the factory's).")
@click.option("--device", help="cpu or cuda (default: the factory's).")
@click.option("--seed", type=Count(0, 2**31 - 1, "a seed"), default=0, show_default=True, help="Weights and requests.")
@click.option("--json", "json_path", help="Write every placement's differing ops as JSON.")
@click.option("--emit-contract", "contract_path", help="Write the first differing op as a contract entry here.")
@user_errors
def drift_command(target, batch_text, slot_text, tokens, context, dtype, device, seed, json_path,
                  contract_path) -> None:
    """Run TARGET (`module:factory`, returning (model, requests)) on one request alone and inside batches at
    several slots, record every aten op's output for the request, and report the first op whose bits differ.
    Exit 0: no op differs; 1: one does."""
    batches, slots = _batches(batch_text), _slots(slot_text)
    require_writable(json=json_path, emit_contract=contract_path)
    drift = _measure(target, (tokens, context), batches, slots, dtype, device, seed)
    from kcontract.drift.report import as_json, lines

    for line in lines(drift):
        out.print(line, markup=False)
    if json_path:
        Path(json_path).write_text(json.dumps(as_json(drift), indent=1) + "\n")
    if contract_path:
        from kcontract.drift.emit import emit

        err.print(emit(drift, Path(contract_path)).said, markup=False)
    sys.exit(1 if drift.first else 0)


def _measure(target, shape, batches, slots, dtype, device, seed):
    """The drift of TARGET; torch's absence, a failing factory or model, one line each."""
    try:
        import torch
    except ImportError:
        raise EnvironmentProblem("drift needs torch: pip install 'kcontract[torch]' (or torch itself)") from None
    from kcontract.drift.run import measure
    from kcontract.drift.target import build

    tokens, context = shape
    made = build(target, getattr(torch, dtype) if dtype else None, device, seed, context)
    try:
        with user_code(f"{target}: the model"):
            return measure(made, tokens, batches, slots, seed, context)
    except UserCodeExit as error:
        raise UsageError(str(error)) from None
    except UsageError:
        raise
    except Exception as error:  # the user's model: say where and what, no traceback
        raise UsageError(f"{target}: the model failed on a batch of requests: {type(error).__name__}: "
                         f"{str(error).splitlines()[0] if str(error) else ''}") from None
