"""`kcontract bench --plot`: one roofline SVG per family, drawn from a receipt's bench rows with no GPU."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import ROOT, kcontract, kcontract_here, no_traceback

pytest.importorskip("matplotlib", reason="--plot needs matplotlib: pip install 'kcontract[plot]'")


@pytest.fixture(scope="module")
def drawn(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The repository receipt's bench rows drawn once for this module's tests: the command's result and its folder."""
    folder = tmp_path_factory.mktemp("drawn") / "plots"
    return kcontract_here("bench", "--plot", str(folder), "--from-receipt", "receipts/contract-h200.json"), folder


def test_a_receipts_bench_rows_become_one_svg_per_family(drawn):
    done, plots = drawn
    assert done.returncode == 0, done.stdout + done.stderr
    made = sorted(p.name for p in plots.iterdir())
    assert made == ["attention.decode.svg", "attention.prompt.svg", "matmul.svg", "rmsnorm.svg"]
    matmul = (plots / "matmul.svg").read_text()
    assert matmul.startswith("<?xml") and "<svg" in matmul
    ceiling = json.loads((ROOT / "receipts/contract-h200.json").read_text())["bench_ceiling"]
    read, mma = f"ceiling {ceiling['read_gbps']:,.0f} GB/s", f"ceiling {ceiling['mma_tflops']:,.0f} TFLOP/s"
    assert read in matmul and mma in matmul  # the receipt's ceilings: both rooflines, of small and large M
    assert "k4096 n6144 bf16: peer" in matmul and "% of the roofline" in matmul
    assert [line.split(": ", 1)[0] for line in done.stdout.splitlines()] == ["plot"] * 4


def test_the_binding_limit_and_the_peers_rate_come_from_the_row():
    from kcontract.bench.plot import bound, peer_rate, share

    small = {"ratio": 0.6, "mma_ratio": 0.01, "gbps": 2700.0, "us": 10.0, "peer_us": 5.0, "tflops": 6.0}
    large = {"ratio": 0.2, "mma_ratio": 0.9, "gbps": 900.0, "us": 100.0, "peer_us": 90.0, "tflops": 560.0,
             "peer_tflops": 620.0}
    assert (bound(small), share(small), peer_rate(small, "gbps")) == ("memory", 0.6, 5400.0)
    assert (bound(large), share(large), peer_rate(large, "tflops")) == ("compute", 0.9, 620.0)


@pytest.mark.parametrize("args, said", [
    (["--from-receipt", "receipts/contract-h200.json"], "give --plot DIR too"),
    (["--plot", "PLOTS", "--from-receipt", "README.md"], "not a readable receipt"),
    (["--plot", "PLOTS", "--from-receipt", "EMPTY"], "has no bench rows"),
    (["--plot", "/proc/plots", "--from-receipt", "receipts/contract-h200.json"], "cannot make the folder"),
])
def test_bad_plot_requests_are_one_line_and_exit_2(tmp_path, args, said):
    (tmp_path / "empty.json").write_text(json.dumps({"kind": "kcontract-run", "format": 2, "bench": []}))
    args = [a.replace("PLOTS", str(tmp_path / "p")).replace("EMPTY", str(tmp_path / "empty.json")) for a in args]
    done = kcontract_here("bench", *args)
    no_traceback(done)
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(errors) == 1 and said in errors[0], done.stderr


def test_receipt_show_links_the_rooflines_beside_it_and_names_stale_ones(tmp_path):
    receipt = tmp_path / "contract-h200.json"
    data = json.loads((ROOT / "receipts/contract-h200.json").read_text())
    data["bench"] = [r for r in data["bench"] if r["entry"].startswith("rmsnorm")]
    receipt.write_text(json.dumps(data))
    drawn = kcontract_here("bench", "--plot", str(tmp_path / "contract-h200.plots"), "--from-receipt", str(receipt))
    assert drawn.returncode == 0, drawn.stdout + drawn.stderr
    shown = kcontract_here("receipt", "show", str(receipt))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "![rmsnorm](" in shown.stdout and "contract-h200.plots/rmsnorm.svg)" in shown.stdout
    assert "drawn from other bench rows" not in shown.stdout
    data["bench"][0]["us"] *= 2  # measured again, not drawn again
    receipt.write_text(json.dumps(data))
    stale = " ".join(kcontract_here("receipt", "show", str(receipt)).stdout.split())
    said = (f"rmsnorm.svg drawn from other bench rows than these: draw them again with `kcontract bench "
            f"--from-receipt {receipt} --plot {tmp_path / 'contract-h200.plots'}`")
    assert said in stale


def test_the_same_rows_draw_the_same_file_stamped_with_their_digest(drawn, tmp_path):
    from kcontract.receipts.plots import drawn_from, rows_digest

    data = json.loads((ROOT / "receipts/contract-h200.json").read_text())
    first, plots = drawn  # drawn in this process, again by the console script: the file is no process's
    again = kcontract("bench", "--plot", str(tmp_path / "b"), "--from-receipt", "receipts/contract-h200.json")
    for done in (first, again):
        assert done.returncode == 0, done.stdout + done.stderr
    assert (plots / "matmul.svg").read_bytes() == (tmp_path / "b" / "matmul.svg").read_bytes()
    assert drawn_from(plots / "matmul.svg") == rows_digest(data["bench"], data["bench_ceiling"])
