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
    missed_branches: list[str] = field(default_factory=list)  # "line 104: else": reachable, not taken, not argued
    argued_branches: list[str] = field(default_factory=list)  # reachable, not taken, argued in the contract
    floor: float | None = None
    branch_floor: float | None = None
    problems: list[str] = field(default_factory=list)  # a floor missed, an argument that no longer holds
    ran: bool = True

    @property
    def pct(self) -> float:
        """Executed share of the reachable lines that are not argued out."""
        counted = len(self.reachable) - len(self.argued)
        return 100.0 * len(self.executed) / counted if counted else 100.0

    @property
    def branch_pct(self) -> float:
        """Taken share of the reachable `if` outcomes that are not argued out."""
        counted = self.branches[1] - len(self.argued_branches)
        return 100.0 * self.branches[0] / counted if counted else 100.0

    def as_dict(self) -> dict:
        return {"entry": self.entry, "source": self.source, "lines": {"reachable": len(self.reachable),
                "executed": len(self.executed), "argued": len(self.argued), "elsewhere": self.elsewhere,
                "pct": round(self.pct, 1)}, "branches": {"taken": self.branches[0], "reachable": self.branches[1],
                "argued": len(self.argued_branches), "pct": round(self.branch_pct, 1)},
                "missed_lines": self.missed, "argued_lines": self.argued, "missed_branches": self.missed_branches,
                "argued_branches": self.argued_branches, "floor": self.floor, "branch_floor": self.branch_floor,
                "problems": self.problems}


def entry_report(campaign: Campaign, probes: EntryProbes, floor=None) -> EntryReport:
    """Lines and branches of one entry, judged against its floors and its argued lines and outcomes."""
    source = campaign.sources[probes.source]
    reach, hits = set(probes.reachable), set(probes.hits or [])
    reachable = sorted(n for n, p in source.lines.items() if p in reach)
    executed = [n for n in reachable if source.lines[n] in hits]
    argued_lines = floor.argued_lines if floor else {}
    argued_outcomes = floor.argued_outcomes if floor else {}
    not_run = [n for n in reachable if n not in executed]
    argued = [n for n in not_run if n in argued_lines]
    outcomes = {f"line {line}: {kind}": p for line, then, other in source.branches
                for kind, p in (("then", then), ("else", other)) if p in reach}
    not_taken = [name for name, p in outcomes.items() if p not in hits]
    report = EntryReport(probes.entry, probes.source, reachable, executed, [n for n in not_run if n not in argued],
                         argued, len(source.lines) - len(reachable), (len(outcomes) - len(not_taken), len(outcomes)),
                         [o for o in not_taken if o not in argued_outcomes],
                         [o for o in not_taken if o in argued_outcomes], floor.lines if floor else None,
                         floor.branches if floor else None, ran=probes.hits is not None)
    report.problems += _stale_arguments(argued_lines, executed, reachable, "line {} is", "a case executes it",
                                        "no code line this entry's instantiations reach")
    report.problems += _stale_arguments(argued_outcomes, [o for o in outcomes if o not in not_taken], list(outcomes),
                                        "{} is an `if` outcome", "a case takes it",
                                        "no `if` outcome this entry's instantiations reach")
    if floor is not None and report.ran and report.pct + 1e-9 < floor.lines:
        report.problems.append(f"{report.pct:.1f} % of its reachable lines executed, below its floor of "
                               f"{floor.lines:g} %: {missed_text(source, report.missed)}")
    if floor is not None and floor.branches is not None and report.ran and report.branch_pct + 1e-9 < floor.branches:
        report.problems.append(f"{report.branch_pct:.1f} % of its reachable `if` outcomes taken, below its floor of "
                               f"{floor.branches:g} %: {', '.join(report.missed_branches[:SHOWN_LINES])} taken by no "
                               f"case: add a case that takes them or argue them (`branch: then` or `else`)")
    return report


def _stale_arguments(argued: dict, done: list, reachable: list, what: str, ran: str, elsewhere: str) -> list[str]:
    """An argument that no longer holds: what it argues runs under some case, or the entry cannot reach it."""
    found = []
    for name, reason in sorted(argued.items(), key=str):
        if name in done:
            found.append(f"{what.format(name)} argued unreachable ({reason}) but {ran}: drop the argument")
        elif name not in reachable:
            found.append(f"{what.format(name)} argued unreachable ({reason}) but it is {elsewhere}: drop or move "
                         f"the argument")
    return found


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
