"""On a GPU: a loaded function's attributes must match its launch record for that SM and toolchain."""

from __future__ import annotations

from pathlib import Path

from kcontract.records.records import read_json, record_path
from kcontract.problem import smem_on

# attribute names as CuPy's Function.attributes gives them, and cudaFuncAttributes' spellings
_ALIASES = {
    "numRegs": "num_regs", "sharedSizeBytes": "shared_size_bytes", "localSizeBytes": "local_size_bytes",
    "maxThreadsPerBlock": "max_threads_per_block", "binaryVersion": "binary_version",
}


def record_row(root: Path, toolchain: str, entry: str, role: str, sm: str) -> dict | None:
    """One symbol's record on one SM, with its launch shape, mangled name and SM folded in; None if absent."""
    record = read_json(record_path(root, toolchain, entry)) or {}
    kernel = record.get("kernels", {}).get(role)
    row = (kernel or {}).get("sms", {}).get(sm)
    if row is None:
        return None
    return {**row, "sm": sm, "threads": kernel["threads"], "dynamic_smem": smem_on(kernel["dynamic_smem"], sm),
            "mangled": kernel["mangled"]}


def compare_loaded_attributes(record: dict, func_attributes: dict) -> list[str]:
    """Mismatches between a record row and a loaded function's attributes; empty when they agree."""
    attrs = {_ALIASES.get(k, k): v for k, v in func_attributes.items()}
    found = []
    for attr, field in (("num_regs", "registers"), ("shared_size_bytes", "static_smem"),
                        ("local_size_bytes", "stack")):
        if attr not in attrs:
            found.append(f"the loaded function reports no {attr}")
        elif int(attrs[attr]) != int(record[field]):
            found.append(f"{field}: record {record[field]}, loaded function {attrs[attr]} ({attr})")
    threads, limit = record.get("threads"), attrs.get("max_threads_per_block")
    if threads is not None and limit is not None and int(threads) > int(limit):
        found.append(f"threads: the launch's {threads} exceed the loaded function's max_threads_per_block {limit}")
    sm, binary = record.get("sm"), attrs.get("binary_version")
    if sm is not None and binary is not None and int(binary) != int("".join(c for c in sm if c.isdigit())):
        found.append(f"binary_version: loaded {binary}, record is for {sm}")
    return found
