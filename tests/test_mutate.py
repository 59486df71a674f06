"""Mutants of a CUDA source: sites in code only, one change each, equivalents dropped by their machine code."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import kcontract.session.preflight
import kcontract.launch

from kcontract.cli import cli
from kcontract.contract.argued_lines import replaced
from kcontract.mutate.operators import CLASSES, code_spans, mutants
from kcontract.verdict.outcome import Task

ROOT = Path(__file__).resolve().parent.parent
SOURCE = """#include <cuda_bf16.h>
#define FACTOR(m) expf((m) - 1.0f)  // the rescale
// a comment: a + b < c
extern "C" __global__ void k(const float* a, float* b, int n) {
  int i = threadIdx.x + 1;  /* i + 1 */
  if (i < n) b[i] = a[i] * FACTOR(2.0f);
  __syncthreads();
  const char* s = "x + y";
}
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    """Compiled modules shared by this module's tests: each compiles the same entry's mutants, and a module's key is
    its content, so sharing them changes nothing but the time."""
    folder = tmp_path_factory.mktemp("compiled")
    for i in range(256):
        (folder / f"{i:02x}").mkdir()
    return folder


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch, compiled) -> Path:
    """$KCONTRACT_CACHE for one test: its own campaigns and references, the module's compiled modules."""
    cache = tmp_path / "cache"
    cache.mkdir()
    for shard in compiled.iterdir():
        (cache / shard.name).symlink_to(shard, target_is_directory=True)
    monkeypatch.setenv("KCONTRACT_CACHE", str(cache))
    return cache


@pytest.fixture
def gpu_faked(monkeypatch):
    """`kcontract mutate ARGS` as if on a GPU, its tasks run by the `run` given (no sanitizer): the result."""
    import kcontract.runner.run_tasks

    def invoke(run, args):
        monkeypatch.setattr(kcontract.launch, "cuda_ready", lambda entries: None)
        monkeypatch.setattr(kcontract.launch, "gpu_problem", lambda: None)
        monkeypatch.setattr(kcontract.session.preflight, "device_sm", lambda: "sm_90")
        monkeypatch.setattr(kcontract.runner.run_tasks, "run_tasks", run)
        monkeypatch.setattr("kcontract.session.mutants.sanitize_survivors", lambda *a: None)
        return CliRunner().invoke(cli, args)

    return invoke


def test_sites_skip_comments_strings_and_includes():
    lines = SOURCE.splitlines()
    code = "\n".join(lines[n - 1][a:b] for n, a, b in code_spans(SOURCE))
    assert "a comment" not in code and "i + 1 */" not in code and "x + y" not in code and "cuda_bf16" not in code
    assert "expf((m) - 1.0f)" in code and "#define FACTOR(m)" not in code
    made = mutants(SOURCE, ("a", "b"), limit=100)
    kinds = {m.kind for m in made}
    assert kinds == set(CLASSES), kinds
    for m in made:
        changed = [i for i, (x, y) in enumerate(zip(SOURCE.splitlines(), m.source.splitlines())) if x != y]
        assert changed == [m.line - 1] and len(m.source.splitlines()) == len(SOURCE.splitlines())
    assert any(m.kind == "math" and "#define FACTOR(m) 1.0f" in m.source for m in made)
    assert any(m.kind == "sync" and "__syncthreads" not in m.source for m in made)
    assert any(m.kind == "swap" and "b[i] = b[i]" in m.source for m in made)


def test_the_limit_spreads_over_classes_and_the_seed_picks_sites():
    made = mutants(SOURCE, ("a", "b"), limit=7, seed=3)
    assert len(made) == 7 and len({m.kind for m in made}) == 7
    assert [m.source for m in made] == [m.source for m in mutants(SOURCE, ("a", "b"), limit=7, seed=3)]
    assert [m.source for m in made] != [m.source for m in mutants(SOURCE, ("a", "b"), limit=7, seed=4)]


