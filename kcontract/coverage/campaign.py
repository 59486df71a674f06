"""A coverage campaign: each CUDA entry's source instrumented once, a contract of stand-ins (one per entry and
launching gate, the probes as a patch of the production source, as controls and mutants are), the probes each
entry's instantiations can reach, and the probes its cases ran.

Prepared on any machine with the toolchain (patches, the contract and the PTX under the compile cache's
`coverage/`), run on a GPU through the ordinary runner, so the cases' inputs and references come from the cache.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from kcontract.builds.builds import Builds
from kcontract.cachedir import cache_root
from kcontract.contract.loader import load_contract
from kcontract.contract.patches import make as make_patch
from kcontract.contract.paths import resolve_source
from kcontract.contract.standins import source_label, standin_document, standin_entry
from kcontract.coverage.instrument import instrument
from kcontract.coverage.reach import reachable
from kcontract.gatetable import launching

PROBE_TIMEOUT = 600.0  # seconds a gate of an instrumented kernel may take (every block and branch notes itself)


@dataclass
class SourceProbes:
    """One instrumented source: its probes, the probe of each code line, its `if`s, and its lines' text."""

    label: str
    sha256: str
    kinds: list[str]  # per probe: block, then or else
    lines: dict[int, int]  # code line -> probe
    branches: list[list[int]]  # [line, then probe, else probe] per `if`
    text: dict[int, str]  # code line -> its source text, for the report


@dataclass
class EntryProbes:
    """What one entry's instantiations can reach, and what its cases ran (None: not run yet)."""

    entry: str
    source: str
    reachable: list[int]
    hits: list[int] | None = None
    failed: list[str] = field(default_factory=list)  # stand-ins that did not run to their end, and why


@dataclass
class Campaign:
    """The probes of every source and entry, for one SM."""

    sm: str
    seed: int
    sources: dict[str, SourceProbes] = field(default_factory=dict)
    entries: dict[str, EntryProbes] = field(default_factory=dict)


def workdir(loaded) -> Path:
    """Where a contract's coverage stand-ins live: beside the compile cache, so a GPU machine gets them too."""
    return cache_root(loaded.path) / "coverage"


def standin_name(entry: str, gate: int) -> str:
    return f"cov_{entry}_g{gate}"


def prepare(loaded, names: list[str], sm: str) -> Campaign:
    """Instrument each entry's source, write the stand-ins' contract, and find each entry's reachable probes."""
    here = workdir(loaded)
    shutil.rmtree(here, ignore_errors=True)
    here.mkdir(parents=True)
    base = Path(loaded.path).resolve().parent
    campaign = Campaign(sm, loaded.seed)
    patches: dict[str, str] = {}
    for name in names:
        entry = loaded.entry(name)
        label = entry.kernel.cuda.source
        if label not in campaign.sources:
            original = resolve_source(base, label).read_text()
            probes = instrument(original)
            patch = f"{len(patches):02d}_{Path(label).stem}.patch"
            (here / patch).write_text(make_patch(original, probes.text, source_label(loaded, entry, here)))
            patches[label] = patch
            text = original.splitlines()
            campaign.sources[label] = SourceProbes(label, hashlib.sha256(original.encode()).hexdigest(),
                                                   [p.kind for p in probes.probes], dict(probes.lines),
                                                   [list(b) for b in probes.branches],
                                                   {n: text[n - 1].strip() for n in probes.lines})
    contract = write_contract(loaded, names, here, patches, sm)
    standins = load_contract(str(contract), import_kernels=False)
    builds = Builds.of(standins)
    for name in names:
        control = standins.control(standin_name(name, _first_gate(loaded.entry(name))))
        expressions = loaded.entry(name).launched(control.kernel.cuda.symbols)
        campaign.entries[name] = EntryProbes(name, loaded.entry(name).kernel.cuda.source,
                                             sorted(reachable(builds, control.kernel.cuda, expressions, sm)))
    save(campaign, here)
    return campaign


def _first_gate(entry) -> int:
    return next(g for g in launching() if g in entry.gates)


def write_contract(loaded, names: list[str], here: Path, patches: dict[str, str], sm: str) -> Path:
    """Each entry beside its stand-ins: per launching gate, a control whose patch is the source's probes."""
    entries = [loaded.entry(name) for name in names]
    document = {
        **standin_document(loaded, here, sm),
        "entries": [standin_entry(loaded, entry, here) for entry in entries],
        "controls": [{"name": standin_name(entry.name, gate), "entry": entry.name, "gate": gate,
                      "timeout": PROBE_TIMEOUT, "fault": "coverage probes", "patch": patches[entry.kernel.cuda.source]}
                     for entry in entries for gate in launching() if gate in entry.gates],
    }
    path = here / "contract.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=200))
    return path


def judge_runs(campaign: Campaign, outcomes: list) -> None:
    """Each entry's hits: the union of the probes its stand-ins' launches ran."""
    for outcome in outcomes:
        name = outcome.task.entry
        entry = campaign.entries.get(name)
        if entry is None:
            continue
        probes = (outcome.kernel or {}).get("coverage")
        if outcome.status != "ran" or probes is None:
            entry.failed.append(f"{outcome.task.name}: {outcome.status}{': ' + outcome.detail if outcome.detail else ''}")
        entry.hits = sorted(set(entry.hits or []) | set(probes or []))


def save(campaign: Campaign, here: Path) -> None:
    """The campaign's state beside its stand-ins."""
    (here / "campaign.json").write_text(json.dumps(asdict(campaign), indent=1) + "\n")


def load(here: Path) -> Campaign | None:
    """A prepared campaign, or None."""
    try:
        data = json.loads((here / "campaign.json").read_text())
    except (OSError, ValueError):
        return None
    sources = {k: SourceProbes(**{**v, "lines": {int(n): p for n, p in v["lines"].items()},
                                  "text": {int(n): t for n, t in v["text"].items()}})
               for k, v in data["sources"].items()}
    return Campaign(data["sm"], data["seed"], sources, {k: EntryProbes(**v) for k, v in data["entries"].items()})
