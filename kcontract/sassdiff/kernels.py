"""The compiled kernels (CUDA and Triton) and targets a revision's contract names, read with the contract loader."""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import ValidationError

from kcontract.builds.triton import contract_triton_uses, triton_uses
from kcontract.contract.model import DEFAULT_TARGETS, CudaKernel, TritonKernel
from kcontract.contract.yaml_lines import load_yaml
from kcontract.errors import ContractError
from kcontract.toolchain.units import KernelUse, contract_uses, uses_of


def contract_kernels(contract: Path, shown: str) -> tuple[list[str], list] | None:
    """(targets, compiled kernel uses) of a contract file; None if the revision has no such file.

    The contract loader reads it (named kernels and symbol placeholders resolved); a revision whose contract
    the current schema rejects is read leniently in the same YAML dialect, so old revisions still compare.
    """
    if not contract.is_file():
        return None
    from kcontract.contract.loader import load_contract

    saved = list(sys.path)
    try:
        loaded = load_contract(str(contract), import_kernels=False)
        return loaded.targets, contract_uses(loaded) + contract_triton_uses(loaded)
    except ContractError as error:
        return _lenient(contract, shown, error)
    finally:
        sys.path[:] = saved


def _lenient(contract: Path, shown: str, why: ContractError) -> tuple[list[str], list]:
    """Targets and compiled kernels from the raw document (for contracts the current schema does not read)."""
    data = load_yaml(shown, contract.read_text()).data
    data = data if isinstance(data, dict) else {}
    targets = data.get("targets") or list(DEFAULT_TARGETS)
    uses: list[KernelUse] = []
    for kind, owner in (("entries", "entry"), ("controls", "control")):
        for i, item in enumerate(data.get(kind) or []):
            ref = item.get("kernel") if isinstance(item, dict) else None
            if isinstance(ref, str):  # a named kernel: its symbols need the entry's family to fill them
                cause = f"{why.path or 'file'}: {why.expected}"
                raise ContractError(shown, None, f"{kind}[{i}].kernel",
                                    f"a contract this kcontract reads (kernel {ref!r} is named, and the revision's "
                                    f"contract does not load: {cause}); if that revision is newer, run sass-diff "
                                    "from its checkout, whose kcontract reads both")
            for field, model, found in (("cuda", CudaKernel, uses_of), ("triton", TritonKernel, triton_uses)):
                given = ref.get(field) if isinstance(ref, dict) else None
                if not isinstance(given, dict):
                    continue
                try:
                    kernel = model.model_validate(given)
                except ValidationError as error:
                    raise ContractError(shown, None, f"{kind}[{i}].kernel.{field}",
                                        f"source, symbols and options ({error.errors()[0]['msg']})") from None
                uses += found(owner, str(item.get("name", f"{kind}[{i}]")), kernel, contract.parent)
    return [str(t) for t in targets], uses
