"""The CUDA kernels and targets a revision's contract names, read leniently so old revisions still parse."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from kcontract.contract.model import DEFAULT_TARGETS, CudaKernel
from kcontract.errors import ContractError
from kcontract.toolchain.units import KernelUse, uses_of


def contract_kernels(contract: Path, shown: str) -> tuple[list[str], list[KernelUse]] | None:
    """(targets, CUDA kernel uses) of a contract file; None if the revision has no such file."""
    if not contract.is_file():
        return None
    try:
        data = yaml.safe_load(contract.read_text())
    except yaml.YAMLError as error:
        raise ContractError(shown, None, "", f"valid YAML ({error})") from None
    data = data if isinstance(data, dict) else {}
    targets = data.get("targets") or list(DEFAULT_TARGETS)
    uses: list[KernelUse] = []
    base = contract.parent
    for kind, owner in (("entries", "entry"), ("controls", "control")):
        for i, item in enumerate(data.get(kind) or []):
            cuda = ((item or {}).get("kernel") or {}).get("cuda") if isinstance(item, dict) else None
            if cuda is None:
                continue
            try:
                kernel = CudaKernel.model_validate(cuda)
            except ValidationError as error:
                raise ContractError(shown, None, f"{kind}[{i}].kernel.cuda",
                                    f"source, symbols and options ({error.errors()[0]['msg']})") from None
            uses += uses_of(owner, str(item.get("name", f"{kind}[{i}]")), kernel, base)
    return [str(t) for t in targets], uses
