"""Each row of a receipt judged against the contract and files as they stand now.

A row is current (its node, seed and files unchanged, or only CUDA files changed and its machine code did not),
stale (a dependency changed), missing (an entry or control without a row), orphaned (a row whose entry or
control is gone) or failed (its outcome did not pass). Apart from its state, a row may have been judged by an
earlier checker: kcontract's core or the row's family changed since.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kcontract.receipts.depends import row_checker, row_depends
from kcontract.receipts.receipt import Receipt
from kcontract.receipts.rows import contract_keys

CURRENT, STALE, MISSING, ORPHANED, FAILED = "current", "stale", "missing", "orphaned", "failed"
STATES = (CURRENT, STALE, MISSING, ORPHANED, FAILED)


@dataclass
class RowJudgement:
    """One row's state, what made it so, and whether an earlier checker judged it."""

    key: tuple[str, str]
    state: str
    cause: str = ""  # stale: what changed; failed: what failed
    machine: str = ""  # current only because its machine code is unchanged: what changed and the comparison
    earlier: str = ""  # the checker changed since: how

    @property
    def shown(self) -> str:
        """`entry_name` or `control control_name`."""
        kind, name = self.key
        if not name:
            return "a row without a name"
        return name if kind == "entry" else f"control {name}"


def judge_rows(loaded, receipt: Receipt, machine=None, recheck: bool = False) -> list[RowJudgement]:
    """Every row the contract calls for, then every orphaned row; `machine` (receipts.machine.MachineCode) decides
    rows whose only change is in CUDA files, else they are stale; with `recheck` (rows an earlier kcontract
    judged run again anyway), not for those rows."""
    rows = receipt.rows()
    wanted = contract_keys(loaded)
    facts = {key: _facts(loaded, key, rows[key]) for key in wanted if key in rows}
    if machine is not None:  # every comparison's kernels built in two batches, not two per row
        machine.prepare([ask for key, known in facts.items()
                         for ask in [_machine_ask(loaded, key, known, recheck)] if ask is not None])
    judged = [judge_row(loaded, key, rows[key], machine, recheck, facts[key]) if key in rows
              else RowJudgement(key, MISSING) for key in wanted]
    return judged + [RowJudgement(key, ORPHANED) for key in rows if key not in set(wanted)]


@dataclass
class _Facts:
    """What a row recorded against the contract now: its dependencies then and now, what changed, its checker."""

    row: dict
    then: dict
    changes: list[str]
    files: list[str]
    earlier: str


def _facts(loaded, key: tuple[str, str], row: dict) -> _Facts:
    kind, name = key
    then, now = _mapping(row.get("depends")), row_depends(loaded, kind, name)
    return _Facts(row, then, _changes(loaded, key, then, now), _changed_files(then, now),
                  _earlier(row.get("checker"), row_checker(loaded, kind, name)))


def judge_row(loaded, key: tuple[str, str], row: dict, machine=None, recheck: bool = False,
              facts: _Facts | None = None) -> RowJudgement:
    """One present row (`facts`: what `_facts` found of it, where already known); with `recheck`, a row an
    earlier kcontract judged is not compared by machine code (it runs again whatever the comparison finds, and
    the comparison compiles the kernel at two revisions)."""
    known = facts if facts is not None else _facts(loaded, key, row)
    judgement = RowJudgement(key, CURRENT, earlier=known.earlier)
    if known.changes:
        ask = _machine_ask(loaded, key, known, recheck) if machine is not None else None
        verdict = machine.compare(*ask) if ask is not None else None
        if verdict is not None and verdict.same:
            judgement.machine = f"{', '.join(known.files)} changed, {verdict.text}"
        else:
            judgement.state = STALE
            judgement.cause = "; ".join(known.changes + ([verdict.text] if verdict is not None and verdict.text
                                                         else []))
            return judgement
    failure = _failure(loaded, key, row)
    if failure:
        judgement.state, judgement.cause = FAILED, failure
    return judgement


