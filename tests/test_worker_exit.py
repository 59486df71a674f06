"""A worker whose GPU context is lost sends its outcome and leaves at once, with no interpreter teardown (whose
CuPy destructors would print the same loss again as tracebacks)."""

from __future__ import annotations

import pytest

import kcontract.runner.execute
import kcontract.runner.pool as pool
from tests.helpers.worker_pipe import Left, OneTaskPipe


def test_a_fatal_outcome_is_sent_then_the_worker_exits_without_teardown(monkeypatch):
    fatal = type("Outcome", (), {"fatal": True})()
    monkeypatch.setattr(kcontract.runner.execute, "execute", lambda task, progress, fresh: fatal)
    exits = []

    def leave(code):
        exits.append(code)
        raise Left

    monkeypatch.setattr(pool.os, "_exit", leave)
    pipe = OneTaskPipe("task")
    with pytest.raises(Left):
        pool._serve(pipe)
    assert pipe.sent == [fatal] and pipe.closed and exits == [0]
