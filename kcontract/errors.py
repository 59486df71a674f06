"""Errors a user sees: each carries its exit code and a one-paragraph message."""

from __future__ import annotations

from kcontract.exitcodes import ExitCode


class KContractError(Exception):
    """Base of the errors printed as `ERROR: ...` without a traceback."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message
        self.others: list[KContractError] = []  # further mistakes found in the same pass, each its own line

    def lines(self) -> list[str]:
        """This error's message and each further one's, one `ERROR:` line apiece."""
        return [self.message] + [other.message for other in self.others]


class UsageError(KContractError):
    """A bad option or argument on the command line."""

    exit_code = ExitCode.USAGE


class ContractError(KContractError):
    """A mistake in a contract file, located by file, line and field path."""

    exit_code = ExitCode.USAGE

    def __init__(self, file: str, line: int | None, path: str, expected: str, given: str | None = None,
                 column: int | None = None):
        where = f"{file}:{line}" if line is not None else file
        where += f":{column}" if line is not None and column is not None else ""
        text = f"{where}: {path}: {expected}" if path else f"{where}: {expected}"
        if given is not None:
            text += f", given: {given}"
        super().__init__(text)
        self.file, self.line, self.path, self.expected, self.given = file, line, path, expected, given


class ContractFailed(KContractError):
    """A kernel the command needs green is red (a gate failed): the contract's failure, not the user's mistake."""

    exit_code = ExitCode.FAILED


class EnvironmentProblem(KContractError):
    """Something missing from the machine (GPU, toolchain), with the fix."""

    exit_code = ExitCode.ENVIRONMENT
