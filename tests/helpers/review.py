"""A kernel pull request in a throwaway git repository, and a fake GPU clock, for `kcontract review` on the CPU.

The repository's contract has two CUDA entries on one source (`round` and `scale`, records-only, so gate 5 runs
without a GPU), one on another source (`other`) and a numpy RMSNorm (its gates run on the CPU). The base commit
holds the contract, its records and a receipt of a whole run made at the commit before; the head changes
`tiny_round` (so `round` changes and `scale`, sharing its file, is a current caller), rewrites its records, and
gives the numpy entry another case (its rows re-run). The fake clock times calls without a GPU: each call's time,
a slowdown of the head's build of chosen entries, noise, and a drift with every slot timed (a warming GPU).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.review.abba import BASE, HEAD
from kcontract.review.timing import TimedCall

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = """version: 1
seed: 11
targets: [sm_90]
entries:
  - name: scale
    family: tests.families.tiny:TinyFamily
    kernel: {cuda: {source: kernels/k.cu, symbols: {scale: "tiny_scale<32>"}}}
    launch: {scale: {threads: 128}}
  - name: round
    family: tests.families.tiny:TinyFamily
    kernel: {cuda: {source: kernels/k.cu, symbols: {round: tiny_round}}}
    launch: {round: {threads: 256}}
  - name: other
    family: tests.families.tiny:TinyFamily
    kernel: {cuda: {source: kernels/o.cu, symbols: {scale: "tiny_scale<32>"}}}
    launch: {scale: {threads: 64}}
  - name: np_rmsnorm
    family: rmsnorm
    kernel: {python: "tests.doubles.rmsnorm:rmsnorm"}
    eps: 1.0e-6
    cases:
      - {name: h512, hidden: 512, rows: 4}
"""
HEAD_CASE = "      - {name: h300, hidden: 300, rows: 3}\n"
ROUND = "y[i] = __float2bfloat16_rn(x[i]);"
SLOWER_ROUND = "y[i] = __float2bfloat16_rn(x[i] * 0.5f + x[n - 1 - i]);"
RECEIPT = "receipts/contract-cpu.json"
CALLS = (("n1024", "n 1024", 10.0), ("n65536", "n 65536", 250.0))  # every entry's calls: label, size, base µs


def kcontract_here(repo: Path, *args: str, cache: Path):
    """The CLI in this process (its tasks too) on `repo`'s contract, at 80 columns: click's result."""
    return CliRunner().invoke(cli, [*args, "--contract", str(repo / "contract.yaml")],
                              env={"KCONTRACT_CACHE": str(cache), "KCONTRACT_IN_PROCESS": "1", "COLUMNS": "80"})


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def _ok(result, what: str) -> None:
    assert result.exit_code == 0, f"{what}: {result.output[-3000:]}"


def pull_request(repo: Path, cache: Path) -> tuple[str, str]:
    """The repository's base and head commits, as described above."""
    (repo / "kernels").mkdir(parents=True)
    tiny = (ROOT / "tests" / "cuda" / "tiny.cu").read_text()
    (repo / "kernels" / "k.cu").write_text(tiny)
    (repo / "kernels" / "o.cu").write_text(tiny.replace("A small gate-5 test kernel", "Another file's kernel"))
    (repo / "contract.yaml").write_text(CONTRACT)
    (repo / ".gitignore").write_text("*.json.lock\n")
    git(repo, "init", "-q")
    _ok(kcontract_here(repo, "records", "--update", cache=cache), "records --update at the base")
    _commit(repo, "the contract")
    _ok(kcontract_here(repo, "run", "--jobs", "1", "--receipt", str(repo / RECEIPT), cache=cache), "the base's run")
    base = _commit(repo, "its receipt")
    kernel = repo / "kernels" / "k.cu"
    kernel.write_text(kernel.read_text().replace(ROUND, SLOWER_ROUND))
    (repo / "contract.yaml").write_text(CONTRACT + HEAD_CASE)
    _ok(kcontract_here(repo, "records", "--update", cache=cache), "records --update at the head")
    return base, _commit(repo, "round reads two values")


@dataclass
class FakeClock:
    """Times calls without a GPU: `CALLS` for every entry, each side's time its base time, the head's slowed by
    `slower` percent for the entries named, a build loaded second (the head and the placebo) by `reloaded` percent,
    times (1 + drift x the slots timed so far), times (1 +- noise percent, the sign turning with every slot, so each
    side's two slots of a round differ by twice that); entries in `new` have no base build."""

    slower: dict[str, float] = field(default_factory=dict)
    reloaded: float = 0.0
    noise: float = 0.0
    drift: float = 0.0
    new: set[str] = field(default_factory=set)
    slots: list[tuple[str, str, str]] = field(default_factory=list)  # (entry, call, side) in the order timed
    notes: list[str] = field(default_factory=list)

    def calls(self, entry: str) -> Iterator[TimedCall]:
        for label, size, us in CALLS:
            yield TimedCall(label, size, self._slot(entry, label, us), entry not in self.new)

    def _slot(self, entry: str, label: str, us: float):
        def slot(side: str) -> float:
            warmed = 1 + self.drift * len(self.slots)
            self.slots.append((entry, label, side))
            slowed = 1 + self.slower.get(entry, 0.0) / 100 if side == HEAD else 1.0
            moved = 1 + self.reloaded / 100 if side != BASE else 1.0
            jitter = self.noise if len(self.slots) % 2 else -self.noise
            return us * slowed * moved * warmed * (1 + jitter / 100)

        return slot


def review_here(repo: Path, *args: str, clock: FakeClock | None, monkeypatch, env: dict | None = None):
    """`kcontract review` on the repository's contract in this process, timed by `clock` (None: this machine's GPU
    clock): click's result."""
    import functools

    import kcontract.commands.review_cmd as front_door
    from kcontract.session.review import review

    if clock is not None:
        monkeypatch.setattr(front_door, "review", functools.partial(review, clock=clock))
    cache = os.environ["KCONTRACT_CACHE"]
    environ = {"KCONTRACT_CACHE": cache, "KCONTRACT_IN_PROCESS": "1", "COLUMNS": "80", **(env or {})}
    return CliRunner().invoke(cli, ["review", "--contract", str(repo / "contract.yaml"), "--jobs", "1", *args],
                              env=environ)
