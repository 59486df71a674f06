"""Contract loading: a valid file loads; each mistake is one `file:line: path: expected, given` error."""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner
from pydantic import Field

import kcontract.family.registry as registry
from kcontract.cli import cli
from kcontract.contract.loader import load_contract
from kcontract.contract.model import Strict
from kcontract.errors import ContractError
from kcontract.families.attention.spec import DecodeSpec
from kcontract.family.base import Family
from kcontract.gatetable import Suite
from tests.helpers.large import many_entries
from tests.helpers.outside import SECRET, make_project


class FakeCase(Strict):
    """A named list of rows."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    rows: list[int] = Field(min_length=1)


class FakeSpec(Strict):
    """A small family spec: cases, a tuple of floats and a float."""

    cases: list[FakeCase] = Field(min_length=1)
    weights: tuple[float, float] = (1.0, 1.0)
    scale: float = 1.0


class _Trivial(Family):
    """A family whose suites run its declared cases and check nothing."""

    def cases(self, suite: Suite) -> list[str]:
        return [case.name for case in self.spec.cases] if suite in self.suites else []

    def checks(self, suite: Suite, case: str) -> list:
        return []

    def invariance(self, suite: Suite, case: str) -> list:
        return []

    def launch_shapes(self) -> list:
        return []


class FakeFamily(_Trivial):
    """A family feeding the realistic and variants suites (gates 1 and 2)."""

    name = "test.fake"
    Spec = FakeSpec
    suites = frozenset({Suite.REALISTIC, Suite.VARIANTS})


class FakeDecode(_Trivial):
    """The attention decode Spec without the attention family's code."""

    name = "test.decode"
    Spec = DecodeSpec
    suites = frozenset(Suite)


class _Installed:
    """An entry point that loads a class already in hand."""

    def __init__(self, cls):
        self.cls = cls

    def load(self):
        return self.cls


@pytest.fixture(autouse=True)
def fakes(monkeypatch):
    """Install the fake families beside the real ones, as plug-ins are found."""
    real = registry._plugins()
    monkeypatch.setattr(registry, "_plugins", lambda: {**real, "test.fake": _Installed(FakeFamily),
                                                       "test.decode": _Installed(FakeDecode)})


VALID = textwrap.dedent("""\
    version: 1
    seed: 7
    entries:
      - name: first
        family: test.fake
        kernel:
          python: "pkg.kernels:decode"
        cases:
          - name: short
            rows: [1, 2]
        weights: [1, 2.5]
        scale: 2
      - name: second
        family: test.fake
        kernel: {cuda: {source: k.cu, symbols: {main: "k<1>"}}}
        gates: [1]
        cases:
          - name: long
            rows: [3]
    controls:
      - name: broken-merge
        entry: first
        kernel: {python: "pkg.faults:merge"}
        gate: 2
        fault: merges chunks out of order
    known_findings:
      - entry: second
        gate: 1
        reason: rounding of the last chunk
    """)

DECODE = textwrap.dedent("""\
    version: 1
    seed: 3
    entries:
      - name: dec
        family: test.decode
        kernel: {python: "pkg.kernels:decode"}
        shape: {head_dim: 128, q_heads: 32, kv_heads: 8}
        values: {q_rms: [1, 1.1], peak_nats: 6}
        cases:
          - name: ring
            cache: {kind: ring, window: 8, ring: 16}
            rows: [0, 40]
          - name: lin
            cache: {kind: linear, length: 8}
            rows: [0, 7]
    """)


def edit(text: str, old: str, new: str) -> str:
    """`text` with its single `old` replaced by `new`."""
    assert text.count(old) == 1, old
    return text.replace(old, new)


KERNELS = {"__init__.py": "", "kernels.py": "def decode(**buffers):\n    pass\n",
           "faults.py": "def merge(**buffers):\n    pass\n"}


def write(tmp_path, text: str) -> str:
    """A contract file holding `text`, beside a package `pkg` with the Python kernels it names."""
    (tmp_path / "pkg").mkdir(exist_ok=True)
    for name, code in KERNELS.items():
        (tmp_path / "pkg" / name).write_text(code)
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(float* x) {}\n')
    path = tmp_path / "contract.yaml"
    path.write_text(text)
    return str(path)


