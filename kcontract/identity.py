"""What code a result depends on: the checker's core, and each family's own module set, hashed apart.

A receipt or a cached reference names the core's digest and the digests of the families it used, so editing
one family never invalidates another family's receipts or references, and a family outside the package is
judged by its own files exactly as a shipped one is.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import sys
import sysconfig
from collections.abc import Callable
from functools import lru_cache
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent  # the kcontract package
FAMILIES = PACKAGE / "families"  # the shipped families: plug-ins, not core


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def core_files() -> list[Path]:
    """Every Python file of the kcontract package but the shipped families, sorted."""
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts and FAMILIES not in p.parents)


def digest(files: list[Path], root: Path) -> str:
    """sha256 over files' paths (relative to root, else their names) and contents."""
    h = hashlib.sha256()
    for path in files:
        try:
            name = path.relative_to(root).as_posix()
        except ValueError:
            name = path.name
        h.update(f"{name}\0{file_sha256(path)}\0".encode())
    return h.hexdigest()


@lru_cache(maxsize=None)
def core_digest() -> str:
    """The checker core's identity."""
    return digest(core_files(), PACKAGE)


def family_files(cls: type) -> list[Path]:
    """A family's module set: its class's module and every module it imports, transitively, that is family code
    (its own folder, a shipped family, or user code), never kcontract's core, the standard library or an
    installed package."""
    spec = importlib.util.find_spec(cls.__module__)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return []
    own = Path(spec.origin).resolve().parent

    def family_code(path: Path) -> bool:
        if below(path, FAMILIES) or below(path, own):
            return True
        return not below(path, PACKAGE) and not any(below(path, root) for root in installed_roots())

    return sorted(module_files(cls.__module__, family_code))


@lru_cache(maxsize=None)
def family_digest(cls: type) -> str:
    """A family's identity: the digest of its module set."""
    files = family_files(cls)
    return digest(files, Path(os.path.commonpath(files)) if files else PACKAGE)


@lru_cache(maxsize=1)
def installed_roots() -> tuple[Path, ...]:
    """Where the standard library and installed packages live."""
    paths = sysconfig.get_paths()
    return tuple(Path(paths[k]).resolve() for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths)


def module_files(module: str, keep: Path | Callable[[Path], bool], seen: set[Path] | None = None) -> list[Path]:
    """A module's file and, transitively, every module it imports whose file `keep` accepts (a folder: files
    under it)."""
    if isinstance(keep, Path):
        folder = keep
        keep = lambda path: below(path, folder)  # noqa: E731
    seen = set() if seen is None else seen
    spec = spec_unimported(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return []
    path = Path(spec.origin).resolve()
    if path in seen or not keep(path):
        return []
    seen.add(path)
    found = [path]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for name in _imports(path, package):
        found += module_files(name, keep, seen)
    return found


def spec_unimported(module: str) -> ModuleSpec | None:
    """A module's spec found along its packages' search paths, running none of their `__init__` files (finding
    `torch.nn.x` would otherwise import torch); None where it is not found."""
    parts = module.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
        for i in range(1, len(parts)):
            if spec is None or not spec.submodule_search_locations:
                return None
            name = ".".join(parts[:i + 1])
            loaded = sys.modules.get(name)
            spec = loaded.__spec__ if loaded is not None and getattr(loaded, "__spec__", None) else \
                PathFinder.find_spec(name, list(spec.submodule_search_locations))
    except (ImportError, ValueError):
        return None
    return spec


def _imports(path: Path, package: str) -> list[str]:
    """Absolute names of the modules a file imports (relative imports resolved against its package)."""
    try:
        stat = path.stat()
    except OSError:
        return []
    return list(_parsed_imports(path, package, stat.st_mtime_ns, stat.st_size))


@lru_cache(maxsize=4096)
def _parsed_imports(path: Path, package: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """`_imports` of one version of a file (its modification time and size name the version)."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (SyntaxError, OSError, UnicodeDecodeError):
        return ()
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                head = ".".join(parts[:len(parts) - node.level + 1]) if node.level <= len(parts) else ""
                stem = f"{head}.{node.module}" if node.module else head
            else:
                stem = node.module or ""
            if stem:
                names.append(stem)
                names += [f"{stem}.{alias.name}" for alias in node.names]
    return tuple(names)


def below(path: Path, base: Path) -> bool:
    """Whether `path` lies inside `base`."""
    try:
        path.relative_to(base)
        return True
    except ValueError:
        return False
