"""Exact floating-point format helpers: rounding, bit patterns, ulps and error-bound constants."""

from .bounds import U32, U_BF16, gamma
from .formats import FORMATS, Format, fmt
from .rounding import (
    bf16_from_f32_bits,
    from_bits,
    is_representable,
    poison_bits,
    rn_bits,
    round_to,
    to_bits,
    truncate_to,
)
from .ulp import next_down, next_up, ordered, ulp_distance, ulp_of

__all__ = [
    "FORMATS",
    "Format",
    "U32",
    "U_BF16",
    "bf16_from_f32_bits",
    "fmt",
    "from_bits",
    "gamma",
    "is_representable",
    "next_down",
    "next_up",
    "ordered",
    "poison_bits",
    "rn_bits",
    "round_to",
    "to_bits",
    "truncate_to",
    "ulp_distance",
    "ulp_of",
]
