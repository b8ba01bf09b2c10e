"""The public API says what it is: every export of `archdsl` and every public class and
function of the modules users program against has a docstring."""

from __future__ import annotations

import importlib
import inspect

import pytest

import archdsl

# The modules a user of the library reaches into (docs/contracts.md).
PUBLIC_MODULES = (
    "archdsl.ir",
    "archdsl.kinds",
    "archdsl.errors",
    "archdsl.files",
    "archdsl.markdown",
    "archdsl.buildup",
    "archdsl.lang.spec",
    "archdsl.lang.checks",
    "archdsl.lang.sites",
    "archdsl.lang.printer",
    "archdsl.lang.diagnostics",
    "archdsl.lang.limits",
    "archdsl.data.base",
    "archdsl.data.registry",
    "archdsl.data.corruptions",
    "archdsl.data.corrupted_copy",
    "archdsl.data.mnist",
    "archdsl.nn.build",
    "archdsl.nn.init_schemes",
    "archdsl.nn.summary",
    "archdsl.nn.compiled",
    "archdsl.run.recipe",
    "archdsl.run.train",
    "archdsl.run.epoch_metrics",
    "archdsl.run._run_dir",
    "archdsl.run.distributed",
    "archdsl.run.checkpoint",
    "archdsl.run.importer",
    "archdsl.run.statedict",
    "archdsl.run.evaluate",
    "archdsl.run.divergence",
    "archdsl.analysis.metrics",
    "archdsl.analysis.robustness",
    "archdsl.analysis.hessian",
    "archdsl.analysis.eigensolvers",
    "archdsl.analysis._hessian_operator",
    "archdsl.analysis._hessian_batches",
    "archdsl.analysis._solver_choice",
    "archdsl.analysis.fourier",
    "archdsl.analysis.report",
    "archdsl.analysis.pipeline",
    "archdsl.analysis.settings",
    "archdsl.analysis.landscape",
    "archdsl.analysis.cka",
    "archdsl.analysis.lesion",
    "archdsl.analysis.trajectory",
    "archdsl.search.space",
    "archdsl.search.objectives",
    "archdsl.search.fidelity.measures",
    "archdsl.search.walk.buildup",
    "archdsl.search.walk.planned",
    "archdsl.search.walk.samplers",
    "archdsl.search.walk.strategy",
    "archdsl.search.walk.registry",
    "archdsl.search.fidelity.budget",
    "archdsl.search.studies.storage",
    "archdsl.search.fidelity.trial",
    "archdsl.search.runner",
    "archdsl.search.fidelity.distributed",
    "archdsl.search.report.write",
    "archdsl.search.report.saved",
    "archdsl.search.studies._journal_check",
    "archdsl.search.studies._journal_file",
    "archdsl.search.studies.proxy",
    "archdsl.search.report._summary",
    "archdsl.search.report._lines",
    "archdsl.search.report._csv",
    "archdsl.search.report._figures",
    "archdsl.search.report._markdown",
)


def _undocumented(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    missing = []
    for name, value in vars(module).items():
        if name.startswith("_") or getattr(value, "__module__", None) != module_name:
            continue
        if inspect.isclass(value) or inspect.isfunction(value):
            doc = value.__doc__ or ""
            # A dataclass without a docstring gets its signature as one: that says nothing.
            if not doc.strip() or doc.startswith(f"{name}("):
                missing.append(name)
    return missing


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_classes_and_functions_have_docstrings(module_name):
    assert _undocumented(module_name) == []


def test_every_export_of_the_package_has_a_docstring():
    assert [name for name in archdsl.__all__[1:] if not (getattr(archdsl, name).__doc__ or "").strip()] == []
