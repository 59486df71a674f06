"""The `kcontract` command group: it only wires subcommands."""

from __future__ import annotations

import click

from kcontract import __version__
from kcontract.exitcodes import ExitCode
from kcontract.commands.list_entries import list_command
from kcontract.commands.run import run_command
from kcontract.commands.bench_cmd import bench_command
from kcontract.commands.check import check_command
from kcontract.commands.records_cmd import records_command
from kcontract.commands.sass_diff import sass_diff_command
from kcontract.commands.receipt_cmd import receipt_group
from kcontract.commands.mutate_cmd import mutate_command


EXIT_CODES = "\b\nExit codes:\n" + "\n".join(f"  {int(code):<4} {text}" for code, text in (
    (ExitCode.OK, "every entry passed, every control went red, records current"),
    (ExitCode.FAILED, "the contract failed"),
    (ExitCode.USAGE, "usage or configuration error (bad YAML, bad option)"),
    (ExitCode.ENVIRONMENT, "environment: no GPU where one is needed, toolchain missing"),
    (ExitCode.INTERRUPTED, "interrupted (Ctrl-C)")))


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES)
@click.version_option(__version__, prog_name="kcontract")
def cli() -> None:
    """Kernel-contract verification for GPU kernels."""


cli.add_command(list_command)
cli.add_command(run_command)
cli.add_command(check_command)
cli.add_command(records_command)
cli.add_command(sass_diff_command)
cli.add_command(receipt_group)
cli.add_command(bench_command)
cli.add_command(mutate_command)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="kcontract")
