"""Receipt checks: every receipt beside a contract must be valid and current; `require_receipt` demands one.

A receipt (receipts/<contract>-<device>.json) names its contract, covers all of it (one whole run, or the shards
of one joined by `kcontract receipt merge`), lists the sha256 of every file the run depended on, the checker
core's digest and the digest of each family it used. It is stale when any of those changed (another family's
edits leave it current); invalid when it lists no sources, covers part of its contract (a lone shard's receipt
among them), or ran without a GPU although the contract has CUDA kernels. `check` judges the receipts of its
own contract, so contracts sharing a folder stay independent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from kcontract.identity import PACKAGE, below, core_digest, family_digest, file_sha256

RECEIPTS_DIR = "receipts"
KIND = "kcontract-run"


def receipt_name(contract: Path, device: str) -> str:
    """`receipts/contract-h200.json`: what the receipt covers and where it ran."""
    return f"{RECEIPTS_DIR}/{contract.stem}-{device}.json"


@dataclass
class ReceiptReport:
    """Each receipt checked: how many, and what is stale, invalid or missing."""

    receipts: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # one line per problem, "receipts/x.json: ..."
    missing: bool = False  # the contract requires a receipt and none current covers it

    @property
    def passed(self) -> bool:
        """No receipt is stale or invalid, and a required one is there."""
        return not self.stale

    def summary(self) -> str:
        """`no receipts`, `2 receipts current`, or `1 of 2 receipts stale or invalid`."""
        n = len(self.receipts)
        bad = len({line.split(":", 1)[0] for line in self.stale if line.startswith(RECEIPTS_DIR)})
        text = "no receipts" if not n else (f"{n} receipt{'s' if n != 1 else ''} current" if not bad
                                            else f"{bad} of {n} receipts stale or invalid")
        return text + ("; the contract requires one" if self.missing else "")


def check_receipts(loaded) -> ReceiptReport:
    """Check every receipt of this contract beside it; one that sets `require_receipt` needs a current one."""
    base = Path(loaded.path).resolve().parent
    report = ReceiptReport()
    folder = base / RECEIPTS_DIR
    contract_rel = Path(loaded.path).resolve().relative_to(base).as_posix()
    covered = False
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        shown = f"{RECEIPTS_DIR}/{path.name}"
        try:
            data = json.loads(path.read_text())
        except ValueError as error:
            report.receipts.append(shown)
            report.stale.append(f"{shown}: not valid JSON ({error})")
            continue
        if isinstance(data, dict) and data.get("kind") == KIND and data.get("contract") != contract_rel:
            continue  # another contract's receipt: its own `check` judges it
        report.receipts.append(shown)
        problems = _problems(data, base, loaded, shown)
        report.stale += [f"{shown}: {p}" for p in problems]
        covered = covered or not problems
    if not covered and loaded.model.require_receipt:
        report.missing = True
        report.stale.append(f"{contract_rel} requires a receipt and no current one covers it: run "
                            f"`kcontract run --contract {contract_rel} --receipt {receipt_name(Path(contract_rel), '<gpu>')}`"
                            f" on a GPU and commit the receipt")
    return report


def rerun(loaded, receipt: str = "FILE") -> str:
    """What to do about a stale receipt: the command that makes it anew, where it must run, and committing it."""
    contract = Path(loaded.path).name
    where = " on a GPU" if _has_cuda(loaded) else ""
    return f"rerun `kcontract run --contract {contract} --receipt {receipt}`{where} and commit it"


def checker_problems(recorded: dict, loaded, receipt: str = "FILE", changed: list[str] = ()) -> list[str]:
    """Where the checker that made a receipt differs from this one: its core, or a family the contract uses
    (`changed`: the checker's files the receipt lists that changed, for the message)."""
    fix = rerun(loaded, receipt)
    recorded = recorded if isinstance(recorded, dict) else {}
    problems = []
    files = f"; changed: {', '.join(changed[:3])}{f' and {len(changed) - 3} more' if len(changed) > 3 else ''}" \
        if changed else ""
    if recorded.get("sha256") != core_digest():
        problems.append(f"made by another kcontract core (sha256 {str(recorded.get('sha256'))[:12]}, now "
                        f"{core_digest()[:12]}{files}): {fix}")
        files = ""
    then = recorded.get("families") or {}
    for cls in sorted({type(e.family) for e in loaded.entries}, key=lambda c: c.name):
        now = family_digest(cls)
        if then.get(cls.name) != now:
            problems.append(f"family {cls.name} changed since the receipt (sha256 {str(then.get(cls.name))[:12]}, now "
                            f"{now[:12]}{files}): {fix}")
    return problems


def _has_cuda(loaded) -> bool:
    return any(e.kernel.cuda is not None for e in loaded.entries)


def _problems(data, base: Path, loaded, receipt: str) -> list[str]:
    """What makes one receipt invalid or stale, one phrase each."""
    fix = rerun(loaded, receipt)
    if not isinstance(data, dict) or data.get("kind") != KIND:
        return [f"not a kcontract receipt (no \"kind\": \"{KIND}\"): {fix}"]
    sources = data.get("sources")
    if not isinstance(sources, dict) or not sources or not all(isinstance(k, str) and isinstance(v, str)
                                                               for k, v in sources.items()):
        return [f"invalid: it lists no sources with their sha256, so it attests nothing: {fix}"]
    problems, own = [], []
    for source, sha in sorted(sources.items()):
        target = base / source
        if below(target.resolve(), PACKAGE):  # the checker's own files: named once, with its digests
            if not target.is_file() or file_sha256(target) != sha:
                own.append(source)
            continue
        if not target.is_file():
            problems.append(f"{source} no longer exists: {fix}")
        elif (now := file_sha256(target)) != sha:
            problems.append(f"{source} changed since the receipt (sha256 {sha[:12]}, now {now[:12]}): {fix}")
    if data.get("exit_code") != 0:
        problems.append(f"records a run that did not pass (exit code {data.get('exit_code')}: "
                        f"{str(data.get('summary', 'no summary'))[:160]}): fix it, then {fix}")
    problems += checker_problems(data.get("checker"), loaded, receipt, own)
    contract = data.get("contract")
    covers = data.get("covers") or {}
    want = {"entries": len(loaded.entries), "controls": len(loaded.controls)}
    got = {k: covers.get(k) for k in want}
    if covers.get("shard"):
        problems.append(f"invalid: shard {covers['shard']} of {contract}, not the whole contract: merge every shard's "
                        f"receipt with `kcontract receipt merge A.json B.json ... -o "
                        f"{receipt_name(Path(loaded.path), '{gpu}')}` and commit the merged receipt instead")
    elif got != want or covers.get("partial"):
        problems.append(f"invalid: covers {got['entries']} entries and {got['controls']} controls"
                        f"{' (a partial run)' if covers.get('partial') else ''}, {contract} has {want['entries']} "
                        f"and {want['controls']}: {fix}")
    if _has_cuda(loaded) and data.get("device") != "gpu":
        problems.append(f"invalid: ran on {data.get('device', 'an unknown device')}, and {contract} has CUDA "
                        f"kernels: {fix}")
    return problems
