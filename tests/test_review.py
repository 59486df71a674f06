"""`kcontract review`: the ABBA schedule and its noise floor, verdicts, and a pull request reviewed against its base
in a throwaway repository, timed by a fake GPU clock (markdown, JSON, text, exit codes)."""

from __future__ import annotations

import json
import shutil

import pytest

from kcontract.receipts.receipt import Receipt
from kcontract.review.abba import BASE, HEAD, PLACEBO, SCHEDULE, Rounds
from kcontract.review.changes import Changes, EntryKernel, changes
from kcontract.review.markdown import SECTIONS
from kcontract.review.speed import FASTER, SLOWER, TOO_SLOW, UNCHANGED, Settings, judged
from kcontract.review.timing import time_entries
from kcontract.sassdiff.diff import CHANGED, NEW, SAME_BYTES, FunctionResult, SassDiff
from tests.helpers.cli import kcontract, no_traceback
from tests.helpers.review import CALLS, FakeClock, git, pull_request, review_here
from tests.helpers.toolchain import toolchain

TIMED = Changes(changed={"round": "machine code changed on sm_90"}, callers={"scale": "kernels/k.cu"})


def test_each_round_times_base_placebo_head_head_placebo_base_per_call():
    clock = FakeClock()
    time_entries(TIMED, clock, Settings(rounds=2))
    assert SCHEDULE == (BASE, PLACEBO, HEAD, HEAD, PLACEBO, BASE)
    first = [side for entry, label, side in clock.slots if (entry, label) == ("round", CALLS[0][0])]
    assert first == list(SCHEDULE) * 2
    assert [(e, label) for e, label, _ in clock.slots[::12]] == [("round", "n1024"), ("round", "n65536"),
                                                                 ("scale", "n1024"), ("scale", "n65536")]


def test_a_warming_gpu_cancels_out_of_abba_and_widens_the_noise_floor():
    """Times that grow with every slot timed (3 % a slot) change nothing A P B B P A: every side sits at the same
    mean slot. Timed A A B B instead, the head would read about 5.6 % slower with 2.9 % of noise, and fail."""
    drift = 0.03
    speeds = time_entries(TIMED, FakeClock(drift=drift), Settings(rounds=2, max_slower=2.0))
    assert [s.verdict for s in speeds] == [UNCHANGED] * 4
    assert all(s.change_pct == pytest.approx(0.0, abs=1e-9) for s in speeds)
    first = speeds[0]  # its A slots of round one are slots 0 and 5 of the whole run
    assert first.noise_pct == pytest.approx(100 * 5 * drift / (1 + 2.5 * drift))
    assert first.slots[BASE][0] == pytest.approx([10.0, 10.0 * (1 + 5 * drift)])


def test_a_slowdown_beyond_the_noise_and_the_limit_fails_and_names_the_call():
    speeds = time_entries(TIMED, FakeClock(slower={"scale": 5.0}, noise=0.5), Settings(max_slower=2.0))
    by_name = {s.name: s for s in speeds}
    slow = by_name["scale n65536 (n 65536)"]
    assert slow.verdict == TOO_SLOW and slow.fails and slow.role == "caller"
    assert 3.0 < slow.change_pct < 7.0 and slow.noise_pct <= 1.0
    assert {s.verdict for s in speeds if s.entry == "round"} == {UNCHANGED}


def test_a_build_that_reads_slower_only_for_being_loaded_again_is_unchanged():
    """The head and the placebo (the base's build loaded again, its inputs elsewhere) both read 4 % slower: the
    placebo shows that much is loading, not the change."""
    speeds = time_entries(TIMED, FakeClock(reloaded=4.0), Settings(max_slower=2.0))
    assert {s.verdict for s in speeds} == {UNCHANGED}
    assert all(s.change_pct == pytest.approx(4.0) and s.noise_pct == pytest.approx(4.0) for s in speeds)
    slowed = time_entries(TIMED, FakeClock(reloaded=4.0, slower={"round": 7.0}), Settings(max_slower=2.0))
    assert {s.verdict for s in slowed if s.entry == "round"} == {TOO_SLOW}