def error(tmp_path, text: str) -> str:
    """The message load_contract raises for `text`."""
    path = write(tmp_path, text)
    with pytest.raises(ContractError) as caught:
        load_contract(path)
    return caught.value.message.replace(path, "F")


def cli_list(path: str):
    """`kcontract list --contract path`, stderr kept apart."""
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:  # click 8.2+ keeps stderr apart already
        runner = CliRunner()
    return runner.invoke(cli, ["list", "--contract", path])


def test_valid_contract_loads(tmp_path):
    loaded = load_contract(write(tmp_path, VALID))
    first, second = loaded.entries
    assert (first.name, first.family_name, first.gates, first.line) == ("first", "test.fake", [1, 2], 4)
    assert (second.gates, second.line, second.kernel_label) == ([1], 13, "k.cu")
    assert first.family.spec.weights == (1.0, 2.5) and isinstance(first.family.spec.scale, float)
    assert first.family.cases(Suite.REALISTIC) == ["short"] and first.family.seed == 7
    assert first.kernel_label == "pkg.kernels:decode" and first.timeout == 300.0
    assert [c.name for c in loaded.controls] == ["broken-merge"]
    assert loaded.known_findings[0].entry == "second"
    assert loaded.lines["entries[1].cases[0].rows"] == 19 and loaded.lines["controls[0].gate"] == 24


def test_decode_spec_accepts_lists_for_tuples_and_ints_for_floats(tmp_path):
    spec = load_contract(write(tmp_path, DECODE)).entries[0].family.spec
    assert spec.values.q_rms == (1.0, 1.1) and spec.values.peak_nats == 6.0
    assert spec.shape.group == 4 and [c.name for c in spec.cases] == ["ring", "lin"]


def test_exponent_floats_are_numbers(tmp_path):
    loaded = load_contract(write(tmp_path, edit(VALID, "scale: 2", "scale: 1e-3")))
    assert loaded.entries[0].family.spec.scale == 0.001


