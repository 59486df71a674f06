"""The kcontract modules a call passes through, read off the stack where a chosen function is first entered."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Callable

PACKAGE = Path(__file__).resolve().parents[2] / "kcontract"


def modules_until(target: Callable, call: Callable[[], object]) -> list[str]:
    """Each kcontract module (path relative to the package) on the stack, in call order and once per stretch,
    when `call` first enters `target`; [] if it never does."""
    code, seen = target.__code__, []

    def watch(frame, event, arg):
        if event == "call" and frame.f_code is code and not seen:
            for entry in traceback.extract_stack(frame):
                path = Path(entry.filename).resolve()
                if PACKAGE in path.parents:
                    name = path.relative_to(PACKAGE).as_posix()
                    if not seen or seen[-1] != name:
                        seen.append(name)

    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        call()
    finally:
        sys.setprofile(previous)
    return seen
