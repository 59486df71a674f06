"""`kcontract sass-diff`: per kernel instantiation and SM, whether two revisions' machine code differs."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from kcontract.cachedir import cache_root
from kcontract.commands.common import contract_option, err, out, user_errors
from kcontract.errors import UsageError
from kcontract.exitcodes import ExitCode
from kcontract.sassdiff.diff import sass_diff
from kcontract.sassdiff.revision import repo_root
from kcontract.toolchain.locate import find_toolchain
from kcontract.toolchain.tools import find_tool


def _sm(value: str) -> str:
    """`90`, `sm90` or `sm_90` -> `sm_90`."""
    m = re.fullmatch(r"(?:sm_?)?(\d+[af]?)", value.strip())
    if not m:
        raise UsageError(f"--sm {value}: expected an SM such as sm_90 or 90")
    return f"sm_{m.group(1)}"


@click.command("sass-diff", short_help="Which kernels' machine code changed.")
@contract_option
@click.option("--base", "base", default="HEAD", show_default=True, help="The revision to compare against.")
@click.option("--head", "head", default=None, help="The revision to compare (default: the working tree).")
@click.option("--sm", "sms", multiple=True, help="Compare only these SMs (repeatable; default: the targets).")
@click.option("--exit-code", is_flag=True, help="Exit 1 when any machine code changed.")
@click.option("--jobs", type=click.IntRange(1, 64), help="Worker processes for compiles.")
@user_errors
def sass_diff_command(contract_path: str, base: str, head: str | None, sms: tuple[str, ...], exit_code: bool,
                      jobs: int | None) -> None:
    """Compile both revisions for every SM and compare each kernel: identical bytes, identical SASS, or changed."""
    contract = Path(contract_path).resolve()
    root = repo_root(contract.parent)
    try:
        rel = str(contract.relative_to(Path(root).resolve()))
    except ValueError:
        raise UsageError(f"{contract_path} is outside the git work tree {root}") from None
    chosen = list(dict.fromkeys(_sm(s) for s in sms)) or None
    err.print(f"toolchain: {find_toolchain().describe()}", markup=False)
    tool = find_tool("nvdisasm")
    err.print(f"nvdisasm: {tool.version} ({tool.origin})", markup=False)
    result = sass_diff(Path(root), rel, base, head, chosen, cache_root(contract), jobs)
    for block in result.changed_blocks():
        out.print(block, markup=False)
    for line in result.failures:
        err.print(f"FAIL {line}", markup=False)
    for line in result.source_lines():
        out.print(line, markup=False)
    out.print(result.summary(), markup=False)
    failed = bool(result.failures) or (exit_code and result.changed)
    sys.exit(int(ExitCode.FAILED if failed else ExitCode.OK))