MISTAKES = [
    # (what, old, new, expected message start, words in the message)
    ("unknown top-level key", "seed: 7\n", "seed: 7\ncolour: red\n",
     "F:3: colour: unknown key; expected one of: version, seed, targets, require_receipt, folders, include, kernels, "
     "entries, controls, known_findings",
     ["given: 'colour'"]),
    ("unknown key inside a family case", "        rows: [1, 2]\n", "        rows: [1, 2]\n        row: 3\n",
     "F:11: entries[0].cases[0].row: unknown key; expected one of: name, rows, given: 'row'", []),
    ("unknown entry key", "    scale: 2\n", "    scale: 2\n    colr: 3\n",
     "F:13: entries[0].colr: unknown key; expected one of: name, family, kernel, gates, timeout, description, coverage,"
     " mutation, cases, weights, scale", []),
    ("wrong type", "seed: 7", "seed: seven", "F:2: seed: an integer, given: 'seven'", []),
    ("wrong type in entry", "    scale: 2\n", "    scale: 2\n    timeout: soon\n",
     "F:13: entries[0].timeout: a number, given: 'soon'", []),
    ("missing field", "    fault: merges chunks out of order\n", "",
     "F:21: controls[0].fault: required field missing", []),
    ("missing version", "version: 1\n", "", "F:1: version: required field missing", []),
    ("wrong version", "version: 1", "version: 2", "F:1: version: 1, given: 2", []),
    ("negative seed", "seed: 7", "seed: -1", "F:2: seed: an integer >= 0, given: -1", []),
    ("duplicate entry name", "controls:\n",
     "  - name: second\n    family: test.fake\n    kernel: {python: 'a:b'}\n    cases: [{name: c, rows: [1]}]\n"
     "controls:\n",
     "F:20: entries[2].name: each entry name once (first at line 13), given: 'second'", []),
    ("duplicate control name", "known_findings:\n",
     "  - name: broken-merge\n    entry: second\n    kernel: {python: 'a:b'}\n    gate: 1\n    fault: x\n"
     "known_findings:\n",
     "F:26: controls[1].name: each control name once (first at line 21), given: 'broken-merge'", []),
    ("control naming a missing entry", "    entry: first", "    entry: frist",
     "F:22: controls[0].entry: an entry name (one of: first, second), given: 'frist'", []),
    ("gate 6", "    gate: 2", "    gate: 6", "F:24: controls[0].gate: one of 1, 2, 3, 4, 5, given: 6", []),
    ("gate 'one'", "    gates: [1]", "    gates: [one]",
     "F:16: entries[1].gates[0]: one of 1, 2, 3, 4, 5, given: 'one'", []),
    ("gate true", "    gate: 2", "    gate: true", "F:24: controls[0].gate: one of 1, 2, 3, 4, 5, given: True", []),
    ("gate the family cannot feed", "    gates: [1]", "    gates: [1, 3]",
     "F:16: entries[1].gates[1]: a gate family test.fake feeds (1, 2, 5), given: 3", []),
    ("control gate its entry does not run", "    entry: first", "    entry: second",
     "F:24: controls[0].gate: a gate entry second runs (1), given: 2", []),
    ("known finding naming a missing entry", "  - entry: second", "  - entry: third",
     "F:27: known_findings[0].entry: an entry name (one of: first, second), given: 'third'", []),
    ("duplicate YAML key", "    gates: [1]\n", "    gates: [1]\n    gates: [2]\n",
     "F:17: entries[1]: each key once, given: 'gates' twice", []),
    ("YAML syntax error", "    scale: 2", "    scale: 2: 3", "F:12: not valid YAML: mapping values are not allowed",
     []),
    ("unknown family", "    family: test.fake\n    kernel: {cuda", "    family: test.nope\n    kernel: {cuda",
     "F:14: entries[1].family: a known family (one of: ", ["test.fake", "given: 'test.nope'"]),
    ("bad python kernel path", '"pkg.kernels:decode"', '"pkg.kernels.decode"',
     "F:7: entries[0].kernel.python: a Python kernel as module:function", ["given: 'pkg.kernels.decode'"]),
    ("kernel with both python and cuda", '      python: "pkg.kernels:decode"\n',
     '      python: "pkg.kernels:decode"\n      cuda: {source: k.cu, symbols: {}}\n',
     "F:6: entries[0].kernel: exactly one of `python`, `cuda` or `triton`, given: python and cuda", []),
    ("kernel with neither", '    kernel: {python: "pkg.faults:merge"}', "    kernel: {}",
     "F:23: controls[0].kernel: exactly one of `python`, `cuda` or `triton`, given: none", []),
    ("malformed target", "seed: 7\n", "seed: 7\ntargets: [sm_90, sm90]\n",
     "F:3: targets[1]: a target SM like 'sm_90', given: 'sm90'", []),
    ("str where int expected in the family spec", "rows: [1, 2]", 'rows: [1, "2"]',
     "F:10: entries[0].cases[0].rows[1]: an integer, given: '2'", []),
    ("str where float expected in the family spec", "weights: [1, 2.5]", 'weights: [1, "2.5"]',
     "F:11: entries[0].weights[1]: a number, given: '2.5'", []),
    ("empty case list in the family spec", "        rows: [3]", "        rows: []",
     "F:19: entries[1].cases[0].rows: at least 1 item, given: 0 items", []),
]


