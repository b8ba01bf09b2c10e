"""The library's entry points (archdsl.train, archdsl.analyze, archdsl.evaluate) answer a bad or
unknown keyword with `UsageError` and a hint, as docs/python.md says, not pydantic's ValidationError."""

from __future__ import annotations

import pytest

import archdsl
from archdsl.errors import UsageError


@pytest.mark.parametrize(
    ("call", "message", "hint"),
    [
        (lambda: archdsl.train("tiny"), "bad training settings: dataset: Field required", None),
        (lambda: archdsl.train("tiny", dataset="synthetic", save_every=0), "save_every: Input should be greater", None),
        (
            lambda: archdsl.train("tiny", dataset="synthetic", epochs=2),
            "epochs: unknown setting",
            "`epochs` is a TrainConfig field: put it in config={...}",
        ),
        (lambda: archdsl.train("tiny", dataset="synthetic", dataroot="d"), "dataroot: unknown", "`data_root`"),
        (lambda: archdsl.analyze("x.safetensors", measurs=("acc",)), "bad analysis sources", "`measures`"),
        (
            lambda: archdsl.analyze("x.safetensors", hessian={"k": 3}),
            "hessian: unknown setting",
            "`hessian` is an AnalysisSettings field: put it in settings={...}",
        ),
        (lambda: archdsl.evaluate("x.safetensors", batch_size=0), "bad evaluation settings: batch_size", None),
        (lambda: archdsl.evaluate("x.safetensors", severity=3), "severity: unknown setting", "`severities`"),
    ],
)
def test_a_bad_keyword_is_a_usage_error_with_a_hint(call, message: str, hint: str | None) -> None:
    with pytest.raises(UsageError) as raised:
        call()
    assert message in raised.value.message
    if hint is not None:
        assert hint in (raised.value.hint or "")
