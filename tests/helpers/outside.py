"""Contracts that name files outside their project: a project folder, and beside it one whose files must stay
unread (each holds SECRET), linked into the project by a file link and a folder link."""

from __future__ import annotations

from pathlib import Path

SECRET = "SECRET-LINE-of-a-file-outside"
PYTHON_KERNEL = "def f(x, w, out, *, hidden, eps):\n    pass\n"
ENTRY = ("version: 1\nseed: 1\nentries:\n  - name: f\n    family: rmsnorm\n    kernel: {kernel}\n"
         "    cases:\n      - {{name: h8, hidden: 8, rows: 1}}\n")
PYTHON_ENTRY = ENTRY.format(kernel='{python: "k:f"}')


def cuda_entry(source: str, more: str = "") -> str:
    """A one-entry rmsnorm contract whose CUDA kernel is `source` (its line is 6), `more` added to its fields."""
    return ENTRY.format(kernel=f"{{cuda: {{source: {source}, symbols: {{rmsnorm: k}}{more}}}}}")


def make_project(root: Path) -> Path:
    """`root`/project with a Python kernel k.py, a CUDA kernel k.cu and the links linked.cu and linked/ to
    `root`/elsewhere, whose secret.cu, secret.cuh and secret.patch hold SECRET."""
    here, elsewhere = root / "project", root / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    (here / "k.py").write_text(PYTHON_KERNEL)
    (here / "k.cu").write_text('extern "C" __global__ void k(float* x) {}\n')
    for name in ("secret.cu", "secret.cuh", "secret.patch"):
        (elsewhere / name).write_text(f"{SECRET}\n{SECRET}\n")
    (here / "linked.cu").symlink_to(elsewhere / "secret.cu")
    (here / "linked").symlink_to(elsewhere, target_is_directory=True)
    return here