@pytest.mark.parametrize("what, old, new, start, words", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_each_mistake_is_located(tmp_path, what, old, new, start, words):
    message = error(tmp_path, edit(VALID, old, new))
    assert message.startswith(start), message
    for word in words:
        assert word in message, message
    assert "more error" not in message


DECODE_MISTAKES = [
    ("row past a linear cache", "rows: [0, 7]", "rows: [0, 9, 7]",
     "F:15: entries[0].cases[1].rows[1]: row positions below the cache length 8, given: 9"),
    ("q_heads not a multiple of kv_heads", "q_heads: 32, kv_heads: 8", "q_heads: 12, kv_heads: 5",
     "F:7: entries[0].shape: q_heads a multiple of kv_heads, given: 12 and 5"),
    ("str for a float deep in values", "peak_nats: 6", 'peak_nats: "6"',
     "F:8: entries[0].values.peak_nats: a number, given: '6'"),
    ("str in a tuple", "q_rms: [1, 1.1]", 'q_rms: [1, "1.1"]', "F:8: entries[0].values.q_rms[1]: a number, given: '1.1'"),
    ("ring cache missing its window", "{kind: ring, window: 8, ring: 16}", "{kind: ring, ring: 16}",
     "F:11: entries[0].cases[0].cache: a ring cache takes `window` and `ring`, given: {'kind': 'ring', 'ring': 16}"),
    ("unknown literal", "    values:", "    arithmetic: {exp: expm1}\n    values:",
     "F:8: entries[0].arithmetic.exp: one of 'expf', 'exp2f', 'ex2.approx', '__expf', given: 'expm1'"),
]


@pytest.mark.parametrize("what, old, new, start", DECODE_MISTAKES, ids=[m[0] for m in DECODE_MISTAKES])
def test_family_spec_mistakes_are_located(tmp_path, what, old, new, start):
    message = error(tmp_path, edit(DECODE, old, new))
    assert message.startswith(start), message


def test_several_mistakes_are_all_reported_in_line_order(tmp_path):
    text = edit(edit(edit(VALID, "    gate: 2", "    gate: 9"), "rows: [1, 2]", "rows: [x]"), "seed: 7", "seed: -1")
    path = write(tmp_path, text)
    with pytest.raises(ContractError) as caught:
        load_contract(path)
    assert [line.replace(path, "F") for line in caught.value.lines()] == [
        "F:2: seed: an integer >= 0, given: -1", "F:10: entries[0].cases[0].rows[0]: an integer, given: 'x'",
        "F:24: controls[0].gate: one of 1, 2, 3, 4, 5, given: 9"]
    done = CliRunner().invoke(cli, ["list", "--contract", path])
    assert done.exit_code == 2 and done.output.replace(path, "F").splitlines() == [
        f"ERROR: {line.replace(path, 'F')}" for line in caught.value.lines()]


def test_a_missing_cuda_source_is_refused_at_load_where_it_is_named(tmp_path):
    path = write(tmp_path, VALID)
    (tmp_path / "k.cu").unlink()
    with pytest.raises(ContractError) as caught:
        load_contract(path)
    assert caught.value.message.replace(path, "F") == (
        f"F:15: entries[1].kernel.cuda.source: an existing CUDA source file, relative to {tmp_path}, given: 'k.cu'")


def test_union_members_are_merged(tmp_path, monkeypatch):
    class UnionSpec(Strict):
        cases: list[FakeCase]
        mode: int | str = 0

    monkeypatch.setattr(FakeFamily, "Spec", UnionSpec)
    message = error(tmp_path, edit(VALID, "    scale: 2\n", "    mode: [1]\n").replace("    weights: [1, 2.5]\n", ""))
    assert message.startswith("F:11: entries[0].mode: an integer or a string, given: [1]"), message


def test_long_values_are_truncated(tmp_path):
    message = error(tmp_path, edit(VALID, "seed: 7", "seed: " + "x" * 100))
    assert message == f"F:2: seed: an integer, given: '{'x' * 56}..."


def test_missing_file(tmp_path):
    with pytest.raises(ContractError) as caught:
        load_contract(str(tmp_path / "nope.yaml"))
    assert caught.value.message == f"{tmp_path / 'nope.yaml'}: no such file; pass --contract FILE"


def test_top_level_list(tmp_path):
    assert error(tmp_path, "- version: 1\n") == "F:1: a mapping at the top level (version, seed, entries, ...), given: a list"


def test_empty_file(tmp_path):
    assert error(tmp_path, "# nothing yet\n").startswith("F: a contract; the file is empty")


def test_exotic_yaml_tags_are_refused(tmp_path):
    message = error(tmp_path, edit(VALID, "seed: 7", "seed: !!binary aGk="))
    assert message == "F:2: seed: a plain value (text, number, true/false, list or mapping), given: a !!binary value"


def test_cli_lists_a_valid_contract(tmp_path):
    result = cli_list(write(tmp_path, VALID))
    assert result.exit_code == 0, result.output
    assert "first" in result.stdout and "broken-merge" in result.stdout and "short" in result.stdout


@pytest.mark.parametrize("what, old, new, start", [
    ("control naming a missing entry", "    entry: first", "    entry: frist", ":22: controls[0].entry: an entry name"),
    ("duplicate YAML key", "    gates: [1]\n", "    gates: [1]\n    gates: [2]\n", ":17: entries[1]: each key once"),
    ("YAML syntax error", "    scale: 2", "    scale: 2: 3", ":12: not valid YAML"),
    ("str in the family spec", "rows: [1, 2]", 'rows: [1, "2"]', ":10: entries[0].cases[0].rows[1]: an integer"),
])
def test_cli_reports_mistakes_without_traceback(tmp_path, what, old, new, start):
    path = write(tmp_path, edit(VALID, old, new))
    result = cli_list(path)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"ERROR: {path}{start}"), result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_cli_missing_file(tmp_path):
    result = cli_list(str(tmp_path / "absent.yaml"))
    assert result.exit_code == 2
    assert result.stderr.startswith("ERROR: ") and "no such file; pass --contract FILE" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


