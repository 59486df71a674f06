"""The divisibility a compiled kernel assumed of its arguments, checked against a launch's actual arguments: a
Triton kernel compiled with `tt.divisibility` reads misaligned or past its data where an argument breaks it."""

from __future__ import annotations


def seen_value(value) -> int | None:
    """An argument as its kernel sees it: a device buffer's address, an integer's value; None for a float."""
    data = getattr(value, "data", None)
    if hasattr(data, "ptr"):
        return int(data.ptr)
    if isinstance(value, float) or getattr(getattr(value, "dtype", None), "kind", "") == "f":
        return None
    return int(value)


def broken_divisors(args: tuple, divisors: dict[int, tuple[str, int]]) -> list[str]:
    """Each argument a declared divisor does not divide, as `NAME = VALUE, not a multiple of DIVISOR` (an address
    in hex)."""
    found = []
    for position, (name, divisor) in sorted(divisors.items()):
        value = seen_value(args[position]) if position < len(args) else None
        if value is not None and value % divisor:
            shown = f"{value:#x}" if hasattr(getattr(args[position], "data", None), "ptr") else str(value)
            found.append(f"{name} = {shown}, not a multiple of {divisor}")
    return found