def _machine_ask(loaded, key: tuple[str, str], known: _Facts, recheck: bool) -> tuple | None:
    """(kernel, ran, recorded files) where the row's machine code decides it: only its CUDA files changed, and
    with `recheck` no earlier kcontract judged it (it runs again whatever the comparison finds); else None."""
    kind, name = key
    subject = loaded.entry(name) if kind == "entry" else loaded.control(name)
    if not known.changes or len(known.changes) != len(known.files) or subject.kernel.compiled is None:
        return None
    if recheck and known.earlier:
        return None
    return subject.kernel, _mapping(known.row.get("ran")), _mapping(known.then.get("files"))


def _changes(loaded, key, then: dict, now: dict) -> list[str]:
    """What changed since the row ran, a phrase each: seed, node, then files."""
    kind, name = key
    out = []
    if then.get("seed") != now["seed"]:
        out.append(f"the seed changed ({then.get('seed')}, now {now['seed']})")
    if then.get("node") != now["node"]:
        if kind == "control" and then.get("entry_node") not in (None, now.get("entry_node")):
            entry = loaded.control(name).entry
            out.append(f"its entry {entry}'s node at {_at(loaded, ('entry', entry))} changed")
        else:
            out.append(f"its node at {_at(loaded, key)} changed")
    old, new = _mapping(then.get("files")), now["files"]
    for path in sorted(set(old) | set(new)):
        if path not in new:
            out.append(f"{path} is no longer among its files")
        elif path not in old:
            out.append(f"{path} is new among its files")
        elif old[path] != new[path]:
            out.append(f"{path} changed (sha256 {str(old[path])[:12]}, now {new[path][:12]})")
    return out


def _changed_files(then: dict, now: dict) -> list[str]:
    """The files whose sha256 differs, or which joined or left the row's files."""
    old, new = _mapping(then.get("files")), now["files"]
    return [p for p in sorted(set(old) | set(new)) if old.get(p) != new.get(p)]


def _mapping(value) -> dict:
    """A row's field where it is a mapping, else an empty one (a hand-edited or damaged row judges stale)."""
    return value if isinstance(value, dict) else {}


def _at(loaded, key) -> str:
    """`contract.yaml:292`: where an entry's or control's node starts."""
    kind, name = key
    index = (loaded.entry(name) if kind == "entry" else loaded.control(name)).index
    line = loaded.lines.get(f"{'entries' if kind == 'entry' else 'controls'}[{index}]")
    return f"{Path(loaded.path).name}{':' + str(line) if line else ''}"


def _earlier(then, now: dict) -> str:
    """How the checker that judged the row differs from this one ('' where it does not)."""
    then = then if isinstance(then, dict) else {}
    parts = []
    if then.get("core") != now["core"]:
        parts.append(f"core {str(then.get('core'))[:12]}, now {now['core'][:12]}")
    if then.get("family") != now["family"] or then.get("family_sha256") != now["family_sha256"]:
        parts.append(f"family {now['family']} {str(then.get('family_sha256'))[:12]}, now {now['family_sha256'][:12]}")
    return "; ".join(parts)


def _failure(loaded, key, row: dict) -> str:
    """What the row's outcome failed ('' where it passed): an entry red at a gate that is no known finding, a
    control not red at its planted gate, or a task that did not run to its end."""
    kind, name = key
    status = row.get("status")
    gates = _mapping(row.get("gates"))
    red = sorted(int(g) for g, r in gates.items() if isinstance(r, dict) and not r.get("passed"))
    if kind == "control":
        planted = loaded.control(name).gate
        if status != "ran":
            return f"{status}: {str(row.get('detail', ''))[:120]}"
        return "" if planted in red else f"not red at its planted gate {planted}"
    if status != "ran":
        return f"{status}: {str(row.get('detail', ''))[:120]}"
    if not gates:
        return "no gate results"
    known = {k.gate for k in loaded.known_findings if k.entry == name}
    unexplained = [g for g in red if g not in known]
    return f"red at gate {', '.join(map(str, unexplained))}" if unexplained else ""
