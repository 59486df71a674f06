"""Launch shapes of a kernel's symbol roles: the kernel reference's own `launch`, else its family's default."""

from __future__ import annotations

from kcontract.contract.kernels import launch_on
from kcontract.problem import LaunchShape


def launch_shapes(family, roles: list[str], owner: str, overrides: dict | None = None,
                  exports: dict[str, dict[str, int]] | None = None) -> tuple[dict[str, LaunchShape], list[str]]:
    """Each role's shape: the kernel's own `launch` override, else `family.launch_shapes()`; and errors. An
    override that names the kernel's exports takes their values per SM (`exports`: {sm: {name: value}} of the
    modules built)."""
    shapes: dict[str, LaunchShape] = {}
    errors: list[str] = []
    name = getattr(family, "name", type(family).__name__)
    for item in family.launch_shapes() or []:
        if not isinstance(item, LaunchShape) or not isinstance(item.threads, int) \
                or not isinstance(item.dynamic_smem, (int, dict)):
            errors.append(f"{owner}: family {name} gave a launch shape {item!r}; expected "
                          "kcontract.problem.LaunchShape(role, threads, dynamic_smem)")
            continue
        if item.role in shapes:
            errors.append(f"{owner}: family {name} gave two launch shapes for symbol `{item.role}`; give one")
        shapes[item.role] = item
    for role, shape in (overrides or {}).items():
        fields = {}
        for field in ("threads", "dynamic_smem"):
            given = getattr(shape, field)
            if not isinstance(given, str):
                fields[field] = given
                continue
            if not exports:
                errors.append(f"{owner}: launch `{role}` {field} reads the kernel's exports ({given!r}), and no "
                              f"module of it was built")
                break
            found = {}
            for sm, values in exports.items():
                found[sm], why = launch_on(given, field, sm, values)
                if why:
                    errors.append(f"{owner}: launch `{role}` {field}{why}")
            fields[field] = found if len(set(found.values())) > 1 else next(iter(found.values()))
        else:
            if isinstance(fields["threads"], dict):
                errors.append(f"{owner}: launch `{role}` threads differ per SM ({fields['threads']}); give one")
                continue
            shapes[role] = LaunchShape(role, fields["threads"], fields["dynamic_smem"])
    for role in roles:
        if role not in shapes:
            errors.append(f"{owner}: family {name} gives no launch shape for symbol `{role}`: its launch_shapes() "
                          f"must return LaunchShape('{role}', threads, dynamic_smem)")
    return shapes, errors
