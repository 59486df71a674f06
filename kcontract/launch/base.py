"""The launcher protocol, and the one-line failure a kernel's call turns into."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from kcontract.problem import Problem


class Launcher(Protocol):
    """Runs problems; outputs come back as host arrays (bf16/fp16 as uint16 bits, fp32 as float32)."""

    def run(self, problem: Problem) -> dict[str, np.ndarray]:
        """Allocate and poison the outputs, launch, wait, return every output."""

    def run_concurrent(self, problems: list[Problem]) -> list[dict[str, np.ndarray]]:
        """Run problems at the same time (streams on a GPU, threads on a CPU)."""


class KernelFailure(Exception):
    """A kernel call that raised or wrote the wrong thing: one line for the report, the traceback for --verbose."""

    def __init__(self, message: str, trace: str = "", fatal: bool = False, out_of_memory: bool = False):
        super().__init__(message)
        self.message, self.trace = message, trace
        self.fatal = fatal  # the process cannot run further kernels (a faulted GPU context)
        self.out_of_memory = out_of_memory  # the call found too little device memory beside other tasks
