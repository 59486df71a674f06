"""The rmsnorm family's YAML fields: the form, the declared arithmetic and the cases."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kcontract.contract.model import Strict

MAX_HIDDEN = 1 << 16


class Arithmetic(Strict):
    """What the range allows for: the sum of squares in any fp32 order, the mean, rsqrt and two products."""

    mean: Literal["div", "rcp"] = "div"  # S / hidden (IEEE), or S times a rounded 1 / hidden
    rsqrt: Literal["rsqrtf", "sqrt_div"] = "rsqrtf"  # rsqrtf (2 ulps), or 1 / sqrtf (two IEEE roundings)
    accumulate: Literal["fp32"] = "fp32"  # the sum of squares' accumulator
    out: Literal["bf16"] = "bf16"


class Case(Strict):
    """Rows of one hidden size."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    hidden: int = Field(gt=0, le=MAX_HIDDEN)
    rows: int = Field(gt=0, le=4096)


class RMSNormSpec(Strict):
    """The entry's fields beside the generic ones."""

    form: Literal["plain", "residual"] = "plain"  # residual: h = RN32(x + r), written as bf16 to h_out
    eps: float = Field(default=1e-6, gt=0, le=1.0)
    arithmetic: Arithmetic = Arithmetic()
    cases: list[Case] = Field(min_length=1)
