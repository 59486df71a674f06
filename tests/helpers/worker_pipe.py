"""A worker's pipe as the parent holds it, for driving `kcontract.runner.pool._serve` in this process."""

from __future__ import annotations


class OneTaskPipe:
    """One task in; everything the worker sends is kept; closing is noted."""

    def __init__(self, task):
        self.inbox, self.sent, self.closed = [task], [], False

    def recv(self):
        if not self.inbox:
            raise EOFError
        return self.inbox.pop()

    def send(self, item):
        self.sent.append(item)

    def close(self):
        self.closed = True


class Left(Exception):
    """Raised in place of os._exit, so the test sees the worker leave."""