@pytest.mark.parametrize("a, b, verdict", [
    ([[100.0, 102.0]], [[101.0, 101.5]], UNCHANGED),  # +1.2 % inside 2 % of noise
    ([[100.0, 100.5]], [[95.0, 95.0]], FASTER),
    ([[100.0, 100.5]], [[102.0, 102.5]], SLOWER),  # +2 % beyond 0.5 % of noise, by less than 2 %
    ([[100.0, 100.5]], [[103.5, 103.5]], TOO_SLOW),  # +3.2 %: 2.7 % beyond the noise
])
def test_verdicts_against_the_noise_floor_and_the_limit(a, b, verdict):
    speed = judged("e", "c", "n 1", "changed", Rounds(base=a, head=b), max_slower=2.0)
    assert speed.verdict == verdict
    assert speed.noise_pct == pytest.approx(100 * (max(a[0]) - min(a[0])) / (sum(a[0]) / 2))


def test_a_head_whose_own_slots_disagree_has_that_much_noise():
    """Slot medians of a 7 us call on an H100 (two timing modes, 0.7 us apart): the A slots agree by chance, the B
    slots do not. The head's median reads 4.2 % slower, inside the 9.3 % its own two slots differ by."""
    a, b = [[7.2, 7.2], [7.23, 7.17]], [[7.17, 7.87], [7.17, 7.84]]
    speed = judged("e", "c", "n 1", "caller", Rounds(base=a, head=b), max_slower=2.0)
    assert speed.change_pct == pytest.approx(4.2, abs=0.1) and speed.verdict == UNCHANGED
    assert speed.noise_pct == pytest.approx(100 * 0.7 / 7.52, abs=0.05)


def test_an_entry_whose_kernel_only_gained_functions_says_so():
    diff = SassDiff("b", "h", ["sm_90"], [
        FunctionResult("kernels/k.cu", "k<1>", "sm_90", SAME_BYTES),
        FunctionResult("kernels/k.cu", "k<2>", "sm_90", NEW),
        FunctionResult("kernels/o.cu", "o<1>", "sm_90", CHANGED)])
    kernels = [EntryKernel("grown", "kernels/k.cu", "kernels/k.cu", ("k<1>", "k<2>"), True, False),
               EntryKernel("moved", "kernels/o.cu", "kernels/o.cu", ("o<1>",), True, False),
               EntryKernel("kept", "kernels/k.cu", "kernels/k.cu", ("k<1>",), True, False)]
    found = changes(diff, kernels)
    assert found.changed == {"grown": "new functions (k<2>)", "moved": "machine code changed on sm_90"}
    assert found.callers == {"kept": "kernels/k.cu"}


def test_a_call_the_base_does_not_make_is_timed_on_the_head_alone():
    speeds = time_entries(TIMED, FakeClock(new={"round"}), Settings(rounds=3))
    new = [s for s in speeds if s.entry == "round"]
    assert [s.verdict for s in new] == ["new"] * 2 and all(s.base_us is None for s in new)
    assert len(new[0].slots[HEAD]) == 3 and BASE not in new[0].slots


@pytest.fixture(scope="module")
def pr(tmp_path_factory):
    """The pull request's repository (tests/helpers/review.py) and its base commit."""
    toolchain()
    import os
    from pathlib import Path

    repo = tmp_path_factory.mktemp("review") / "repo"
    base, _ = pull_request(repo, Path(os.environ["KCONTRACT_CACHE"]))
    return repo, base


def _sections(markdown: str) -> list[str]:
    return [line[4:] for line in markdown.splitlines() if line.startswith("### ")]


