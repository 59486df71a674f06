"""Launch shapes from a family: threads per block and dynamic shared memory per kernel symbol role."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kcontract.errors import UsageError


def smem_on(dynamic_smem: int | dict[str, int], sm: str) -> int:
    """Dynamic shared memory on `sm`: the one value, or that SM's (sm_90a reads sm_90's) of a per-SM launch."""
    if isinstance(dynamic_smem, int):
        return dynamic_smem
    for name in (sm, sm.rstrip("af")):
        if name in dynamic_smem:
            return dynamic_smem[name]
    raise UsageError(f"the launch gives dynamic shared memory per SM ({', '.join(dynamic_smem)}) and none for {sm}: "
                     f"add {sm} to the contract's `targets`")


@dataclass(frozen=True)
class LaunchShape:
    """How a symbol is launched: threads per block and dynamic shared memory in bytes (one value, or per SM)."""

    threads: int
    dynamic_smem: int | dict[str, int]

    def smem_on(self, sm: str) -> int:
        """The bytes a launch on `sm` gives."""
        return smem_on(self.dynamic_smem, sm)


def launch_shapes(family, roles: list[str], owner: str, overrides: dict | None = None
                  ) -> tuple[dict[str, LaunchShape], list[str]]:
    """Each role's shape: the kernel's own `launch` override, else `family.launch_shapes()`; and errors."""
    shapes: dict[str, LaunchShape] = {}
    errors: list[str] = []
    name = getattr(family, "name", type(family).__name__)
    for item in family.launch_shapes() or []:
        role = item.get("symbol", item.get("role")) if isinstance(item, dict) else None
        threads = item.get("threads") if isinstance(item, dict) else None
        if isinstance(threads, (list, tuple)):
            threads = math.prod(int(t) for t in threads)
        dynamic = item.get("dynamic_smem", 0) if isinstance(item, dict) else None
        if not isinstance(role, str) or not isinstance(threads, int) or not isinstance(dynamic, (int, dict)):
            errors.append(f"{owner}: family {name} gave a launch shape {item!r}; expected "
                          "{'symbol': ROLE, 'threads': N or [x, y, z], 'dynamic_smem': BYTES}")
            continue
        if role in shapes:
            errors.append(f"{owner}: family {name} gave two launch shapes for symbol `{role}`; give one")
        shapes[role] = LaunchShape(threads, dynamic)
    for role, shape in (overrides or {}).items():
        shapes[role] = LaunchShape(shape.threads, shape.dynamic_smem)
    for role in roles:
        if role not in shapes:
            errors.append(f"{owner}: family {name} gives no launch shape for symbol `{role}`: its launch_shapes() "
                          f"must return {{'symbol': '{role}', 'threads': N, 'dynamic_smem': BYTES}}")
    return shapes, errors
