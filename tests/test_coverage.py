"""`kcontract coverage`: probes per block and `if` outcome, put in by a patch that moves no line; the probes each
entry's instantiations reach, from their PTX; lines judged against the floor and the argued lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.contract.loader import load_contract
from kcontract.coverage.campaign import Campaign, EntryProbes, SourceProbes
from kcontract.coverage.instrument import instrument
from kcontract.coverage.report import entry_report
from kcontract.contract.model import CoverageFloor
from kcontract.errors import ContractError
from kcontract.toolchain.nvrtc import Compiled, compile_cubin
from tests.helpers.toolchain import toolchain

ROOT = Path(__file__).resolve().parents[1]
SOURCE = """// a test kernel
#include <cuda_bf16.h>
struct Pair { int a, b; };
__device__ int twice(int x) { return 2 * x; }
template <bool kOdd>
__global__ void k(int* out, int n) {
  const int i = threadIdx.x;
  int v[2] = {0, 1};
  if (i < n)
    out[i] = twice(v[1]);
  else if (kOdd) {
    out[0] = 3;
  } else
    out[1] = 4;
  for (int j = 0; j < n; ++j)
    out[j] += 1;
  switch (n) {
    case 1: { out[2] = 5; break; }
    default: break;
  }
}
template __global__ void k<true>(int*, int);
"""


def test_probes_sit_in_blocks_and_if_outcomes_and_move_no_line():
    done = instrument(SOURCE)
    body = done.text.split("\n", 1)[1]
    assert body.count("\n") == SOURCE.count("\n")
    for before, after in zip(SOURCE.splitlines(), body.splitlines()):
        assert re.sub(r"kcontract_cov_\w+\(|kcontract_cov_\d+|[^A-Za-z0-9_]", "", after).startswith(
            re.sub(r"[^A-Za-z0-9_]", "", before)[:6]), (before, after)
    assert "int v[2] = {0, 1};" in body  # an initializer is no block
    assert "struct Pair { int a, b; };" in body  # nor a type
    assert "switch (n) {\n" in body  # a switch's body gets no probe before its first case
    assert [(p.line, p.kind) for p in done.probes][:2] == [(4, "block"), (6, "block")]
    assert [line for line, *_ in done.branches] == [9, 11]
    then, other = done.branches[0][1:]
    assert done.lines[10] == then and done.lines[11] == other  # unbraced outcomes own their lines
    assert done.lines[14] == done.branches[1][2]
    loop = done.lines[16]
    assert done.probes[loop].line == 16 and "{ kcontract_cov_hit(kcontract_cov_%d); out[j] += 1; }" % loop in body
    assert set(done.lines) == {4, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}
    assert done.lines[15] == done.lines[7] and done.probes[done.lines[18]].line == 18 != done.lines[19]


COMPILE_TIME = """namespace ns {
template <int D>
__device__ constexpr int min_blocks() {
  if (D == 128) { return 4; }
  return 2;
}
}  // namespace ns
template <int D>
__global__ void __launch_bounds__(128, ns::min_blocks<D>()) k(int* out) {
  if (D > 1) { out[0] = 1; }
}
template __global__ void k<128>(int*);
"""


def test_a_constexpr_function_gets_no_probe_and_its_lines_are_no_code():
    done = instrument(COMPILE_TIME)
    assert "kcontract_cov_hit" not in done.text.split("\n", 1)[1].split("namespace ns")[1].split("}  // namespace")[0]
    assert set(done.lines) == {10} and [line for line, *_ in done.branches] == [10]
    tool = toolchain()
    built = compile_cubin(str(tool.nvrtc.path), done.text.encode(), "k.cu", ("k<128>",), "sm_90a", (),
                          (str(tool.headers.path),))
    assert isinstance(built, Compiled), built  # the launch bound is still a constant


def test_every_shipped_kernel_compiles_with_its_probes_and_each_entry_reaches_its_own_lines(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path / "cache"))
    done = CliRunner().invoke(cli, ["coverage", "rmsnorm_h4096", "rmsnorm_residual_h8192", "--contract",
                                    str(ROOT / "contract.yaml"), "--prepare-only", "--sm", "sm_90a"])
    assert done.exit_code == 0, done.output
    reach = {m[1]: int(m[2]) for m in re.finditer(r"coverage (\S+) \(kernels/rms_norm\.cu\): (\d+) lines", done.output)}
    assert 0 < reach["rmsnorm_h4096"] < reach["rmsnorm_residual_h8192"]  # the residual's lines are its own
    assert "COVERAGE 2 CUDA entries prepared:" in done.output


def campaign(hits: list[int] | None) -> Campaign:
    """A made-up source of four code lines: two in the function's block, one per `if` outcome."""
    source = SourceProbes("k.cu", "0" * 64, ["block", "then", "else"], {10: 0, 11: 0, 12: 1, 13: 2},
                          [[11, 1, 2]], {10: "int i = 0;", 11: "if (x)", 12: "a();", 13: "b();"})
    return Campaign("sm_90a", 1, {"k.cu": source}, {"e": EntryProbes("e", "k.cu", [0, 1, 2], hits)})


