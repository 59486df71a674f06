"""The documentation's examples work as written."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from kcontract.contract.loader import load_contract

ROOT = Path(__file__).resolve().parents[1]


def test_the_registration_example_loads_as_written(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "pkg" or m.startswith("pkg.")]:  # other tests' `pkg`
        monkeypatch.delitem(sys.modules, name)
    text = (ROOT / "docs" / "kernel-contract.md").read_text()
    section = text[text.index("## 4. Registering a kernel"):]
    example = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "module.py").write_text("def fn(**buffers):\n    pass\n")
    (tmp_path / "contract.yaml").write_text(example)
    loaded = load_contract(str(tmp_path / "contract.yaml"))
    assert [e.name for e in loaded.entries] == ["my_decode_d256"]
    assert loaded.entries[0].gates == [1, 2, 3, 4] and loaded.entries[0].timeout == 300
