"""Coverage judged: per entry, the code lines and `if` outcomes its instantiations can reach, those its cases
executed, those argued unreachable in the contract, and whether it meets its floor; per source, the lines no
entry executes."""

from __future__ import annotations

from dataclasses import dataclass, field

from kcontract.coverage.campaign import Campaign, EntryProbes, SourceProbes

SHOWN_LINES = 12  # missed lines a report line names before "and N more"


@dataclass
class EntryReport:
    """One entry's coverage."""

    entry: str
    source: str
    reachable: list[int]  # code lines its instantiations reach
    executed: list[int]
    missed: list[int]  # reachable, not executed, not argued
    argued: list[int]  # reachable, not executed, argued in the contract
    elsewhere: int  # code lines of the source this entry's instantiations never reach
    branches: tuple[int, int]  # (outcomes taken, outcomes reachable)
    missed_branches: list[str] = field(default_factory=list)  # "line 104: else"
    floor: float | None = None
    problems: list[str] = field(default_factory=list)  # a floor missed, an argument that no longer holds
    ran: bool = True

    @property
    def pct(self) -> float:
        """Executed share of the reachable lines that are not argued out."""
        counted = len(self.reachable) - len(self.argued)
        return 100.0 * len(self.executed) / counted if counted else 100.0

    def as_dict(self) -> dict:
        return {"entry": self.entry, "source": self.source, "lines": {"reachable": len(self.reachable),
                "executed": len(self.executed), "argued": len(self.argued), "elsewhere": self.elsewhere,
                "pct": round(self.pct, 1)}, "branches": {"taken": self.branches[0], "reachable": self.branches[1]},
                "missed_lines": self.missed, "argued_lines": self.argued, "missed_branches": self.missed_branches,
                "floor": self.floor,
                "problems": self.problems}


def entry_report(campaign: Campaign, probes: EntryProbes, floor=None) -> EntryReport:
    """Lines and branches of one entry, judged against its floor and its argued lines."""
    source = campaign.sources[probes.source]
    reach, hits = set(probes.reachable), set(probes.hits or [])
    reachable = sorted(n for n, p in source.lines.items() if p in reach)
    executed = [n for n in reachable if source.lines[n] in hits]
    argued_lines = {a.line: a.reason for a in (floor.argued if floor else [])}
    not_run = [n for n in reachable if n not in executed]
    argued = [n for n in not_run if n in argued_lines]
    outcomes = [(line, kind, p) for line, then, other in source.branches for kind, p in (("then", then), ("else", other))
                if p in reach]
    report = EntryReport(probes.entry, probes.source, reachable, executed, [n for n in not_run if n not in argued],
                         argued, len(source.lines) - len(reachable),
                         (sum(1 for *_, p in outcomes if p in hits), len(outcomes)),
                         [f"line {line}: {kind}" for line, kind, p in outcomes if p not in hits],
                         floor.lines if floor else None, ran=probes.hits is not None)
    for line, reason in sorted(argued_lines.items()):
        if line in executed:
            report.problems.append(f"line {line} is argued unreachable ({reason}) but a case executes it: drop the "
                                   f"argument")
        elif line not in reachable:
            report.problems.append(f"line {line} is argued unreachable ({reason}) but it is no code line this "
                                   f"entry's instantiations reach: drop or move the argument")
    if floor is not None and report.ran and report.pct + 1e-9 < floor.lines:
        report.problems.append(f"{report.pct:.1f} % of its reachable lines executed, below its floor of "
                               f"{floor.lines:g} %: {missed_text(source, report.missed)}")
    return report


def missed_text(source: SourceProbes, lines: list[int]) -> str:
    """`lines 120 (if (v < count) ...), 131 (...)` and how many more."""
    shown = [f"{n} ({source.text.get(n, '')[:60]})" for n in lines[:SHOWN_LINES]]
    more = len(lines) - SHOWN_LINES
    return "lines " + ", ".join(shown) + (f" and {more} more" if more > 0 else "") if lines else "no line"


def source_gaps(campaign: Campaign, reports: list[EntryReport]) -> dict[str, list[int]]:
    """Per source, the code lines some entry reaches and no entry executes (argued ones left out)."""
    gaps = {}
    for label in campaign.sources:
        mine = [r for r in reports if r.source == label]
        reached = {n for r in mine for n in r.reachable}
        done = {n for r in mine for n in r.executed} | {n for r in mine for n in r.argued}
        gaps[label] = sorted(reached - done)
    return gaps
