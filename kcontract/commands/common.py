"""Pieces every command shares: the --contract option, consoles and the error helper."""

from __future__ import annotations

import functools
import sys
from typing import Callable

import click
from rich.console import Console

from kcontract.errors import KContractError

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

contract_option = click.option(
    "--contract",
    "contract_path",
    default="contract.yaml",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The contract file.",
)


def fail(error: KContractError) -> None:
    """Print `ERROR: ...` on stderr and exit with the error's code."""
    err.print(f"ERROR: {error.message}", markup=False)
    sys.exit(int(error.exit_code))


def user_errors(fn: Callable) -> Callable:
    """Turn KContractError into `ERROR: ...` and its exit code, with no traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except KContractError as error:
            fail(error)
        except KeyboardInterrupt:
            err.print("interrupted", markup=False)
            sys.exit(130)

    return wrapper