def test_a_prepared_campaign_drops_stillborn_and_equivalent_mutants(tmp_path, monkeypatch, fresh_cache):
    report = tmp_path / "mutate.json"
    done = CliRunner().invoke(cli, ["mutate", "decode_d256_g2_sliding", "--contract", str(ROOT / "contract.yaml"),
                                    "--limit", "24", "--prepare-only", "--sm", "sm_90a", "--json", str(report)])
    assert done.exit_code == 0, done.output
    counts = json.loads(report.read_text())
    assert counts["mutants"] == 24 and counts["score_pct"] is None
    status = counts["by_status"]
    assert status.get("equivalent", 0) > 0 and status.get("candidate", 0) > 0
    here = tmp_path / "cache" / "mutants" / "decode_d256_g2_sliding"
    campaign = json.loads((here / "campaign.json").read_text())
    equivalent = [m for m in campaign["mutants"] if m["status"] == "equivalent"]
    assert all(m["diff"].startswith(f"line {m['line']}: - ") for m in campaign["mutants"])
    contract = (here / "contract.yaml").read_text()
    assert all(f"{m['ident']}_g1" not in contract for m in equivalent)  # equivalents never run
    candidates = [m for m in campaign["mutants"] if m["status"] == "candidate"]
    assert all(f"{m['ident']}_g{g}" in contract for m in candidates for g in (1, 2, 3, 4))
    controls = {c["name"]: c for c in yaml.safe_load(contract)["controls"]}
    races = [m["ident"] for m in candidates if m["kind"] == "sync"]
    assert races and all(controls[f"{r}_g1"]["trials"] == 10 for r in races)  # a removed barrier: a race
    assert all("trials" not in controls[f"{m['ident']}_g1"] for m in candidates if m["kind"] != "sync")
    assert "MUTATE decode_d256_g2_sliding: 24 mutants" in done.output and "not run (no GPU here)" in done.output


def test_mutants_run_on_the_chosen_cases_only(tmp_path, monkeypatch, fresh_cache):
    args = ["mutate", "decode_d512_g16", "--contract", str(ROOT / "contract.yaml"), "--limit", "3", "--prepare-only",
            "--sm", "sm_90a"]
    wrong = CliRunner().invoke(cli, args + ["--case", "linear_99"])
    assert wrong.exit_code == 2 and "--case linear_99: decode_d512_g16 has no such case" in wrong.output
    done = CliRunner().invoke(cli, args + ["--case", "linear_20000"])
    assert done.exit_code == 0, done.output
    here = tmp_path / "cache" / "mutants" / "decode_d512_g16"
    contract = yaml.safe_load((here / "contract.yaml").read_text())
    assert [c["name"] for c in contract["entries"][0]["cases"]] == ["linear_20000"]
    assert json.loads((here / "campaign.json").read_text())["cases"] == ["linear_20000"]


def test_without_a_gpu_mutate_asks_which_sm_decides_equivalence(monkeypatch):
    monkeypatch.setattr(kcontract.launch, "gpu_problem", lambda: "no CUDA driver")
    done = CliRunner().invoke(cli, ["mutate", "matmul_kv_k4096_n2048", "--contract", str(ROOT / "contract.yaml"),
                                    "--prepare-only"])
    assert done.exit_code == 2 and "--sm: no GPU here to take the SM from (no CUDA driver)" in done.output
    assert "sm_90a" in done.output and "Traceback" not in done.output


def test_the_default_sm_is_the_contracts_target_for_the_gpu(tmp_path, monkeypatch, fresh_cache):
    monkeypatch.setattr(kcontract.launch, "gpu_problem", lambda: None)
    monkeypatch.setattr(kcontract.session.preflight, "device_sm", lambda: "sm_90")  # an H100 or H200
    report = tmp_path / "mutate.json"
    done = CliRunner().invoke(cli, ["mutate", "decode_d512_g16", "--contract", str(ROOT / "contract.yaml"),
                                    "--limit", "3", "--prepare-only", "--case", "linear_20000", "--json", str(report)])
    assert done.exit_code == 0, done.output
    assert json.loads(report.read_text())["sm"] == "sm_90a" and "equivalent on sm_90a" in done.output


