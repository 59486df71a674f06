"""Which share of a whole run `--shard I/N` takes: entries with their controls, balanced by recorded seconds.

The unit is an entry with all its gate tasks and the controls planted on it (they share its cached references).
Each unit's cost is its seconds in the newest whole-contract receipt beside the contract, else its planner weight
per gate run scaled to seconds by the units that have recorded ones. Units go heaviest first (ties by name) to
the least loaded shard (ties to the lowest number), so every shard computes the same split on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kcontract.contract.loaded import LoadedContract
from kcontract.errors import UsageError
from kcontract.receipts.durations import newest_whole_receipt, row_seconds
from kcontract.session.plan import weight
from kcontract.verdict.outcome import Task

MAX_SHARDS = 64
FORM = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`, both from 1."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """`2/4` as Shard(2, 4); anything else is a usage error that says the form."""
    match = FORM.fullmatch(text)
    index, count = (int(match[1]), int(match[2])) if match else (0, 0)
    if not 1 <= index <= count <= MAX_SHARDS:
        raise UsageError(f"--shard {text}: give I/N, shard I of N with 1 <= I <= N <= {MAX_SHARDS}, e.g. --shard 1/4")
    return Shard(index, count)


def recorded_seconds(loaded: LoadedContract) -> tuple[dict[tuple[str, str], float], str | None]:
    """Seconds per ("entry"|"control", name) in the newest receipt of the whole contract beside it, and that
    receipt's path; ({}, None) when there is none."""
    receipt, source = newest_whole_receipt(loaded.path)
    return row_seconds(receipt), source


def unit_costs(loaded: LoadedContract, tasks: list[Task], recorded: dict[tuple[str, str], float]) -> dict[str, float]:
    """Expected seconds of each entry's unit: recorded seconds of its entry and controls where there are some,
    else weight x gate runs, scaled to seconds by the pieces that have recorded ones."""
    pieces = _pieces(tasks)
    guess = {key: max(weight(loaded.entry(unit)), 1) * runs for key, (unit, runs) in pieces.items()}
    scale = _scale(guess, recorded)
    costs: dict[str, float] = {}
    for key, (unit, _) in pieces.items():
        costs[unit] = costs.get(unit, 0.0) + (recorded[key] if key in recorded else guess[key] * scale)
    return costs


def _pieces(tasks: list[Task]) -> dict[tuple[str, str], tuple[str, int]]:
    """(kind, name) -> (its unit's entry, gate runs), in plan order."""
    pieces: dict[tuple[str, str], tuple[str, int]] = {}
    for task in tasks:
        runs = pieces.get((task.kind, task.name), (task.entry, 0))[1]
        pieces[(task.kind, task.name)] = (task.entry, runs + len(task.gates))
    return pieces


def _scale(guess: dict[tuple[str, str], int], recorded: dict[tuple[str, str], float]) -> float:
    """Seconds per unit of guessed weight, from the pieces that have recorded seconds (1.0 where none has)."""
    known = [key for key in guess if key in recorded]
    return (sum(recorded[k] for k in known) / sum(guess[k] for k in known) if known else 0.0) or 1.0


def assign(costs: dict[str, float], count: int) -> list[list[str]]:
    """Longest processing time first: each unit, heaviest first (ties by name), to the least loaded shard (ties
    to the lowest number); the units of each shard in that order."""
    loads = [0.0] * count
    shards: list[list[str]] = [[] for _ in range(count)]
    for name in sorted(costs, key=lambda n: (-costs[n], n)):
        least = min(range(count), key=lambda i: (loads[i], i))
        shards[least].append(name)
        loads[least] += costs[name]
    return shards


@dataclass
class ShardPlan:
    """One shard's tasks, what its receipt records, and a line saying what it took."""

    tasks: list[Task]
    covers: dict
    line: str


def shard_tasks(loaded: LoadedContract, tasks: list[Task], shard: Shard) -> ShardPlan:
    """The tasks of `shard` out of the whole run's `tasks`; covers: the shard, the shard number of every entry
    and control of the whole run in plan order (`split`), and the names this shard covers."""
    recorded, source = recorded_seconds(loaded)
    costs = unit_costs(loaded, tasks, recorded)
    number = {name: i + 1 for i, names in enumerate(assign(costs, shard.count)) for name in names}
    mine = [t for t in tasks if number[t.entry] == shard.index]
    covered = {kind: list(dict.fromkeys(t.name for t in mine if t.kind == kind)) for kind in ("entry", "control")}
    share = _share(costs, number, shard.index)
    line = (f"--shard {shard}: {len(covered['entry'])} of {len(loaded.entries)} entries and "
            f"{len(covered['control'])} of {len(loaded.controls)} controls, {share:.0%} of the expected time "
            f"(from {source or 'case sizes: no receipt of the whole contract yet'})")
    covers = {"shard": str(shard), "split": _split(tasks, number),
              "covered": {"entries": covered["entry"], "controls": covered["control"]}}
    return ShardPlan(mine, covers, line)


def _share(costs: dict[str, float], number: dict[str, int], index: int) -> float:
    """The share of the expected seconds that shard `index` takes."""
    return sum(costs[n] for n in number if number[n] == index) / (sum(costs.values()) or 1.0)


def _split(tasks: list[Task], number: dict[str, int]) -> dict[str, list[list]]:
    """The shard number of every entry and control of the whole run, in plan order."""
    return {key: [[name, number[entry]] for name, entry in dict.fromkeys((t.name, t.entry) for t in tasks
                                                                         if t.kind == kind)]
            for kind, key in (("entry", "entries"), ("control", "controls"))}
