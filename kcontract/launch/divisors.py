"""The divisibility a compiled kernel assumed of its arguments, checked against a launch's actual arguments: a
Triton kernel compiled with `tt.divisibility` reads misaligned or past its data where an argument breaks it."""

from __future__ import annotations


def seen_value(value) -> tuple[int, str] | None:
    """An argument as its kernel sees it, and as a message shows it: a device buffer's address (in hex), an
    integer's value; None for a float."""
    data = getattr(value, "data", None)
    if hasattr(data, "ptr"):
        return int(data.ptr), f"{int(data.ptr):#x}"
    if isinstance(value, float) or getattr(getattr(value, "dtype", None), "kind", "") == "f":
        return None
    return int(value), str(int(value))


def broken_divisors(args: tuple, divisors: dict[int, tuple[str, int]]) -> list[str]:
    """Each argument a declared divisor does not divide, as `NAME = VALUE, not a multiple of DIVISOR`."""
    found = []
    for position, (name, divisor) in sorted(divisors.items()):
        seen = seen_value(args[position]) if position < len(args) else None
        if seen is not None and seen[0] % divisor:
            found.append(f"{name} = {seen[1]}, not a multiple of {divisor}")
    return found