def test_a_campaign_whose_every_mutant_is_equivalent_is_no_pass(tmp_path, monkeypatch, fresh_cache):
    # the wgmma matmul traps on sm_90 (not sm_90a)
    done = CliRunner().invoke(cli, ["mutate", "matmul_kv_k4096_n2048", "--contract", str(ROOT / "contract.yaml"),
                                    "--limit", "6", "--prepare-only", "--sm", "sm_90"])
    assert done.exit_code == 1, done.output
    assert "no mutant changes the machine code on sm_90, so nothing was scored" in done.output


def test_mutate_refuses_unknown_and_python_entries():
    done = CliRunner().invoke(cli, ["mutate", "nope", "--contract", str(ROOT / "contract.yaml")])
    assert done.exit_code == 2 and "nope: no such entry" in done.output
    cpu = CliRunner().invoke(cli, ["mutate", "np_decode_d128_g4", "--contract",
                                   str(ROOT / "tests/contracts/cpu.yaml")])
    assert cpu.exit_code == 2 and "mutate needs a CUDA or Triton kernel" in cpu.output


def test_a_mutants_diff_shows_the_line_before_and_after():
    m = mutants(SOURCE, ("a", "b"), limit=1)[0]
    assert m.diff(SOURCE).count("\n") == 1 and "- " in m.diff(SOURCE) and "+ " in m.diff(SOURCE)


def test_survivors_go_to_the_sanitizer(tmp_path, monkeypatch, fresh_cache):
    from kcontract.session.mutants import sanitize_survivors
    from kcontract.contract.loader import load_contract
    from kcontract.mutate.campaign import load

    done = CliRunner().invoke(cli, ["mutate", "decode_d256_g2_sliding", "--contract", str(ROOT / "contract.yaml"),
                                    "--limit", "14", "--prepare-only", "--sm", "sm_90a"])
    assert done.exit_code == 0, done.output
    here = tmp_path / "cache" / "mutants" / "decode_d256_g2_sliding"
    campaign = load(here)
    barrier = next(m for m in campaign.mutants if m.kind == "sync" and m.status == "candidate")
    other = next(m for m in campaign.mutants if m.kind != "sync" and m.status == "candidate")
    barrier.status = other.status = "survived"  # as if the gates had run and missed both
    fake = tmp_path / "compute-sanitizer"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/calls\n'
                    f'case "$*" in *racecheck*{barrier.ident}_g1*) echo "========= Error: Race reported";'
                    f' echo "========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)"; exit 99;; esac\n'
                    f'case "$*" in *racecheck*) echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors)";;'
                    f' *) echo "========= ERROR SUMMARY: 0 errors";; esac\n')
    fake.chmod(0o755)
    monkeypatch.setenv("KCONTRACT_SANITIZER", str(fake))
    contract = str(here / "contract.yaml")
    sanitize_survivors(campaign, contract, load_contract(contract, import_kernels=False))
    assert barrier.status == "killed" and barrier.detail.startswith("racecheck: 2 errors")
    assert other.status == "survived"  # clean under every tool, and the survivor says so
    assert all(f"{tool} on " in other.detail for tool in ("memcheck", "initcheck", "racecheck"))
    assert other.detail.count(": clean") == 3
    calls = (tmp_path / "calls").read_text().splitlines()
    tools = sorted((c.split()[1], c.split()[-2]) for c in calls)
    assert tools == sorted((tool, f"{m.ident}_g1") for m in (barrier, other)
                           for tool in ("memcheck", "initcheck", "racecheck"))


