"""What a front door asks a run for, checked as a whole before any work: the options that cannot go together
are refused in one line each."""

from __future__ import annotations

from dataclasses import dataclass

from kcontract.errors import UsageError
from kcontract.session.plan import Selection
from kcontract.session.shard import Shard

PARTIAL = "--only, --control, --gate, --case and --no-controls"


@dataclass(frozen=True)
class RunOptions:
    """The selection, how the run splits or refreshes, and where it writes."""

    selection: Selection = Selection()
    shard: Shard | None = None
    receipt: str | None = None
    stale: bool = False
    recheck: bool = False
    cache: bool = True  # False: every float64 reference made afresh
    jobs: int | str = "auto"
    json: str | None = None
    junit: str | None = None

    def check(self) -> None:
        """Refuse the combinations a run cannot honour."""
        self._check_interpret()
        self._check_stale()
        partial = self.selection.partial
        if self.receipt and partial:
            raise UsageError(f"--receipt attests the whole contract: drop {PARTIAL}")
        if self.shard and partial:
            raise UsageError(f"--shard {self.shard} splits the whole contract: drop {PARTIAL}")

    def _check_interpret(self) -> None:
        """`--interpret` runs a double of the GPU's run: it attests nothing a receipt keeps."""
        if self.selection.interpret and (self.receipt or self.shard):
            given = "--receipt" if self.receipt else "--shard"
            raise UsageError(f"--interpret runs Triton kernels in Triton's interpreter, whose bits are numpy's, not a "
                             f"GPU's: it writes no receipt; drop {given}")

    def _check_stale(self) -> None:
        """`--stale` and `--recheck` need a receipt and the whole contract."""
        if self.recheck and not self.stale:
            raise UsageError("--recheck re-runs rows judged by an earlier kcontract with --stale: add --stale")
        if self.stale and not self.receipt:
            raise UsageError("--stale refreshes a receipt's rows: give the receipt with --receipt FILE")
        if self.stale and (self.selection.partial or self.shard):
            raise UsageError(f"--stale picks the rows itself: drop {PARTIAL.replace(' and', ',')} and --shard")

    @property
    def whole(self) -> bool:
        """Whether the run is the contract's whole (of shards, only the first notes orphan records)."""
        return not self.selection.partial and (self.shard is None or self.shard.index == 1)
