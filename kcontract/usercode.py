"""The boundary to user code (kernel modules, families, drift factories and models): SystemExit, GeneratorExit or
a KeyboardInterrupt raised there becomes an error that names it, so no command ends green having checked nothing.

A KeyboardInterrupt is the user's Ctrl-C or SIGTERM only where a signal raised it: the front door's handler marks
each signal it takes, and a worker ignores both signals, so any other KeyboardInterrupt came from user code.
"""

from __future__ import annotations

import signal
import threading
import traceback
from contextlib import contextmanager
from typing import Iterator

ESCAPES = (SystemExit, KeyboardInterrupt, GeneratorExit)  # what `except Exception` lets through
_signalled = threading.Event()


class UserCodeExit(Exception):
    """User code ended the process or raised an interrupt instead of returning or raising an error."""


def on_signal(signum, frame) -> None:
    """Ctrl-C and SIGTERM: marked as the user's, then a KeyboardInterrupt."""
    _signalled.set()
    raise KeyboardInterrupt


def take_signals() -> None:
    """Ctrl-C and SIGTERM raise a KeyboardInterrupt marked as a signal's (the console script's handler)."""
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)


def from_user_code(error: BaseException) -> bool:
    """Whether an escape came from user code rather than from the user's Ctrl-C or SIGTERM."""
    if not isinstance(error, KeyboardInterrupt):
        return isinstance(error, ESCAPES)
    handler = signal.getsignal(signal.SIGINT)
    if handler is signal.SIG_IGN:  # a worker: no signal raises it there
        return True
    return handler is on_signal and not _signalled.is_set()


def describe(error: BaseException) -> str:
    """`SystemExit(0) at kern.py:2`: the escape and the innermost frame that raised it."""
    text = f"{type(error).__name__}({', '.join(map(repr, error.args))})"
    frames = traceback.extract_tb(error.__traceback__)
    return text + (f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else "")


@contextmanager
def user_code(what: str) -> Iterator[None]:
    """Run user code; an escape it raised becomes UserCodeExit naming `what` (a signal's interrupt goes on)."""
    try:
        yield
    except ESCAPES as error:
        if not from_user_code(error):
            raise
        raise UserCodeExit(f"{what} raised {describe(error)} instead of returning: user code must return or raise "
                           f"an error, never exit") from None
