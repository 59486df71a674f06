"""The base revision's contract as a review needs it: its CUDA entries' names and its parsed YAML (to tell a
changed node), and, where this kcontract loads it, the loaded contract whose entries time the base's calls."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from kcontract.contract.loaded import LoadedContract
from kcontract.contract.loader import load_contract
from kcontract.contract.yaml_lines import load_yaml
from kcontract.errors import KContractError
from kcontract.receipts.depends import digest_of, node_in
from kcontract.review.changes import EntryKernel
from kcontract.sassdiff.kernels import contract_kernels


@dataclass
class BaseContract:
    """The base's contract: loaded (None where it is absent or this kcontract does not load it), its YAML, the
    names of its CUDA entries, and notes on what could not be read."""

    loaded: LoadedContract | None = None
    raw: dict = field(default_factory=dict)
    cuda_entries: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)


def base_contract(path: Path, shown: str) -> BaseContract:
    """The contract at `path` in the base's tree (`shown`: how messages name it)."""
    if not path.is_file():
        return BaseContract(notes=[f"{shown} does not exist: every entry is new"])
    saved = list(sys.path)
    try:
        loaded = load_contract(str(path), import_kernels=False)
        return BaseContract(loaded, loaded.raw, {e.name for e in loaded.entries if e.kernel.compiled is not None})
    except KContractError as error:
        return _lenient(path, shown, error)
    finally:
        sys.path[:] = saved


def _lenient(path: Path, shown: str, why: KContractError) -> BaseContract:
    """A base contract this kcontract does not load: its YAML and CUDA entries read as sass-diff reads them; its
    calls cannot be made, so they are timed on the head only."""
    note = f"{shown} does not load with this kcontract ({why.message}): calls are timed on the head only"
    try:
        found = contract_kernels(path, shown)
        raw = load_yaml(shown, path.read_text()).data
    except KContractError as error:
        return BaseContract(notes=[note, f"{shown}: {error.message}: every entry counts as new"])
    names = {use.name for use in (found[1] if found else []) if use.owner == "entry"}
    return BaseContract(None, raw if isinstance(raw, dict) else {}, names, [note])


def entry_kernels(loaded, builds, base: BaseContract) -> list[EntryKernel]:
    """Each CUDA entry of the head's contract as sass-diff names its kernel, against the base's contract."""
    found = []
    for entry in loaded.entries:
        compiled = entry.kernel.compiled
        if compiled is None:
            continue
        moved = digest_of(node_in(base.raw, "entry", entry.name)) != digest_of(node_in(loaded.raw, "entry", entry.name))
        found.append(EntryKernel(entry.name, compiled.source, builds.unit(compiled).shown,
                                 tuple(compiled.symbols.values()), entry.name in base.cuda_entries, moved))
    return found
