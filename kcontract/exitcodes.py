"""Process exit codes, one documented enum."""

from enum import IntEnum


class ExitCode(IntEnum):
    """What `kcontract` returns to the shell."""

    OK = 0  # every entry passed, every control went red, records current
    FAILED = 1  # the contract failed
    USAGE = 2  # usage or configuration error (bad YAML, bad option)
    ENVIRONMENT = 3  # no GPU where one is needed, toolchain missing
    INTERRUPTED = 130  # Ctrl-C: every worker ended, nothing written
