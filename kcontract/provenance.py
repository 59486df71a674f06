"""What a run depended on: every source file it read, the checker's own code, and the git state."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import subprocess
from pathlib import Path

import kcontract
from kcontract.toolchain.headers import include_dirs_of, local_headers
from kcontract.toolchain.units import resolve_source

COMMIT_ENV, DIRTY_ENV = "KCONTRACT_GIT_COMMIT", "KCONTRACT_GIT_DIRTY"  # where the tree travelled without .git


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def package_files() -> list[Path]:
    """Every Python file of the kcontract package, sorted."""
    root = Path(kcontract.__file__).resolve().parent
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def package_digest() -> str:
    """sha256 over the kcontract package's files (relative path and content): the checker's identity."""
    root = Path(kcontract.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in package_files():
        digest.update(f"{path.relative_to(root).as_posix()}\0{file_sha256(path)}\0".encode())
    return digest.hexdigest()


def module_files(module: str, base: Path, seen: set[Path] | None = None) -> list[Path]:
    """A module's file and, transitively, every module it imports whose file lies under `base`."""
    seen = set() if seen is None else seen
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return []
    path = Path(spec.origin).resolve()
    if path in seen or not _below(path, base):
        return []
    seen.add(path)
    found = [path]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for name in _imports(path, package):
        found += module_files(name, base, seen)
    return found


def _imports(path: Path, package: str) -> list[str]:
    """Absolute names of the modules a file imports (relative imports resolved against its package)."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (SyntaxError, OSError, UnicodeDecodeError):
        return []
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
    return names


def _below(path: Path, base: Path) -> bool:
    try:
        path.relative_to(base)
        return True
    except ValueError:
        return False


def run_sources(loaded) -> list[str]:
    """Every file under the contract's folder the run depended on, relative to it, sorted."""
    base = Path(loaded.path).resolve().parent
    files: list[Path] = [Path(loaded.path).resolve()]
    kernels = [e.kernel for e in loaded.entries] + [c.kernel for c in loaded.controls]
    seen: set[Path] = set()
    for kernel in kernels:
        if kernel.cuda is not None:
            source = resolve_source(base, kernel.cuda.source).resolve()
            files += [source, *local_headers(source, include_dirs_of(kernel.cuda.options, base))]
            if kernel.cuda.patch:
                files.append(resolve_source(base, kernel.cuda.patch).resolve())
        else:
            files += module_files(kernel.python.partition(":")[0], base, seen)
    for entry in loaded.entries:
        module = type(entry.family).__module__
        if not module.startswith("kcontract."):
            files += module_files(module, base, seen)
    files += [p for p in package_files() if _below(p, base)]
    return sorted({str(p.relative_to(base)) for p in files if _below(p, base) and p.is_file()})


def git_state(folder: Path) -> dict:
    """{"commit": sha or None, "dirty": bool or None} of the work tree holding `folder`."""
    if os.environ.get(COMMIT_ENV):
        return {"commit": os.environ[COMMIT_ENV], "dirty": os.environ.get(DIRTY_ENV, "") == "1"}

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=False)
        except OSError:
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else bool(status)}