def test_lines_and_branches_are_judged_against_the_floor_and_the_arguments():
    full = entry_report(campaign([0, 1, 2]), campaign([0, 1, 2]).entries["e"], CoverageFloor(lines=100))
    assert full.pct == 100.0 and not full.problems and full.branches == (2, 2)
    c = campaign([0, 1])
    gap = entry_report(c, c.entries["e"], CoverageFloor(lines=100))
    assert gap.missed == [13] and gap.missed_branches == ["line 11: else"]
    assert gap.problems == ["75.0 % of its reachable lines executed, below its floor of 100 %: lines 13 (b();)"]
    argued = entry_report(c, c.entries["e"], CoverageFloor(lines=100, argued=[{"line": 13, "reason": "never"},
                                                                              {"line": 12, "reason": "stale"}]))
    assert argued.missed == [] and argued.pct == 100.0
    assert argued.problems == ["line 12 is argued unreachable (stale) but a case executes it: drop the argument"]


def test_if_outcomes_are_held_to_their_floor_taken_or_argued():
    c = campaign([0, 1])  # the else outcome of line 11 is never taken; its line 13 is argued out
    floor = {"lines": 100, "branches": 100, "argued": [{"line": 13, "reason": "a guard"}]}
    gap = entry_report(c, c.entries["e"], CoverageFloor(**floor))
    assert gap.branch_pct == 50.0 and gap.missed_branches == ["line 11: else"]
    assert gap.problems == ["50.0 % of its reachable `if` outcomes taken, below its floor of 100 %: line 11: else "
                            "taken by no case: add a case that takes them or argue them (`branch: then` or `else`)"]
    floor["argued"].append({"line": 11, "branch": "else", "reason": "a guard's outcome"})
    argued = entry_report(c, c.entries["e"], CoverageFloor(**floor))
    assert argued.problems == [] and argued.branch_pct == 100.0 and argued.argued_branches == ["line 11: else"]
    assert argued.as_dict()["branches"] == {"taken": 1, "reachable": 2, "argued": 1, "pct": 100.0}
    stale = entry_report(campaign([0, 1, 2]), campaign([0, 1, 2]).entries["e"],
                         CoverageFloor(branches=100, argued=[{"line": 11, "branch": "then", "reason": "never"},
                                                             {"line": 12, "branch": "else", "reason": "moved"}]))
    assert stale.problems == [
        "line 11: then is an `if` outcome argued unreachable (never) but a case takes it: drop the argument",
        "line 12: else is an `if` outcome argued unreachable (moved) but it is no `if` outcome this entry's "
        "instantiations reach: drop or move the argument"]


def test_a_branch_floor_without_a_floor_of_lines_reports_outcomes_only_when_asked():
    c = campaign([0, 1])
    assert entry_report(c, c.entries["e"], CoverageFloor(lines=0)).problems == []
    assert CoverageFloor().branches is None


def test_a_floor_is_for_cuda_kernels(tmp_path):
    text = (ROOT / "tests" / "contracts" / "rmsnorm.yaml").read_text()
    contract = tmp_path / "c.yaml"
    contract.write_text(text.replace("    eps: 1.0e-6\n", "    eps: 1.0e-6\n    coverage: {lines: 100}\n", 1))
    with pytest.raises(ContractError, match=r"entries\[0\]\.coverage: a coverage floor only on a CUDA kernel"):
        load_contract(str(contract), import_kernels=False)


def test_coverage_refuses_what_is_no_cuda_entry():
    done = CliRunner().invoke(cli, ["coverage", "--contract", str(ROOT / "tests" / "contracts" / "rmsnorm.yaml")])
    assert done.exit_code == 2 and "has no CUDA entry: coverage counts the lines of CUDA kernels" in done.output
    done = CliRunner().invoke(cli, ["coverage", "nope", "--contract", str(ROOT / "contract.yaml")])
    assert done.exit_code == 2 and "nope: no such entry" in done.output
