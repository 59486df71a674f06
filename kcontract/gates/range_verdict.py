"""A range gate's verdict from its counts, and the join of results a gate's cases gave in separate tasks (a heavy
gate split by case runs its cases side by side; its row holds their join)."""

from __future__ import annotations

from kcontract.gates.base import GateResult, judged


def verdict(r: GateResult) -> GateResult:
    """Passed, message and decided share from the counts."""
    judged(r, "outputs outside their range or not bit-equal where decided")
    r.facts["decided_pct"] = round(100.0 * r.decided / r.checked, 2) if r.checked else 0.0
    return r


def trimmed(r: GateResult) -> GateResult:
    """The counts per output and per case kept only where there are several."""
    for key in ("by_output", "by_case"):
        if key in r.facts and len(r.facts[key] or {}) <= 1:
            del r.facts[key]
    return r


def joined(a: GateResult, b: GateResult) -> GateResult:
    """One range gate's results over disjoint cases (each a task of one case, with its counts per output and
    case) as the result one task running them all gives: counts added, the first failing result's worst, causes
    and replay, numeric facts at their largest, seconds and stage seconds added, memory at its largest."""
    worst = a if a.worst is not None else b
    facts = {**b.facts, **a.facts}
    for key in set(a.facts) & set(b.facts):
        if all(isinstance(f[key], (int, float)) and not isinstance(f[key], bool) for f in (a.facts, b.facts)):
            facts[key] = max(a.facts[key], b.facts[key])
    facts["by_output"] = _added(a.facts.get("by_output") or {}, b.facts.get("by_output") or {})
    facts["by_case"] = {**(a.facts.get("by_case") or {}), **(b.facts.get("by_case") or {})}
    counts = {k: getattr(a, k) + getattr(b, k) for k in ("checked", "decided", "bit_equal", "within", "failures")}
    result = GateResult(gate=a.gate, passed=False, **counts, worst=worst.worst, replay=worst.replay,
                        causes=tuple(dict.fromkeys(a.causes + b.causes)), facts=facts,
                        seconds=a.seconds + b.seconds, profile=_added_profiles(a.profile, b.profile))
    return verdict(result)


def _added(a: dict, b: dict) -> dict:
    """Nested counts added key by key."""
    out = dict(a)
    for key, value in b.items():
        out[key] = _added(out.get(key) or {}, value) if isinstance(value, dict) else out.get(key, 0) + value
    return out


def _added_profiles(a: dict, b: dict) -> dict:
    """Two gate profiles as one: stage seconds and cache counts added, memory (`_mb`) at its largest."""
    out = dict(a)
    for key, value in b.items():
        if key.endswith("_mb"):
            out[key] = max(out.get(key, 0), value)
        elif isinstance(value, dict):
            out[key] = _added(out.get(key) or {}, value)
        elif isinstance(value, (int, float)):
            out[key] = round(out.get(key, 0) + value, 3)
    return out
