"""Coverage counters start from zero in every launcher: CuPy keeps one module per cubin path and process, so a
task would otherwise read the probes an earlier task's launches of the same cubin set (another entry's stand-in
taking an outcome this entry never can)."""

from __future__ import annotations

from types import SimpleNamespace

from kcontract.launch.cuda import CudaLauncher
from tests.helpers.module_globals import Module, fake_cupy


def launcher_over(module: Module) -> CudaLauncher:
    """A launcher whose loaded module is `module` (its constructor needs a GPU)."""
    launcher = CudaLauncher.__new__(CudaLauncher)
    launcher.cp, launcher.module = fake_cupy(module), module
    launcher.streams = (SimpleNamespace(synchronize=lambda: None),) * 2
    return launcher


def test_a_new_launcher_of_a_module_an_earlier_task_ran_reads_no_probe_until_its_own_launches():
    module = Module({"kcontract_cov_size": 3, "kcontract_cov_0": 1, "kcontract_cov_2": 1})  # probe 1 compiled out
    earlier = launcher_over(module)
    assert earlier.probes_run() == [0, 2]
    later = launcher_over(module)  # the same module, as CuPy hands it out again
    later.reset_probes()
    assert later.probes_run() == []
    module.variables["kcontract_cov_2"] = 1  # its own launch takes probe 2
    assert later.probes_run() == [2]


def test_a_module_without_probes_is_left_alone():
    module = Module({"other": 7})
    launcher = launcher_over(module)
    launcher.reset_probes()
    assert module.variables == {"other": 7} and launcher.probes_run() is None
