"""The records kind (gate 5): the kernel's registers, shared memory, spills and launch shape per SM match its
committed record, and no launch breaks an SM's limits beyond the baseline.

Counts: checked = symbol x SM rows compared with the record; failures = stale or missing rows plus limit
problems not in records/baseline.json.
"""

from __future__ import annotations

from kcontract.errors import KContractError
from kcontract.gates.base import GateResult, Offender
from kcontract.gates.context import GateContext
from kcontract.records.record_check import judge_kernel
from kcontract.records.records import UPDATE_HINT

def run(number: int, ctx: GateContext) -> GateResult:
    """Compare the kernel as built for every target SM (its job's build) with the entry's record and the SM
    limits."""
    if ctx.build is None:
        raise KContractError(f"{ctx.kernel.label}: gate {number} compares a CUDA kernel's build, and this task "
                             f"carries none")
    verdict = judge_kernel(ctx.loaded, ctx.entry, ctx.kernel, ctx.build, strict=ctx.strict_records)
    result = GateResult(gate=number, passed=verdict.passed, checked=len(verdict.rows))
    strict = verdict.findings if ctx.strict_records else []
    result.failures = (len(verdict.stale) + len(verdict.new_problems) + len(verdict.errors) + len(verdict.notes)
                       + len(strict))
    result.facts = {"limit_problems": len(verdict.problems), "new_limit_problems": len(verdict.new_problems),
                    "toolchain_findings": [] if strict else verdict.findings,
                    "unrecorded": sum(r.status == "unrecorded" for r in verdict.rows)}
    mismatches = ctx.loaded_attribute_mismatches() if ctx.kernel.compiled is not None else []
    result.failures += len(mismatches)
    result.passed = result.passed and not mismatches
    problems = ([f"{r.role} on {r.sm}: {r.status} record: {r.detail}" for r in verdict.stale] + verdict.notes
                + [f"new limit problem: {p}" for p in verdict.new_problems] + verdict.errors + mismatches
                + [f"{f} (--strict-records)" for f in strict])
    if problems:
        result.message = f"{len(problems)} problems: {problems[0]}" + (f" (and {len(problems) - 1} more)"
                                                                     if len(problems) > 1 else "")
        result.worst = Offender("records", {}, problems[0], f"a current record and no new limit problem "
                                                            f"({UPDATE_HINT} if the change is intended)")
    elif not verdict.rows:
        result.message = "checked zero symbol x SM rows: the gate proved nothing"
    ctx.progress(number, "records")
    result.replay = ctx.replay(number)
    return result
