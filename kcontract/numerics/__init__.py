"""Exact floating-point numerics: formats, rounding, bit patterns, ulps, fp32 and tensor-core emulation, bounds."""

from .bounds import U32, U_BF16, gamma, path_roundings
from .exact import abs_sum_exact, exact_sum_limit, sums_exact
from .formats import FORMATS, Format, fmt
from .fp32 import (
    FTZ,
    add32,
    div_interval32,
    exp_interval32,
    fma32,
    fp32_at_least,
    fp32_at_most,
    rn32,
    ulp_steps,
)
from .functions import DIV_ROUNDINGS, EXP_MARGIN_ULPS, EXP_SLOPE, EXP_ULPS, exp_log_error
from .mma_bounds import bf16_parts, chained_dot_error, kstep_interval, kstep_sum_error, touched_steps
from .ranges import exact_quotient_bounds, expected_bounds
from .rounding import (
    bf16_bits_of_finite,
    bf16_from_f32_bits,
    from_bits,
    is_representable,
    poison_bits,
    rn_bits,
    round_to,
    to_bits,
    truncate_to,
)
from .tensorcore import kstep, kstep_dots
from .ulp import next_down, next_up, ordered, ulp_distance, ulp_of

__all__ = [
    "DIV_ROUNDINGS",
    "EXP_MARGIN_ULPS",
    "EXP_SLOPE",
    "EXP_ULPS",
    "FORMATS",
    "FTZ",
    "Format",
    "U32",
    "U_BF16",
    "abs_sum_exact",
    "add32",
    "bf16_bits_of_finite",
    "bf16_from_f32_bits",
    "bf16_parts",
    "chained_dot_error",
    "div_interval32",
    "exact_quotient_bounds",
    "exact_sum_limit",
    "exp_interval32",
    "exp_log_error",
    "expected_bounds",
    "fma32",
    "fmt",
    "fp32_at_least",
    "fp32_at_most",
    "from_bits",
    "gamma",
    "is_representable",
    "kstep",
    "kstep_dots",
    "kstep_interval",
    "kstep_sum_error",
    "next_down",
    "next_up",
    "ordered",
    "path_roundings",
    "poison_bits",
    "rn32",
    "rn_bits",
    "round_to",
    "sums_exact",
    "to_bits",
    "touched_steps",
    "truncate_to",
    "ulp_distance",
    "ulp_of",
    "ulp_steps",
]