def test_a_new_receipt_keeps_mutation_scores_of_unchanged_kernels_only():
    from kcontract.contract.loader import load_contract
    from kcontract.identity import file_sha256
    from kcontract.receipts.carried import carried_mutation
    from kcontract.receipts.receipt import Receipt

    loaded = load_contract(str(ROOT / "contract.yaml"), import_kernels=False)
    score = {"entry": "decode_d512_g16", "score_pct": 90.0}
    source = "kernels/window_decode.cu"
    data = {"git": {"commit": "abc"}, "sources": {source: file_sha256(ROOT / source)},
            "mutation": {"decode_d512_g16": score, "gone_entry": score}}
    previous = Receipt(data)
    assert carried_mutation(loaded, previous) == {"decode_d512_g16": {**score, "measured_at": "abc"}}
    data["sources"][source] = "0" * 64  # the kernel changed since
    assert carried_mutation(loaded, previous) == {}
    named = {**score, "source_sha256": file_sha256(ROOT / source), "measured_at": "def"}
    data["mutation"]["decode_d512_g16"] = named  # a score that names the source it mutated is judged by it
    assert carried_mutation(loaded, previous) == {"decode_d512_g16": named}


class _Outcome:
    """A finished control as the runner reports it: its task's name, status and red gates."""

    def __init__(self, name: str, status: str = "ran", red: bool = False):
        control = re.fullmatch(r"m\d+_g(\d+)", name)  # a mutant's control names its gate; an entry: gate 1
        gate = int(control.group(1)) if control else 1
        self.task = Task("control", name, name, "contract.yaml", [gate], 0)
        self.status, self.red, self.seconds = status, red, 1.0

    def failed_gates(self):
        return [1] if self.red else []


def test_a_mutant_survives_only_when_every_planned_gate_ran_green():
    from kcontract.mutate.campaign import Campaign, MutantResult, judge_runs

    campaign = Campaign("e", "k.cu", "0" * 64, "sm_90", 0,
                        [MutantResult(i, "arith", 1, "x", "d") for i in ("m1", "m2", "m3", "m4")], [])
    for m in campaign.mutants:
        m.status = "candidate"
    outcomes = [_Outcome("m1_g2", red=True), _Outcome("m2_g1"), _Outcome("m4_g1", status="crashed")]
    outcomes += [_Outcome(f"m3_g{g}") for g in (1, 2, 3, 4)]
    judge_runs(campaign, outcomes, {m: 4 for m in ("m1", "m2", "m3", "m4")})
    assert [m.status for m in campaign.mutants] == ["killed", "candidate", "survived", "killed"]


def test_a_campaign_cut_short_keeps_what_it_judged_and_runs_the_rest_later(tmp_path, monkeypatch, fresh_cache):
    import kcontract.runner.run_tasks
    from kcontract.mutate.campaign import load
    from kcontract.verdict.outcome import Outcome

    args = ["mutate", "decode_d256_g2_sliding", "--contract", str(ROOT / "contract.yaml"), "--limit", "12",
            "--sm", "sm_90a"]
    assert CliRunner().invoke(cli, args + ["--prepare-only"]).exit_code == 0
    here = tmp_path / "cache" / "mutants" / "decode_d256_g2_sliding"
    first = next(m.ident for m in load(here).mutants if m.status == "candidate")
    seen: list[list[str]] = []

    # the first mutant's gate finishes, red at gate 1; then a SIGTERM
    def cut(loaded, tasks, jobs, on_progress, on_done, gpu=False, **built):
        if all(t.kind == "entry" for t in tasks):  # the unmutated entry first: green
            return [_Outcome(t.name) for t in tasks]
        seen.append([t.name for t in tasks])
        outcomes = []
        for task in tasks:
            if task.name.startswith(f"{first}_g"):
                outcomes.append(_Outcome(task.name, red=task.name.endswith("_g1")))
                on_done(outcomes[-1])
            else:
                outcomes.append(Outcome(task, status="interrupted"))
        return outcomes

    monkeypatch.setattr(kcontract.launch, "cuda_ready", lambda entries: None)
    monkeypatch.setattr(kcontract.launch, "gpu_problem", lambda: None)
    monkeypatch.setattr(kcontract.session.preflight, "device_sm", lambda: "sm_90")
    monkeypatch.setattr(kcontract.runner.run_tasks, "run_tasks", cut)
    report = tmp_path / "mutate.json"
    done = CliRunner().invoke(cli, args + ["--json", str(report)])
    assert done.exit_code == 130, done.output
    assert "not run (cut short)" in done.output and "run this again" in done.output
    assert json.loads(report.read_text())["cut_short"] is True
    statuses = {m.ident: m.status for m in load(here).mutants}
    assert statuses[first] == "killed" and list(statuses.values()).count("candidate") >= 1
    CliRunner().invoke(cli, args)  # the rerun plans only the mutants still waiting
    assert not any(name.startswith(f"{first}_g") for name in seen[1]) and seen[1]


