"""Compile one NVRTC job in a process of its own: `python -m tests.helpers.compile_once` reads the pickled job
(kcontract.toolchain.nvrtc.compile_job's tuple) on stdin and writes the cubin on stdout."""

from __future__ import annotations

import pickle
import sys

from kcontract.toolchain.nvrtc import Compiled, compile_job


def main() -> int:
    _, done = compile_job(pickle.loads(sys.stdin.buffer.read()))
    if not isinstance(done, Compiled):
        print(done.log, file=sys.stderr)
        return 1
    sys.stdout.buffer.write(done.cubin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
