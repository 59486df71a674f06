"""Gate 1's decided fractions of two runs side by side, per entry and case, as a markdown table.

    python3 tools/decided_table.py WITH.json WITHOUT.json

WITH is a run (`kcontract run --json`, or a receipt) of entries that declare their orders; WITHOUT the same
entries with the declarations taken out (gpu_run.sh's `undeclared` step writes one).
"""

from __future__ import annotations

import json
import sys


def per_case(document: dict) -> dict[tuple[str, str], dict[str, dict[str, int]]]:
    """(entry, case) -> output -> {checked, decided} from gate 1 of every entry."""
    found = {}
    for entry in document["entries"]:
        gate = entry["gates"].get("1")
        if not gate:
            continue
        facts = gate.get("facts") or {}
        cases = facts.get("by_case")
        if cases is None:  # one case: the totals are its counts
            cases = {"(all)": facts.get("by_output") or {"out": gate}}
        for case, outputs in cases.items():
            found[(entry["task"]["name"], case)] = outputs
    return found


def percent(counts: dict[str, int] | None) -> str:
    """Decided share of checked outputs, or a dash."""
    if not counts or not counts.get("checked"):
        return "-"
    return f"{100.0 * counts['decided'] / counts['checked']:.1f} %"


def table(with_orders: dict, without: dict) -> str:
    """One row per entry and case: out and part_o decided, with and without the declared orders."""
    a, b = per_case(with_orders), per_case(without)
    lines = ["| entry | case | out checked | out decided, declared | undeclared | part_o decided, declared | "
             "undeclared |", "|---|---|---|---|---|---|---|"]
    for key in sorted(a, key=lambda k: (k[0], k[1])):
        mine, theirs = a[key], b.get(key, {})
        checked = (mine.get("out") or {}).get("checked", 0)
        lines.append(f"| {key[0]} | {key[1]} | {checked:,} | {percent(mine.get('out'))} | "
                     f"{percent(theirs.get('out'))} | {percent(mine.get('part_o'))} | {percent(theirs.get('part_o'))} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    documents = [json.loads(open(path).read()) for path in argv]
    print(table(*documents))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