def test_the_first_gate_runs_for_every_mutant_and_the_others_only_for_those_it_left_green(tmp_path, monkeypatch,
                                                                                         gpu_faked, fresh_cache):
    from kcontract.contract.loader import load_contract
    from kcontract.mutate.campaign import load

    args = ["mutate", "rmsnorm_h4096", "--contract", str(ROOT / "contract.yaml"), "--limit", "8", "--sm", "sm_90a"]
    assert CliRunner().invoke(cli, args + ["--prepare-only"]).exit_code == 0
    here = tmp_path / "cache" / "mutants" / "rmsnorm_h4096"
    waiting = [m.ident for m in load(here).mutants if m.status == "candidate"]
    argued = {(a.line, a.change) for a in load_contract(str(ROOT / "contract.yaml"), import_kernels=False)
              .entry("rmsnorm_h4096").mutation.equivalent}
    green = next(m.ident for m in load(here).mutants  # every gate green: it survives (it is argued nowhere)
                 if m.status == "candidate" and (m.line, m.change) not in argued)
    assert len(waiting) >= 2
    stages: list[list[str]] = []

    def run(loaded, tasks, jobs, on_progress, on_done, gpu=False, **built):
        stages.append([t.name for t in tasks])
        outcomes = [_Outcome(t.name, red=t.kind == "control" and not t.name.startswith(f"{green}_g"))
                    for t in tasks]
        for outcome in outcomes:
            on_done(outcome)
        return outcomes

    done = gpu_faked(run, args)
    assert sorted(stages[0]) == ["rmsnorm_h4096"] * 3  # the unmutated entry first, every gate
    assert sorted(stages[1]) == sorted(f"{m}_g1" for m in waiting)
    assert stages[2] == [f"{green}_g{g}" for g in (2, 4)]  # rmsnorm launches gates 1, 2 and 4
    assert stages[3] == [f"{green}_g1"]  # the survivor once more, at its first gate on the smallest case
    retrials = yaml.safe_load((here / "retrials.yaml").read_text())
    assert [c["name"] for c in retrials["entries"][0]["cases"]] == ["m1_h4096"]
    assert [(c["name"], c["trials"]) for c in retrials["controls"]] == [(f"{green}_g1", 10)]
    statuses = {m.ident: m.status for m in load(here).mutants}
    assert statuses[green] == "survived" and all(statuses[m] == "killed" for m in waiting if m != green)
    assert f"survived {green} (" in done.output and done.exit_code == 0, done.output


def test_a_survivor_red_on_a_retrial_of_the_smallest_case_is_killed(tmp_path, monkeypatch, gpu_faked, fresh_cache):
    from kcontract.mutate.campaign import load

    args = ["mutate", "rmsnorm_h4096", "--contract", str(ROOT / "contract.yaml"), "--limit", "8", "--sm", "sm_90a"]
    assert CliRunner().invoke(cli, args + ["--prepare-only"]).exit_code == 0
    here = tmp_path / "cache" / "mutants" / "rmsnorm_h4096"

    def run(loaded, tasks, jobs, on_progress, on_done, gpu=False, **built):  # green everywhere but on the retrials
        outcomes = [_Outcome(t.name, red=t.contract_path.endswith("retrials.yaml")) for t in tasks]
        for outcome in outcomes:
            on_done(outcome)
        return outcomes

    done = gpu_faked(run, args)
    killed = [m for m in load(here).mutants if m.status == "killed"]
    assert killed and all(m.detail.endswith("on m1_h4096, retried up to 10 times") for m in killed), done.output
    assert not [m for m in load(here).mutants if m.status == "survived"]


