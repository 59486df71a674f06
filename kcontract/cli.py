"""The `kcontract` command group: it only wires subcommands, each imported when it runs."""

from __future__ import annotations

import gc
import importlib
import os
import sys

import click

from kcontract import __version__
from kcontract.exitcodes import ExitCode
from kcontract.usercode import take_signals

COMMANDS = {  # name -> (module:attribute, the line `kcontract --help` shows)
    "list": ("kcontract.commands.list_entries:list_command", "The entries and controls."),
    "run": ("kcontract.commands.run:run_command", "Run every gate and control; print SUMMARY."),
    "check": ("kcontract.commands.check_cmd:check_command", "Everything that needs no GPU (the CPU CI job)."),
    "records": ("kcontract.commands.records_cmd:records_command", "Gate 5's launch records (--update rewrites)."),
    "sass-diff": ("kcontract.commands.sass_diff:sass_diff_command", "Which kernels' machine code changed."),
    "review": ("kcontract.commands.review_cmd:review_command", "A pull request's receipt against its base branch."),
    "receipt": ("kcontract.commands.receipt_cmd:receipt_group", "Show, check or merge run receipts."),
    "bench": ("kcontract.commands.bench_cmd:bench_command", "GPU time of each kernel call against the read ceiling."),
    "mutate": ("kcontract.commands.mutate_cmd:mutate_command", "Mutation score of a CUDA entry's gates."),
    "coverage": ("kcontract.commands.coverage_cmd:coverage_command", "Which kernel lines each entry's cases run."),
    "cache": ("kcontract.commands.cache_cmd:cache_group", "The compile and reference cache: size, prune."),
    "init": ("kcontract.commands.init_cmd:init_command", "Register a kernel in a contract (new or existing)."),
    "drift": ("kcontract.commands.drift_cmd:drift_command", "The first torch op that breaks batch invariance."),
}

EXIT_CODES = "\b\nExit codes:\n" + "\n".join(f"  {int(code):<4} {text}" for code, text in (
    (ExitCode.OK, "every entry passed, every control went red, gate 5 held"),
    (ExitCode.FAILED, "the contract failed (a gate, a control, a record)"),
    (ExitCode.USAGE, "usage or configuration error (bad YAML, bad option, unwritable output)"),
    (ExitCode.ENVIRONMENT, "environment: no GPU where one is needed, no toolchain, no writable cache"),
    (ExitCode.INTERRUPTED, "interrupted (Ctrl-C or SIGTERM)")))


class LazyGroup(click.Group):
    """A group whose subcommands import on first use, so `kcontract --help` stays fast."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, _, attr = COMMANDS[name][0].partition(":")
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, text) for name, (_, text) in COMMANDS.items()])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES)
@click.version_option(__version__, prog_name="kcontract")
def cli() -> None:
    """Kernel-contract verification for GPU kernels."""


def usage_line(error: click.UsageError, args: list[str]) -> str:
    """`kcontract run: --jobs: 'x' is not a worker count ... (kcontract run --help)`: click's usage error in one
    line naming the command and the option."""
    command = error.ctx.command_path if error.ctx is not None else _command_path(args)
    param = getattr(error, "param", None)
    if isinstance(error, click.BadParameter) and not isinstance(error, click.MissingParameter) and param is not None:
        name = max(param.opts, key=len) if isinstance(param, click.Option) else param.human_readable_name
        said = f"{name}: {error.message}"
    else:
        said = error.format_message()
        said = said[:1].lower() + said[1:]
    return f"{command}: {' '.join(said.split()).rstrip('.')} ({command} --help)"


def _command_path(args: list[str]) -> str:
    """`kcontract receipt merge`: the commands the arguments name, for an error click raised without its context."""
    words, command = ["kcontract"], cli
    for arg in args:
        found = command.get_command(None, arg) if isinstance(command, click.Group) else None
        if found is None:
            break
        words.append(arg)
        command = found
    return " ".join(words)


def import_frozen(words: list[str]) -> None:
    """The command's modules imported with the cyclic collector paused, then frozen: they live as long as the
    process, and the collections its work sets off no longer scan them."""
    if not words or words[0] not in COMMANDS:
        return
    gc.disable()
    try:
        importlib.import_module(COMMANDS[words[0]][0].partition(":")[0])
    finally:
        gc.freeze()
        gc.enable()


def main() -> None:
    """Console-script entry point: SIGTERM and Ctrl-C as one line and exit 130, a closed stdout ends quietly."""
    take_signals()
    import_frozen(sys.argv[1:2])
    try:
        code = cli.main(prog_name="kcontract", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as error:  # a bare group: its help, as `--help` shows it
        error.show()
        sys.exit(error.exit_code)
    except click.UsageError as error:
        print(usage_line(error, sys.argv[1:]), file=sys.stderr)
        sys.exit(int(ExitCode.USAGE))
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except (KeyboardInterrupt, click.Abort):
        print("interrupted", file=sys.stderr)
        sys.exit(int(ExitCode.INTERRUPTED))
    except BrokenPipeError:  # `kcontract list | head`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(int(ExitCode.FAILED))
    sys.exit(code or 0)
