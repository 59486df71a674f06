"""Each compiled entry's mutation score in a receipt, judged against the floor: missing where the receipt holds
none of the entry's kernel source as it is, failing where it is below the floor."""

from __future__ import annotations

from kcontract.receipts.carried import entry_source_sha256
from kcontract.receipts.receipt import Receipt

MUTATION_FLOOR = 95.0  # % of a compiled entry's mutants (equivalents argued apart) its gates must kill


def mutation_findings(loaded, receipt: Receipt) -> tuple[list[str], list[tuple[str, str]]]:
    """The compiled entries with no mutation score of their kernel source as it is, and (entry, why) for each
    score of it below the floor."""
    unscored, low = [], []
    for entry in loaded.entries:
        source = entry_source_sha256(loaded, entry.name)
        if source is None:
            continue
        score = receipt.mutation_of(entry.name)
        pct = None if score is None or score.get("source_sha256") != source else score.get("score_pct")
        if pct is None:
            unscored.append(entry.name)
        elif pct + 1e-9 < MUTATION_FLOOR:
            low.append((entry.name, f"{entry.name}'s gates kill {pct:g} % of its mutants, below the floor of "
                                    f"{MUTATION_FLOOR:g} %: strengthen its cases or argue its equivalent survivors"))
    return unscored, low
