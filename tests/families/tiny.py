"""A records-only test family: kernels with declared launch shapes and no numerics."""

from __future__ import annotations

from pydantic import Field

from kcontract.contract.model import Strict
from kcontract.family.base import Family
from kcontract.gatetable import Suite
from kcontract.problem import LaunchShape


class Launch(Strict):
    """Threads per block and dynamic shared memory of one symbol."""

    threads: int = Field(gt=0)
    dynamic_smem: int = Field(default=0, ge=0)


class TinySpec(Strict):
    """Only launch shapes, by symbol role."""

    launch: dict[str, Launch]


class TinyFamily(Family):
    """Feeds no suite: only the records gate runs, on launch shapes straight from the YAML."""

    name = "tests.tiny"
    Spec = TinySpec
    suites = frozenset()
    spec: TinySpec

    def cases(self, suite: Suite) -> list[str]:
        return []

    def checks(self, suite: Suite, case: str) -> list:
        return []

    def invariance(self, suite: Suite, case: str) -> list:
        return []

    def launch_shapes(self) -> list[LaunchShape]:
        return [LaunchShape(role, s.threads, s.dynamic_smem) for role, s in sorted(self.spec.launch.items())]