class TestAttentionFamily:
    """The real attention.decode family, once it imports."""

    @pytest.fixture
    def fakes(self):
        """No fakes and real discovery here."""

    def test_attention_decode_entry_loads(self, tmp_path):
        pytest.importorskip("kcontract.families.attention.family")
        loaded = load_contract(write(tmp_path, DECODE.replace("test.decode", "attention.decode")))
        entry = loaded.entries[0]
        assert entry.family_name == "attention.decode" and entry.family.cases(Suite.REALISTIC) == ["ring", "lin"]
        assert entry.gates == [1, 2, 3, 4]  # a Python kernel: every suite, no records


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path):
    import time

    levels = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        levels.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    text = "version: 1\nseed: 1\n" + "\n".join(levels) + "\nentries: *i\n"
    started = time.monotonic()
    message = error(tmp_path, text)
    assert time.monotonic() - started < 5
    assert message.startswith("F:3: a document of at most 100,000 values; with its aliases expanded it holds more")


@pytest.mark.parametrize("text, where", [
    ("version: 1\nseed: 7\x00\n", "F:2:8: a control character, U+0000 (NUL), where YAML allows none: delete it, "
                                 "or write it as \\x00 inside a double-quoted string"),
    ("# a bell \x07 rings\nversion: 1\n", "F:1:10: a control character, U+0007 (BEL), where YAML allows none"),
    ("version: 1\nseed: 7\nentries: [\x1b]\n", "F:3:11: a control character, U+001B (ESC), where YAML allows none"),
    ("version: 1\nseed: '7\x85\x9f'\n", "F:2:10: a control character, U+009F (APC), where YAML allows none"),
    ("version: 1\nseed: 7 # \ufffe\n", "F:2:11: a character YAML does not allow, U+FFFE: delete it, or write "
                                      "it as \\uFFFE inside a double-quoted string"),
], ids=["NUL", "BEL in a comment", "ESC", "C1 after NEL", "noncharacter"])
def test_a_character_yaml_does_not_allow_is_located_by_line_and_column(tmp_path, text, where):
    assert error(tmp_path, text).startswith(where), error(tmp_path, text)


SECOND = "kernel: {cuda: {source: k.cu, "  # VALID's CUDA kernel, at line 15


@pytest.mark.parametrize("source", ["../elsewhere/secret.cu", "{elsewhere}/secret.cu", "linked.cu",
                                    "linked/secret.cu", "../elsewhere/absent.cu", "/etc/passwd"])
def test_a_kernel_source_outside_the_contract_folder_is_refused_unread(tmp_path, source):
    project = make_project(tmp_path)
    source = source.format(elsewhere=tmp_path / "elsewhere")
    message = error(project, edit(VALID, SECOND, f"kernel: {{cuda: {{source: {source}, "))
    shown = repr(source) if len(repr(source)) <= 60 else repr(source)[:57] + "..."  # long values are cut
    assert message == (f"F:15: entries[1].kernel.cuda.source: a file under the contract's folder {project} or a "
                       f"folder that `include:` names; move the file there, or add its folder to `include:`, given: "
                       f"{shown}"), message
    assert SECRET not in message


