"""The family interface: what a kernel family gives the generic gates.

A family knows a group of kernels' ABI and mathematics; the core knows none. It feeds input suites
(kcontract.gatetable.Suite): range suites give checked problems with float64 ranges, the variants suite gives
invariance sets, and launch shapes serve the records gate. docs/families.md walks through writing one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import ClassVar

from pydantic import BaseModel

from kcontract.gatetable import Kind, Suite
from kcontract.family.torch_op import FromTorch, TorchOp
from kcontract.problem import BenchCall, Checked, InvarianceSet, LaunchShape

USUAL_CAUSES: dict[Kind, tuple[str, ...]] = {  # what a failure of each kind usually means, in no family's words
    Kind.RANGES: ("an accumulation in a narrower format than declared", "an element or term dropped or counted "
                  "twice", "a rounding or math function other than the declared one", "an unwritten output"),
    Kind.INVARIANCE: ("atomics or an order-dependent merge", "a split or tile size chosen from the batch or the "
                      "problem size", "uninitialised shared memory or a read past a row's data",
                      "a race between warps or blocks"),
}


class Family(ABC):
    """A group of kernels sharing an ABI and mathematics: suites of inputs, float64 ranges, variant runs.

    Subclasses set `name`, `Spec` (their own YAML fields, a pydantic model) and `suites` (the suites they feed)
    and implement the abstract methods; the rest have defaults a simple family keeps.
    """

    name: ClassVar[str]  # the `family:` value in contract.yaml (or `package.module:Class`)
    Spec: ClassVar[type[BaseModel]]  # the family's own YAML fields (shape, arithmetic, values, cases)
    suites: ClassVar[frozenset[Suite]]  # the input suites it feeds; gates of other suites do not run
    abi: ClassVar[tuple[str, ...]] = ()  # argument names a Python kernel is called with, by keyword
    bench_sizes: ClassVar[dict[str, tuple[int, ...]]] = {}  # `kcontract bench`'s default sizes, by name

    def __init__(self, entry: str, spec: BaseModel, seed: int):
        self.entry, self.spec, self.seed = entry, spec, seed
        self.store = None  # the run's on-disk cache (kcontract.refcache.ReferenceCache), set by the runner
        self.exports: dict[str, int] = {}  # the entry kernel's exported constants (contract `exports`), set by the runner

    # What the gates ask.

    @abstractmethod
    def cases(self, suite: Suite) -> list[str]:
        """The cases a suite runs for this entry, in order (`--case` and replay commands name them)."""

    @abstractmethod
    def checks(self, suite: Suite, case: str) -> Iterable[Checked]:
        """A range suite's problems for one case, each with per-output ranges."""

    @abstractmethod
    def invariance(self, suite: Suite, case: str) -> Iterable[InvarianceSet]:
        """An invariance suite's base run and variant runs that must give each base row's bits."""

    @abstractmethod
    def launch_shapes(self) -> list[LaunchShape]:
        """Each kernel symbol role's default launch shape (a kernel reference may override it under `launch`)."""

    # What the loader, the runner and the reports ask; defaults suit a family without them.

    @classmethod
    def template(cls) -> str:
        """A new entry's own fields as commented YAML (a mapping, one small case) that loads as written."""
        raise NotImplementedError(f"family {getattr(cls, 'name', cls.__name__)} gives no entry template (its class has "
                                  "no template()); write the entry's fields by hand, as its Spec declares them")

    @classmethod
    def from_torch_op(cls, op: TorchOp) -> FromTorch | None:
        """An entry that runs a torch op `kcontract drift` found (None: not an op of this family)."""
        return None

    def kernel_abi(self) -> tuple[str, ...]:
        """The argument names this entry's kernel takes: the family's `abi`, unless an entry picks its own."""
        return type(self).abi

    def exports_needed(self) -> tuple[str, ...]:
        """Names of constants the entry's kernel must export (contract `exports`) for this family to check it."""
        return ()

    def launch_exports(self) -> tuple[str, ...]:
        """Names of constants a CUDA kernel of the entry must export to be launched (tile sizes its grid and tensor
        maps are counted in); Python kernels need none."""
        return ()

    def template_args(self) -> dict[str, int]:
        """Values a CUDA kernel reference's symbols may name as {placeholders}, e.g. {"dim": 512}."""
        return {}

    def case_traits(self, case: str) -> dict[str, object]:
        """Facts about a case a kernel's `instances` may restrict, e.g. {"layout": "ring"}."""
        return {}

    def case_bytes(self, case: str) -> int:
        """Host bytes a worker holds for a case (drawn inputs, reference), for load-time refusal."""
        return 0

    def case_buffer_bytes(self, case: str) -> int:
        """Bytes of a case's calls' buffers as built where the kernel runs (host memory for a Python kernel)."""
        return 0

    def reference_device_bytes(self, case: str) -> int:
        """Device bytes the case's float64 references hold at once beyond case_bytes (their working arrays), where
        references compute on a GPU."""
        return 0

    def hints(self, kind: Kind) -> tuple[str, ...]:
        """The usual causes of a failure of this kind, as a replay line lists them; families add their own."""
        return USUAL_CAUSES.get(kind, ())

    def bench_calls(self, sizes: dict[str, tuple[int, ...]]) -> list[BenchCall]:
        """`kcontract bench`'s calls at these sizes (names and defaults from `bench_sizes`)."""
        return []

    def memo(self, parts: tuple, make):
        """Drawn inputs named by `parts` (they depend on the seed and spec, never the kernel): cached on disk
        across runs when the runner gives a store, else made now."""
        return make() if self.store is None else self.store.memo(self, parts, make)
