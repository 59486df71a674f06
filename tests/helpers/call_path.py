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


def route(call: Callable[[], object], through: Callable, target: Callable) -> list[str]:
    """The kcontract modules `call` passes through on its way to `target`: those on the stack where `through` is
    first entered, then each one entered beneath `through` until `target` is first entered, in order and once per
    stretch; [] if `through` is never entered."""
    way, target_code = through.__code__, target.__code__
    seen: list[str] = []
    state: dict[str, object] = {"frame": None, "done": False}

    def note(filename: str) -> None:
        path = Path(filename).resolve()
        if PACKAGE in path.parents:
            name = path.relative_to(PACKAGE).as_posix()
            if not seen or seen[-1] != name:
                seen.append(name)

    def watch(frame, event, arg):
        if state["done"]:
            return
        if state["frame"] is None:
            if event == "call" and frame.f_code is way:
                state["frame"] = frame
                for entry in traceback.extract_stack(frame):
                    note(entry.filename)
            return
        if event == "return" and frame is state["frame"] or event == "call" and frame.f_code is target_code:
            state["done"] = True
        elif event == "call":
            note(frame.f_code.co_filename)

    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        call()
    finally:
        sys.setprofile(previous)
    return seen


def modules_entered(call: Callable[[], object]) -> set[str]:
    """Every kcontract module (path relative to the package) a function of which runs during `call`."""
    found: set[str] = set()

    def watch(frame, event, arg):
        if event == "call":
            path = Path(frame.f_code.co_filename).resolve()
            if PACKAGE in path.parents:
                found.add(path.relative_to(PACKAGE).as_posix())

    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        call()
    finally:
        sys.setprofile(previous)
    return found
