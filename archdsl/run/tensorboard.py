"""`archdsl train --log tensorboard`: each finished epoch's metrics as TensorBoard scalars.

TensorBoard is an extra (`pip install 'archdsl[tensorboard]'`): torch's `SummaryWriter` needs
the `tensorboard` package to write event files. They go into the run directory's
`tensorboard/` folder, one scalar step per finished epoch (with `--val-split`, the validation
curves too), so `tensorboard --logdir runs/train`
shows every run side by side. metrics.csv is written either way.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from archdsl.errors import UsageError, install_extra, visible
from archdsl.run._run_dir import TENSORBOARD_DIR
from archdsl.run.epoch_metrics import EpochMetrics

__all__ = ["TensorBoardLog", "require_tensorboard"]

# The scalar tags: train and test side by side under one name each.
_SCALARS = {
    "loss/train": "train_loss",
    "loss/test": "test_loss",
    "top1/train": "train_acc",
    "top1/test": "test_acc",
    "lr": "lr",
    "img_per_s": "img_per_s",
}
# With --val-split: the held-out validation images' curves, beside train and test.
_VALIDATION_SCALARS = {"loss/val": "val_loss", "top1/val": "val_acc"}


def require_tensorboard() -> None:
    """A `UsageError` naming the install when the tensorboard package is missing, or installed but
    unusable (it fails to import, or is older than torch's 1.15): checked before a run starts, so
    a broken install costs no run folder and no traceback."""
    try:
        found = importlib.util.find_spec("tensorboard") is not None
    except ValueError:  # a module set to None in sys.modules (how tests take it away)
        found = False
    if not found:
        raise UsageError(
            "--log tensorboard needs the tensorboard package",
            hint=f"{install_extra('tensorboard')}, or leave out --log (metrics.csv is written either way)",
        )
    try:  # what TensorBoardLog imports: torch checks the package's version there
        import torch.utils.tensorboard  # noqa: F401
    except Exception as err:  # a broken install raises whatever its own imports raise
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UsageError(
            f"--log tensorboard: the installed tensorboard package cannot be used ({visible(first)})",
            hint="reinstall or upgrade tensorboard (torch needs 1.15 or later), "
            "or leave out --log (metrics.csv is written either way)",
        ) from None


class TensorBoardLog:
    """An `on_epoch` callback for `archdsl.run.train.train`: one scalar step per finished epoch.

    `first_epoch` is the epoch the run (re)starts with: events a killed run logged from there on
    are purged, so a resumed run's curves have each epoch once.
    """

    def __init__(self, run_dir: str | Path, *, first_epoch: int = 1) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(Path(run_dir) / TENSORBOARD_DIR), purge_step=first_epoch)

    def __call__(self, metrics: EpochMetrics) -> None:
        for tag, name in _SCALARS.items():
            self.writer.add_scalar(tag, getattr(metrics, name), global_step=metrics.epoch)
        for tag, name in _VALIDATION_SCALARS.items():
            if getattr(metrics, name) is not None:  # a run without --val-split has no validation images
                self.writer.add_scalar(tag, getattr(metrics, name), global_step=metrics.epoch)
        self.writer.flush()  # a killed run keeps the epochs it finished, as its checkpoint does

    def close(self) -> None:
        self.writer.close()
