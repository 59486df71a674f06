"""Paths a contract names (kernel sources, patches, header folders and files, folders): relative to the contract
file's folder, and, for the files a compile reads, inside the folders the contract may read from."""

from __future__ import annotations

from pathlib import Path

# the compiler options that name a path, and what it names: -I DIR, -IDIR, --include-path DIR|=DIR, -include FILE,
# --pre-include FILE|=FILE (NVRTC's spellings; a value may be the option's next item)
PATH_OPTIONS = {"-I": "folder", "--include-path": "folder", "-include": "file", "--pre-include": "file"}


def resolve_source(base: Path, label: str) -> Path:
    """A path from the contract, relative to the contract file's directory."""
    path = Path(label)
    return path if path.is_absolute() else (base / path)


def readable_folders(contract: str | Path, include: list[str]) -> list[Path]:
    """The folders a contract's kernel files may lie in: its own and those its `include:` names, links resolved."""
    base = Path(contract).resolve().parent
    return [base, *(resolve_source(base, folder).resolve() for folder in include)]


def inside(path: Path, folders: list[Path]) -> bool:
    """Whether `path`, its links resolved, lies in one of `folders` (themselves resolved)."""
    real = path.resolve()
    return any(real == folder or real.is_relative_to(folder) for folder in folders)


def option_paths(options: list[str] | tuple[str, ...]) -> list[tuple[int, str, str]]:
    """(index of the item that holds the path, `folder` or `file`, the path) for each option of PATH_OPTIONS."""
    found = []
    for i, option in enumerate(options):
        for name, kind in PATH_OPTIONS.items():
            if option == name and i + 1 < len(options):
                found.append((i + 1, kind, options[i + 1]))
            elif option.startswith(name + "=") and len(option) > len(name) + 1:
                found.append((i, kind, option[len(name) + 1:]))
            elif name == "-I" and option.startswith("-I") and len(option) > 2:
                found.append((i, kind, option[2:]))
    return found
