"""A project of the repository's RMSNorm at two targets with controls at gate 1, the one its family launches:
the repository's eps-after-sqrt control and, on request, one whose patch only adds a comment."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from kcontract.contract.patches import make
from tests.helpers.comment_controls import commented

ROOT = Path(__file__).resolve().parents[2]
SOURCE = "kernels/rms_norm.cu"
TARGETS = ["sm_80", "sm_90a"]


BROKEN = ("const float inv = rsqrtf(", "const float inv = no_such_function(")  # a patch that does not compile


def launching_project(folder: Path, comment: bool = False, broken: bool = False) -> Path:
    """The contract's path: entries `rms` and `rms_residual` (the file's two kernels, one case each), control
    `eps_after_sqrt` of `rms`, with `comment` control `comment` too, and with `broken` control `broken`, whose
    patch does not compile."""
    (folder / "kernels").mkdir(parents=True, exist_ok=True)
    (folder / "controls").mkdir(exist_ok=True)
    shutil.copy(ROOT / SOURCE, folder / SOURCE)
    shutil.copy(ROOT / "controls" / "rmsnorm_eps_after_sqrt.patch", folder / "controls")
    controls = [{"name": "eps_after_sqrt", "entry": "rms", "gate": 1, "fault": "eps added after the square root",
                 "patch": "controls/rmsnorm_eps_after_sqrt.patch"}]
    if comment:
        text = (ROOT / SOURCE).read_text()
        (folder / "controls" / "comment.patch").write_text(make(text, commented(text), SOURCE))
        controls.append({"name": "comment", "entry": "rms", "gate": 1, "fault": "a comment",
                         "patch": "controls/comment.patch"})
    if broken:
        text = (ROOT / SOURCE).read_text()
        assert text.count(BROKEN[0]) == 1
        (folder / "controls" / "broken.patch").write_text(make(text, text.replace(*BROKEN), SOURCE))
        controls.append({"name": "broken", "entry": "rms", "gate": 1, "fault": "no kernel at all",
                         "patch": "controls/broken.patch"})
    document = {"version": 1, "seed": 1, "targets": TARGETS,
                "kernels": {name: {"cuda": {"source": SOURCE, "symbols": {"rmsnorm": f"{name}<256>"},
                                            "launch": {"rmsnorm": {"threads": 256}}}}
                            for name in ("rms_norm", "rms_norm_residual")},
                "entries": [{"name": "rms", "family": "rmsnorm", "kernel": "rms_norm", "eps": 1.0e-6,
                             "cases": [{"name": "m4_h4096", "hidden": 4096, "rows": 4}]},
                            {"name": "rms_residual", "family": "rmsnorm", "kernel": "rms_norm_residual",
                             "form": "residual", "eps": 1.0e-6,
                             "cases": [{"name": "m4_h4096", "hidden": 4096, "rows": 4}]}],
                "controls": controls}
    contract = folder / "contract.yaml"
    contract.write_text(yaml.safe_dump(document, sort_keys=False, width=200))
    return contract
