"""A gate-5-only test family: kernels with declared launch shapes and no numerics."""

from __future__ import annotations

from pydantic import Field

from kcontract.contract.model import Strict
from kcontract.families.base import Family


class Launch(Strict):
    """Threads per block and dynamic shared memory of one symbol."""

    threads: int = Field(gt=0)
    dynamic_smem: int = Field(default=0, ge=0)


class TinySpec(Strict):
    """Only launch shapes, by symbol role."""

    launch: dict[str, Launch]


class TinyFamily(Family):
    """Feeds gate 5 only: launch shapes straight from the YAML."""

    name = "tests.tiny"
    Spec = TinySpec
    gates = ()
    spec: TinySpec

    def case_names(self) -> list[str]:
        return []

    def exactness(self, case: str) -> list:
        return []

    def invariance(self, case: str) -> list:
        return []

    def launch_shapes(self) -> list[dict]:
        return [{"symbol": role, "threads": s.threads, "dynamic_smem": s.dynamic_smem}
                for role, s in sorted(self.spec.launch.items())]
