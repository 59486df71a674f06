"""The reference cache: warm runs reuse references, corrupt or stale copies are rebuilt, --no-cache computes all."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from kcontract.cli import cli
from kcontract.problem import Checked, Expected, OutputSpec, Problem, Reference
from kcontract.refcache import ReferenceCache, fingerprint
from kcontract.gatetable import Suite

ROOT = Path(__file__).resolve().parent.parent
CPU = str(ROOT / "tests" / "contracts" / "cpu.yaml")
SELECT = ["--only", "np_decode_d256_g3", "--no-controls"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONTRACT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KCONTRACT_IN_PROCESS", "1")
    return tmp_path / "cache" / "references"


@pytest.fixture(scope="module")
def cold_run(tmp_path_factory) -> SimpleNamespace:
    """One cold run of the selection, in process: its JSON report and the cache it filled."""
    folder = tmp_path_factory.mktemp("cold")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KCONTRACT_CACHE", str(folder / "cache"))
        patch.setenv("KCONTRACT_IN_PROCESS", "1")
        document = run(folder)
    return SimpleNamespace(document=document, cache=folder / "cache")


@pytest.fixture
def cold(cold_run, cache) -> dict:
    """The cold run's report, its cache copied into this test's cache folder as if the test had run it."""
    shutil.copytree(cold_run.cache, cache.parent)
    return cold_run.document


def run(tmp_path, *extra) -> dict:
    report = tmp_path / "run.json"
    done = CliRunner().invoke(cli, ["run", "--contract", CPU, *SELECT, "--json", str(report), *extra])
    assert done.exit_code == 0, done.output
    return json.loads(report.read_text())


def gate_counts(document: dict) -> dict:
    return {g: (r["checked"], r["decided"], r["bit_equal"], r["within"], r["failures"])
            for g, r in document["entries"][0]["gates"].items()}


def test_a_warm_run_takes_every_reference_from_the_cache_and_finds_the_same(cold, tmp_path):
    assert cold["references"]["cache"] == "cold" and cold["references"]["miss"] > 0
    warm = run(tmp_path)
    assert warm["references"] == {**cold["references"], "hit": cold["references"]["miss"], "miss": 0, "cache": "warm"}
    assert gate_counts(warm) == gate_counts(cold)
    lookups = cold["inputs"]["hit"] + cold["inputs"]["miss"]  # gates of one run share drawn rows
    assert cold["inputs"]["miss"] > 0 and warm["inputs"] == {**cold["inputs"], "hit": lookups, "miss": 0,
                                                              "cache": "warm"}


def test_a_corrupt_reference_is_rebuilt_not_trusted(cold, cache, tmp_path):
    files = sorted(cache.rglob("*.bin"))
    assert len(files) == cold["references"]["miss"] + cold["inputs"]["miss"]
    data = bytearray(files[0].read_bytes())
    data[-20] ^= 0xFF  # one flipped byte in the payload
    files[0].write_bytes(bytes(data))
    said = CliRunner().invoke(cli, ["run", "--contract", CPU, *SELECT])
    assert "note: cached " in said.output and f"{files[0]} were damaged (checksum); removed and made again" in \
        said.output, said.output
    files[0].write_bytes(bytes(data))
    again = run(tmp_path)
    lookups = sum(cold[w]["hit"] + cold[w]["miss"] for w in ("references", "inputs"))
    assert sum(again[w]["rebuilt"] for w in ("references", "inputs")) == 1
    assert sum(again[w]["hit"] for w in ("references", "inputs")) == lookups - 1
    assert gate_counts(again) == gate_counts(cold)
    files[1].write_bytes(b"not a cache file")
    last = run(tmp_path)
    assert last["references"]["rebuilt"] + last["inputs"]["rebuilt"] == 1


def test_another_seed_is_another_key_and_no_cache_computes_everything(cold, tmp_path):
    assert run(tmp_path, "--seed", "7")["references"]["cache"] == "cold"
    off = run(tmp_path, "--no-cache")
    for what in ("references", "inputs"):
        assert off[what]["cache"] == "off" and off[what]["hit"] == off[what]["miss"] == 0


def test_profile_splits_each_gate_and_prints_at_80_columns(cold, tmp_path):
    for result in cold["entries"][0]["gates"].values():
        p = result["profile"]
        stages = sum(p[f"{s}_s"] for s in ("inputs", "reference", "launch", "compare", "other"))
        assert abs(stages - result["seconds"]) < 0.05 and p["peak_host_mb"] > 10
    done = CliRunner(env={"COLUMNS": "80"}).invoke(cli, ["run", "--contract", CPU, *SELECT, "--profile"])
    assert done.exit_code == 0
    table = [line for line in done.output.splitlines() if line.startswith(" np_decode_d256_g3")]
    assert len(table) == 4 and all(len(line) <= 80 for line in table), done.output
    assert "hit" in table[0]


def small_checked(value: int) -> Checked:
    problem = Problem("p", {"x": np.full(4, value, dtype=np.uint16)}, {"out": OutputSpec((4,), "bf16")}, {})
    zeros = np.zeros(4)
    return Checked("c", problem, lambda: Reference([Expected("out", "bf16", zeros, zeros, zeros, ("i",))]))


def test_the_key_follows_the_inputs_bit_for_bit():
    assert fingerprint(small_checked(1).problem) != fingerprint(small_checked(2).problem)
    assert fingerprint(small_checked(1).problem) == fingerprint(small_checked(1).problem)


def test_a_disabled_cache_never_touches_disk(tmp_path):
    cache = ReferenceCache(tmp_path / "refs", enabled=False)
    cache.reference(None, 1, small_checked(1))
    assert not (tmp_path / "refs").exists()


def test_entries_alike_but_for_their_name_do_not_share_drawn_rows(tmp_path):
    from kcontract.contract.loader import load_contract

    loaded = load_contract(CPU, import_kernels=False)
    base = loaded.entry("np_decode_d256_g3").family
    store = ReferenceCache(tmp_path / "refs")
    rows = []
    for name in ("first", "second"):
        family = type(base)(name, base.spec, 5)
        family.store = store
        rows.append(family._rows(family.cases(Suite.REALISTIC)[0]))
    assert not np.array_equal(rows[0][0].k, rows[1][0].k)  # each entry's own stream, cached apart


def test_prune_removes_the_least_recently_used_first_down_to_the_cap(tmp_path, monkeypatch):
    import os
    import time

    from kcontract.cachesize import items, keep_under_cap, parse_size, prune

    root = tmp_path / "cache"
    for i, (kind, path) in enumerate([("compile", "ab/ab01/module.cubin"), ("reference", "references/cd/cd02.bin"),
                                      ("mutants", "mutants/entry/campaign.json"), ("compile", "ef/ef03/module.cubin")]):
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"x" * 1000)
        os.utime(target, (time.time() - 1000 * (4 - i),) * 2)  # the first written is the least recently used
    assert sorted(i.kind for i in items(root)) == ["compile", "compile", "mutants", "reference"]
    removed = prune(root, 2500)
    assert [i.path.name for i in removed] == ["ab01", "cd02.bin"]
    assert parse_size("4GiB") == 4 << 30 and parse_size("500MB") == 500_000_000 and parse_size("off") == 0
    monkeypatch.setenv("KCONTRACT_CACHE_MAX", "1500")
    oldest, newest = min(i.used for i in items(root)), max(i.used for i in items(root))
    assert keep_under_cap(root, oldest) is None  # over the cap, but all of it was used since: kept
    note = keep_under_cap(root, newest + 10)
    assert note.endswith("over its cap of 1.5 KiB ($KCONTRACT_CACHE_MAX): removed the 1 least recently used items "
                         "this command did not use"), note
    assert [i.path.name for i in items(root)] == ["ef03"]
    done = CliRunner().invoke(cli, ["cache", "prune", "--contract", CPU, "--all"], env={"KCONTRACT_CACHE": str(root)})
    assert done.exit_code == 0 and "CACHE 0 bytes in 0 items left" in done.output, done.output
    info = CliRunner().invoke(cli, ["cache", "info", "--contract", CPU], env={"KCONTRACT_CACHE": str(root)})
    assert info.exit_code == 0 and "cap 1.5 KiB" in info.output or "cap 1500 bytes" in info.output, info.output
    bad = CliRunner().invoke(cli, ["cache", "prune", "--contract", CPU, "--max-size", "lots"])
    assert bad.exit_code == 2 and "--max-size 'lots': expected a size such as 4GiB" in bad.output


def test_a_cache_hit_marks_its_item_used(cold, cache, tmp_path):
    import os

    files = sorted(cache.rglob("*.bin"))
    for f in files:
        os.utime(f, (1_000_000, 1_000_000))
    run(tmp_path)
    assert all(f.stat().st_mtime > 1_000_000 for f in files)