def test_a_survivor_argued_in_yaml_leaves_the_score_and_keeps_its_reason():
    from kcontract.contract.model import MutationArguments
    from kcontract.mutate.campaign import Campaign, MutantResult

    campaign = Campaign("e", "k.cu", "0" * 64, "sm_90", 0, [
        MutantResult("m1", "compare", 41, "== -> <=", "d1", status="survived"),
        MutantResult("m2", "compare", 60, "< -> <=", "d2", status="survived"),
        MutantResult("m3", "arith", 7, "+ -> -", "d3", status="killed")], [])
    arguments = MutationArguments.model_validate({"equivalent": [
        {"line": 41, "change": "== -> <=", "reason": "lane is never negative"},
        {"line": 9, "change": "1 -> 2", "reason": "stale"}]})
    assert campaign.argue(arguments) == ["line 9: 1 -> 2"]
    report = campaign.counts()
    assert report["score_pct"] == 50.0 and report["by_status"]["argued"] == 1
    assert report["argued"] == [{"ident": "m1", "kind": "compare", "line": 41, "change": "== -> <=", "diff": "d1",
                                 "reason": "lane is never negative"}]
    assert [s["ident"] for s in report["survivors"]] == ["m2"]
    campaign.argue(None)  # the argument withdrawn: a survivor again
    assert campaign.counts()["score_pct"] == round(100 / 3, 1)


def test_argued_mutants_load_on_cuda_entries_only_and_stale_no_row(tmp_path):
    from kcontract.contract.loader import load_contract
    from kcontract.receipts.depends import PROSE

    text = (ROOT / "tests" / "contracts" / "rmsnorm.yaml").read_text().replace(
        "    eps: 1.0e-6\n", "    eps: 1.0e-6\n    mutation: {equivalent: [{line: 3, change: '+ -> -', reason: 'r'}]}\n", 1)
    (tmp_path / "c.yaml").write_text(text)
    done = CliRunner().invoke(cli, ["check", "--contract", str(tmp_path / "c.yaml")])
    assert done.exit_code == 2 and "argued mutants only on a CUDA or Triton kernel" in done.output, done.output
    assert "mutation" in PROSE
    loaded = load_contract(str(ROOT / "contract.yaml"), import_kernels=False)
    assert all(e.mutation is None or e.kernel.compiled is not None for e in loaded.entries)