def test_a_clean_change_passes_with_the_receipt_in_the_seeds_order(pr, tmp_path, monkeypatch):
    repo, base = pr
    md, doc, summary = tmp_path / "review.md", tmp_path / "review.json", tmp_path / "step.md"
    kept = tmp_path / "out" / "head.json"
    done = review_here(repo, "--base", base, "--markdown", str(md), "--json", str(doc), "--receipt", str(kept),
                       clock=FakeClock(noise=0.3), monkeypatch=monkeypatch, env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert done.exit_code == 0, done.output[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-1].startswith("REVIEW pass: 1 of 3 functions changed, 2 rows re-ran green, 4 calls within")
    assert [line for line in lines[:-1] if len(line) > 80] == []
    markdown = md.read_text()
    assert _sections(markdown) == list(SECTIONS)
    assert summary.read_text() == markdown
    assert "| round n1024 (n 1024) | 10.0 | 10.0 |" in markdown and "Current callers' speed: unchanged." in markdown
    assert "changed: kernels/k.cu tiny_round on sm_90" in markdown
    assert "kernels/o.cu: SASS equal on 1 of 1 SMs, 1 of 1 functions" in markdown
    review = json.loads(doc.read_text())
    assert review["exit_code"] == 0 and review["failures"] == []
    assert review["changed"] == {"round": "machine code changed on sm_90"} and review["callers"] == {
        "scale": "kernels/k.cu"}
    contract = review["contract"]
    assert contract["reran"] == ["round", "np_rmsnorm"]  # scale's k.cu changed, its machine code did not
    assert contract["base_summary"] == contract["head_summary"] and contract["base_receipt"] == \
        "receipts/contract-cpu.json"
    assert contract["exactness_run"]["rows"] == 1 and contract["exactness_run"]["bit_equal"] > 0
    head, at_base = Receipt.read(kept).rows(), Receipt.read(repo / "receipts" / "contract-cpu.json").rows()
    assert head.keys() == at_base.keys()
    assert [key for key in head if head[key] != at_base[key]] == [("entry", "round"), ("entry", "np_rmsnorm")]
    assert [(c["entry"], c["call"], c["verdict"]) for c in review["speed"]] == [
        ("round", "n1024", UNCHANGED), ("round", "n65536", UNCHANGED), ("scale", "n1024", UNCHANGED),
        ("scale", "n65536", UNCHANGED)]
    assert all(len(c["slots"][BASE]) == 2 and len(c["slots"][BASE][0]) == 2 for c in review["speed"])


def test_a_caller_slower_beyond_the_noise_fails_the_review_naming_the_call(pr, tmp_path, monkeypatch):
    repo, base = pr
    done = review_here(repo, "--base", base, "--max-slower", "1.5%", clock=FakeClock(slower={"scale": 4.0}),
                       monkeypatch=monkeypatch)
    assert done.exit_code == 1, done.output[-3000:]
    last = done.stdout.splitlines()[-1]
    assert last.startswith("REVIEW FAIL: scale n1024 (n 1024) is slower: 10.0 -> 10.4 us, +4.0 % (noise 0.0 %, "
                           "limit 1.5 %) (and 1 more)"), last


def test_a_row_red_at_the_head_fails_the_review(pr, tmp_path, monkeypatch):
    """The head's records not rewritten: round's launch record is stale, its row red."""
    repo = tmp_path / "repo"
    shutil.copytree(pr[0], repo)
    git(repo, "checkout", pr[1], "--", "records")
    done = review_here(repo, "--base", pr[1], clock=FakeClock(), monkeypatch=monkeypatch)
    assert done.exit_code == 1, done.output[-3000:]
    assert done.stdout.splitlines()[-1].startswith("REVIEW FAIL: the contract fails at the head: SUMMARY 4 kernels")


def test_without_a_gpu_the_speed_part_is_exit_3(pr, monkeypatch):
    import kcontract.launch

    monkeypatch.setattr(kcontract.launch, "gpu_problem", lambda: "CuPy is not installed")
    done = review_here(pr[0], "--base", pr[1], clock=None, monkeypatch=monkeypatch)
    assert done.exit_code == 3, done.output[-3000:]
    assert "round, scale need a CUDA GPU and CuPy; CuPy is not installed" in done.stderr


@pytest.mark.parametrize("args, said", [
    (("--base", "no-such-rev"), "ERROR: no commit `no-such-rev` in"),
    (("--base", "HEAD", "--max-slower", "two"), "kcontract review: --max-slower: 'two' is not a percentage"),
    (("--base", "HEAD", "--rounds", "0"), "kcontract review: --rounds: '0' is not a number of rounds"),
    (("--contract", "nowhere.yaml", "--base", "HEAD"), "ERROR: --contract nowhere.yaml: no such file"),
])
def test_bad_input_is_one_line_and_exit_2(pr, args, said):
    done = kcontract("review", *args, cwd=pr[0])
    no_traceback(done)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and done.stderr.startswith(said), done.stderr


def test_a_contract_outside_a_git_repository_is_exit_2(tmp_path):
    (tmp_path / "contract.yaml").write_text("version: 1\nseed: 1\nentries: []\n")
    done = kcontract("review", "--base", "HEAD", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip() == (
        f"ERROR: review compares git revisions, and {tmp_path} is not inside a git work tree"), done.stderr
