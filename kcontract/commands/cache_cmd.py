"""`kcontract cache info|prune`: what the compile and reference cache holds, and making it smaller."""

from __future__ import annotations

import time

import click

from kcontract.cachedir import cache_root
from kcontract.cachesize import CAP_ENV, cap, items, parse_size, prune
from kcontract.commands.common import contract_option, err, out, user_errors
from kcontract.capacity import size_text


@click.group("cache", short_help="The compile and reference cache: size, prune.")
def cache_group() -> None:
    """The cache beside the contract (or $KCONTRACT_CACHE): compiles, drawn inputs and references, mutants."""


@cache_group.command("info")
@contract_option
@user_errors
def info(contract_path: str) -> None:
    """The cache's folder, size by kind, and its cap."""
    root = cache_root(contract_path)
    found = items(root)
    out.print(f"cache {root}", markup=False)
    for kind in ("compile", "reference", "mutants"):
        mine = [i for i in found if i.kind == kind]
        oldest = f", oldest used {_age(min(i.used for i in mine))} ago" if mine else ""
        out.print(f"  {kind}: {len(mine)} items, {size_text(sum(i.size for i in mine))}{oldest}", markup=False)
    limit = cap()
    out.print(f"CACHE {size_text(sum(i.size for i in found))} in {len(found)} items; cap "
              f"{size_text(limit) if limit else 'none'} (${CAP_ENV})", markup=False)


@cache_group.command("prune")
@contract_option
@click.option("--max-size", "max_size", help="Remove least recently used items until the cache is under this "
                                             "(default: the cap, $KCONTRACT_CACHE_MAX or 4GiB).")
@click.option("--older-than", "days", type=click.FloatRange(min=0), help="Also remove items unused for DAYS.")
@click.option("--all", "everything", is_flag=True, help="Empty the cache.")
@user_errors
def prune_command(contract_path: str, max_size: str | None, days: float | None, everything: bool) -> None:
    """Make the cache smaller: unused items first."""
    root = cache_root(contract_path)
    limit = parse_size(max_size, "--max-size") if max_size else cap()
    removed = prune(root, 1 if everything else limit, 0 if everything else (days * 86400 if days is not None
                                                                                else None))
    left = items(root)
    err.print(f"removed {len(removed)} items ({size_text(sum(i.size for i in removed))})", markup=False)
    out.print(f"CACHE {size_text(sum(i.size for i in left))} in {len(left)} items left in {root}", markup=False)


def _age(when: float) -> str:
    """`3.2 days`, `5 hours`, `12 minutes`."""
    seconds = max(0.0, time.time() - when)
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} seconds"