@pytest.mark.parametrize("options, at, what", [
    ("[-I../elsewhere]", 0, "folder"), ("[-Ilinked]", 0, "folder"), ("[-O3, --include-path, ../elsewhere]", 2, "folder"),
    ("['--include-path={elsewhere}']", 0, "folder"), ("[-include, linked/secret.cuh]", 1, "file"),
    ("['--pre-include=../elsewhere/secret.cuh']", 0, "file"),
])
def test_an_include_option_outside_the_contract_folder_is_refused(tmp_path, options, at, what):
    project = make_project(tmp_path)
    options = options.format(elsewhere=tmp_path / "elsewhere")
    message = error(project, edit(VALID, SECOND, f"kernel: {{cuda: {{options: {options}, source: k.cu, "))
    assert message.startswith(f"F:15: entries[1].kernel.cuda.options[{at}]: a {what} under the contract's folder "
                              f"{project} or a folder that `include:` names; move the"), message


def test_a_named_kernel_or_a_patch_outside_is_refused_where_it_is_written(tmp_path):
    project = make_project(tmp_path)
    named = edit(VALID, "entries:\n", "kernels:\n  out: {cuda: {source: linked.cu, symbols: {main: k}}}\nentries:\n")
    message = error(project, edit(named, '    kernel: {python: "pkg.faults:merge"}', "    kernel: out"))
    assert message.startswith("F:4: kernels.out.cuda.source: a file under the contract's folder"), message
    patched = edit(VALID, "    entry: first\n    kernel: {python: \"pkg.faults:merge\"}\n    gate: 2",
                   "    entry: second\n    patch: ../elsewhere/secret.patch\n    gate: 1")
    message = error(project, patched)
    assert message.startswith("F:23: controls[0].patch: a file under the contract's folder"), message
    assert SECRET not in message


def test_the_contract_folders_lie_inside_too(tmp_path):
    project = make_project(tmp_path)
    path = write(project, edit(VALID, "seed: 7\n", "seed: 7\nfolders: {kernels: [kernels, linked], records: /tmp}\n"))
    with pytest.raises(ContractError) as caught:
        load_contract(path)
    assert [line.replace(path, "F").split(" under")[0] for line in caught.value.lines()] == [
        "F:3: folders.kernels[1]: a folder", "F:3: folders.records: a folder"]


def test_include_lets_folders_outside_in(tmp_path):
    project = make_project(tmp_path)
    for folders, source in (("[../elsewhere]", "../elsewhere/secret.cu"), ("[linked]", "linked.cu"),
                            (f"[{tmp_path / 'elsewhere'}]", "linked/secret.cu")):
        text = edit(edit(VALID, SECOND, f"kernel: {{cuda: {{source: {source}, options: [-Ilinked], "),
                    "seed: 7\n", f"seed: 7\ninclude: {folders}\n")
        assert load_contract(write(project, text)).entries[1].kernel.cuda.source == source
    message = error(project, edit(VALID, "seed: 7\n", "seed: 7\ninclude: [k.cu, ../nowhere]\n"))
    assert message.startswith(f"F:3: include[0]: an existing folder, relative to {project}, given: 'k.cu'"), message


class TestFamiliesFoundOnce:
    """The installed families are read once, however many entries name them."""

    @pytest.fixture
    def fakes(self):
        """No fakes: the real entry points."""

    def test_a_thousand_entries_read_the_entry_points_once(self, tmp_path, monkeypatch):
        calls = []
        real = registry.entry_points
        monkeypatch.setattr(registry, "entry_points", lambda **kw: calls.append(kw) or real(**kw))
        getattr(registry._plugins, "cache_clear", lambda: None)()
        loaded = load_contract(str(many_entries(tmp_path, 1000)))
        assert len(loaded.entries) == 1000 and len(calls) == 1, len(calls)
