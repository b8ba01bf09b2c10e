"""What `archdsl analyze` and `archdsl eval` (`archdsl.analyze`, `archdsl.evaluate`) read besides a
checkpoint and the measures' settings: the data, the device, a baseline. Each field is the
command's flag (archdsl.commands.settings_flags makes it); the settings several commands share
(where the data lives, the device, the fast copy, progress bars) are archdsl.common_settings'.

Light: pydantic only, so that the commands build their --help without torch.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Field, PositiveInt

from archdsl.analysis.pipeline import DEFAULT_MEASURES, MEASURES, check_measures
from archdsl.common_settings import (
    DataSettings,
    DeviceSettings,
    OptimizeSettings,
    ProgressSettings,
    Severity,
    flag_field,
)

__all__ = ["AnalysisSources", "EvalSettings"]

ROBUSTNESS = "robustness"  # analyze's --help section of the corrupted sets


def _flag(flag: str, help: str, **options: Any) -> Any:
    """A field of the data or the device with its flag (`common_settings.flag_field`), default None."""
    return flag_field(flag, help, default=None, **options)


def _distinct(names: tuple[str, ...]) -> tuple[str, ...]:
    """Names as given, repeats dropped; at least one."""
    if not names:
        raise ValueError("expected comma-separated names")
    return tuple(dict.fromkeys(names))


# Corruption names (`fog,contrast`), checked by the loader that knows them.
Names = Annotated[tuple[str, ...], AfterValidator(_distinct)]
# Corrupted sets: the same flags in analyze and eval.
_CORRUPTIONS = ("--corruptions", "these corruptions, comma-separated")
_SEVERITIES = ("--severities", "these severities, e.g. 1,5")


class AnalysisSources(DataSettings, DeviceSettings, OptimizeSettings, ProgressSettings):
    """What an analysis reads besides the checkpoint: what to measure, the data, the device, a baseline."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    measures: Annotated[tuple[str, ...], AfterValidator(check_measures)] | None = _flag(
        "--metrics",
        f"comma-separated subset of {','.join(MEASURES)}",
        metavar="LIST",
        default_text=f"{','.join(DEFAULT_MEASURES)}; hessian for a run directory",
    )
    dataset: str | None = _flag("--dataset", "dataset", metavar="NAME", default_text="the checkpoint's, else synthetic")
    corrupted: str | None = _flag(
        "--corrupted",
        "corrupted dataset: a -c name, or folder:PATH of a released set in the layout "
        "<corruption>/<severity>/<class>/* (ImageNet-C)",
        metavar="NAME",
        default_text="<dataset>-c; generated for folder: and hf:",
        group=ROBUSTNESS,
    )
    corruptions: Names | None = _flag(
        _CORRUPTIONS[0], f"only {_CORRUPTIONS[1]}", metavar="A,B", default_text="all", group=ROBUSTNESS
    )
    severities: tuple[Severity, ...] | None = _flag(
        _SEVERITIES[0], f"only {_SEVERITIES[1]}", metavar="S,S", default_text="all", group=ROBUSTNESS
    )
    baseline: str | None = _flag(
        "--baseline",
        "also report Hendrycks' mCE relative to this earlier `archdsl analyze` result (its metrics.json)",
        metavar="METRICS_JSON",
        default_text="none",
        group=ROBUSTNESS,
    )


class EvalSettings(DataSettings, DeviceSettings, OptimizeSettings, ProgressSettings):
    """What `archdsl eval` (and `archdsl.evaluate`) measures, and how."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dataset: str | None = _flag(
        "--dataset",
        "dataset; a name ending in -c (cifar100-c, synthetic-c) is measured per corruption and severity",
        metavar="NAME",
        default_text="the checkpoint's",
    )
    corrupted: str | None = _flag(
        "--corrupted",
        "measure on these corrupted sets instead, read as --dataset's test split: a -c name, or folder:PATH of "
        "a released set in the layout <corruption>/<severity>/<class>/* (ImageNet-C)",
        metavar="NAME",
        default_text="none",
    )
    corruptions: Names | None = _flag(
        _CORRUPTIONS[0],
        f"corrupted sets (a -c dataset, --corrupted): {_CORRUPTIONS[1]}",
        metavar="A,B",
        default_text="all",
    )
    severities: tuple[Severity, ...] | None = _flag(
        _SEVERITIES[0],
        f"corrupted sets (a -c dataset, --corrupted): {_SEVERITIES[1]}",
        metavar="S,S",
        default_text="all",
    )
    batch_size: PositiveInt = Field(
        default=256, description="evaluation batch size", json_schema_extra={"flag": "--batch-size", "metavar": "N"}
    )