def test_an_argued_mutant_on_a_line_that_lacks_what_its_change_replaces_is_refused_where_it_is_written(tmp_path):
    """Lines move when a kernel grows: an argument left behind would match no survivor and count an equivalent
    mutant as a survivor, so the contract refuses it at load, naming the line and what it holds."""
    text = (ROOT / "contract.yaml").read_text()
    old = '{line: 278, change: "+ -> -"'
    at = text.index(old)
    (tmp_path / "c.yaml").write_text(text[:at] + old.replace("278", "276") + text[at + len(old):])
    for folder in ("kernels", "controls", "records"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    done = CliRunner().invoke(cli, ["list", "--contract", str(tmp_path / "c.yaml")])
    line = text[:at].count("\n") + 1
    assert done.exit_code == 2 and done.output.startswith(
        f"ERROR: {tmp_path / 'c.yaml'}:{line}: entries[23].mutation.equivalent[1].line: line 276 of kernels/matmul.cu to hold `+`, "
        "which change `+ -> -` replaces"), done.output
    assert len(done.output.splitlines()) == 1 and "Traceback" not in done.output
    assert replaced("__syncthreads() removed") == "__syncthreads()" and replaced("a reason") is None


def test_a_campaign_whose_unmutated_entry_is_red_judges_no_mutant(tmp_path, monkeypatch, fresh_cache):
    import kcontract.runner.run_tasks
    from kcontract.mutate.campaign import load

    args = ["mutate", "rmsnorm_h4096", "--contract", str(ROOT / "contract.yaml"), "--limit", "4", "--sm", "sm_90a"]
    assert CliRunner().invoke(cli, args + ["--prepare-only"]).exit_code == 0
    ran: list[str] = []

    def run(loaded, tasks, jobs, on_progress, on_done, gpu=False, **built):  # the entry itself red at gate 2
        ran.extend(t.kind for t in tasks)
        return [_Outcome(t.name, red=t.gates == [2]) for t in tasks]

    monkeypatch.setattr(kcontract.launch, "cuda_ready", lambda entries: None)
    monkeypatch.setattr(kcontract.launch, "gpu_problem", lambda: None)
    monkeypatch.setattr(kcontract.session.preflight, "device_sm", lambda: "sm_90")
    monkeypatch.setattr(kcontract.runner.run_tasks, "run_tasks", run)
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 1 and "the unmutated kernel is not green (gate 1)" in done.output, done.output
    assert set(ran) == {"entry"}  # no mutant ran
    judged = load(tmp_path / "cache" / "mutants" / "rmsnorm_h4096").mutants
    assert not any(m.status in ("killed", "survived") for m in judged)


def test_a_survivor_on_a_line_no_case_executes_is_a_missing_case_not_an_argument(tmp_path):
    from kcontract.contract.model import MutationArguments
    from kcontract.mutate.campaign import Campaign, MutantResult
    from kcontract.session.mutants import missed_lines

    receipt = tmp_path / "receipt.json"
    receipt.write_text(json.dumps({"kind": "kcontract-run", "format": 2,
                                   "coverage": {"e": {"source_sha256": "a" * 64, "missed_lines": [60, 61]}}}))
    assert missed_lines(str(receipt), "e", "a" * 64) == {60, 61}
    assert missed_lines(str(receipt), "e", "b" * 64) == set()  # coverage of another source says nothing
    campaign = Campaign("e", "k.cu", "a" * 64, "sm_90", 0, [
        MutantResult("m1", "compare", 60, "< -> <=", "d1", status="survived"),
        MutantResult("m2", "arith", 7, "+ -> -", "d2", status="survived"),
        MutantResult("m3", "arith", 8, "+ -> -", "d3", status="killed")], [])
    campaign.uncovered(missed_lines(str(receipt), "e", "a" * 64))
    campaign.argue(MutationArguments.model_validate({"equivalent": [
        {"line": 60, "change": "< -> <=", "reason": "no"}, {"line": 7, "change": "+ -> -", "reason": "yes"}]}))
    assert [m.status for m in campaign.mutants] == ["uncovered", "argued", "killed"]
    report = campaign.counts()
    assert report["score_pct"] == 50.0 and [s["ident"] for s in report["survivors"]] == ["m1"]


def test_a_mutants_time_limit_follows_the_unmutated_gates_seconds(tmp_path):
    from kcontract.mutate.campaign import MUTANT_TIMEOUT, TIMEOUT_FLOOR, fit_timeouts

    contract = tmp_path / "contract.yaml"
    contract.write_text(yaml.safe_dump({"controls": [
        {"name": "m1_g1", "gate": 1, "timeout": MUTANT_TIMEOUT},
        {"name": "m1_g2", "gate": 2, "timeout": MUTANT_TIMEOUT},
        {"name": "m2_g1", "gate": 1, "timeout": MUTANT_TIMEOUT, "trials": 10},
        {"name": "m1_g4", "gate": 4, "timeout": MUTANT_TIMEOUT}]}))
    fit_timeouts(contract, {1: 1.5, 2: 12.0, 4: 60.0})
    limits = {c["name"]: c["timeout"] for c in yaml.safe_load(contract.read_text())["controls"]}
    assert limits == {"m1_g1": TIMEOUT_FLOOR, "m1_g2": 48.0, "m2_g1": 60.0, "m1_g4": MUTANT_TIMEOUT}
