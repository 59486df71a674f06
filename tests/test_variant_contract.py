"""tools/variant_contract.py: a copy of the contract whose named kernel compiles with extra defines, for benching
a kernel variant beside the contract's own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kcontract.contract.loader import load_contract

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "variant_contract.py"


def test_the_variant_keeps_the_chosen_entries_and_adds_the_define():
    out = ROOT / "contract-variant-test.yaml"  # beside the contract, so its sources resolve
    try:
        done = subprocess.run([sys.executable, str(TOOL), "window_prompt", "--define", "WP_MAX_PASS=1", "--only",
                               "prompt_*", "--out", str(out)], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        loaded = load_contract(str(out), import_kernels=False)
        assert loaded.entries and all(e.name.startswith("prompt_") for e in loaded.entries)
        assert not loaded.controls
        assert all("-DWP_MAX_PASS=1" in e.kernel.cuda.options for e in loaded.entries)
    finally:
        out.unlink(missing_ok=True)


def test_a_role_gets_the_variants_own_shared_memory_expression():
    out = ROOT / "contract-variant-smem-test.yaml"
    try:
        done = subprocess.run([sys.executable, str(TOOL), "window_prompt", "--define", "WP_MAX_PASS=1", "--only",
                               "prompt_d512_g16_p32", "--smem", "partials=1000 + {head_dim}", "--out", str(out)],
                              cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        (entry,) = load_contract(str(out), import_kernels=False).entries
        assert entry.kernel.cuda.launch["partials"].dynamic_smem == 1512
    finally:
        out.unlink(missing_ok=True)
    done = subprocess.run([sys.executable, str(TOOL), "window_prompt", "--define", "X=1", "--smem", "merge=1",
                           "--out", "/dev/null"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "one of window_prompt's launch roles (partials)" in done.stderr


def test_an_unknown_kernel_is_named():
    done = subprocess.run([sys.executable, str(TOOL), "window_nothing", "--define", "X=1", "--out", "/dev/null"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "no CUDA kernel 'window_nothing'" in done.stderr
