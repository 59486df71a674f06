"""Pieces every command shares: the --contract option, consoles, output paths and the error helper."""

from __future__ import annotations

import functools
import sys
from typing import Callable

import click
from rich.console import Console

from kcontract.errors import KContractError
from kcontract.exitcodes import ExitCode
from kcontract.session.preflight import require_writable as _require_writable

out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

contract_option = click.option(
    "--contract",
    "contract_path",
    default="contract.yaml",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The contract file.",
)

strict_records_option = click.option(
    "--strict-records",
    is_flag=True,
    help="Fail gate 5 where the toolchain in use has no records of its own or cannot build a target SM.",
)


class Jobs(click.ParamType):
    """A worker count from 1 to 64, or `auto`."""

    name = "N|auto"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value == "auto":
            return value
        if str(value).isdigit() and 1 <= int(value) <= 64:
            return int(value)
        self.fail(f"{value!r} is not a worker count from 1 to 64 or 'auto'", param, ctx)


class Count(click.ParamType):
    """A whole number from `low` to `high`, said so when it is not one (click's IntRange says "integer range")."""

    name = "N"

    def __init__(self, low: int, high: int, what: str):
        self.low, self.high, self.what = low, high, what

    def convert(self, value, param, ctx):
        if isinstance(value, int) and self.low <= value <= self.high:
            return value
        text = str(value).strip()
        if text.lstrip("-").isdigit() and self.low <= int(text) <= self.high:
            return int(text)
        self.fail(f"{value!r} is not {self.what}: a whole number from {self.low:,} to {self.high:,}", param, ctx)


def require_writable(**paths: str | None) -> None:
    """Refuse an output path that cannot be written; say so where a missing folder was made."""
    for line in _require_writable(**paths):
        err.print(f"note: {line}", markup=False)


def fail(error: KContractError) -> None:
    """Print `ERROR: ...` on stderr (a line per mistake found) and exit with the error's code."""
    for line in error.lines():
        err.print(f"ERROR: {line}", markup=False)
    sys.exit(int(error.exit_code))


def user_errors(fn: Callable) -> Callable:
    """Turn KContractError into `ERROR: ...` and its exit code, Ctrl-C into one line and 130; no traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except KContractError as error:
            fail(error)
        except KeyboardInterrupt:
            err.print("interrupted", markup=False)
            sys.exit(int(ExitCode.INTERRUPTED))

    return wrapper
