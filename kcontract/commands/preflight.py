"""The machine checked before any work (kcontract/session/preflight.py), and what it found said on stderr."""

from __future__ import annotations

from kcontract.commands.common import err
from kcontract.session.preflight import Ready, check_machine, device_target

__all__ = ["Ready", "device_target", "preflight"]


def preflight(loaded, contract_path: str, *, cuda: bool, gpu: bool, outputs: dict[str, str | None] | None = None,
              names: list[str] = (), tools: tuple[str, ...] = (), quiet: bool = False) -> Ready:
    """check_machine, and its lines printed unless `quiet` (a note that a folder was made is always said)."""
    ready = check_machine(loaded, contract_path, cuda=cuda, gpu=gpu, outputs=outputs, names=names, tools=tools)
    for line in ready.said(quiet):
        err.print(line, markup=False)
    return ready
