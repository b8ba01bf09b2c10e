"""A rank of the data-parallel tests (tests/test_train_distributed.py), started by torchrun.

    torchrun --nproc-per-node N tests/_ddp_worker.py OUT_DIR

trains two tiny designs on the same small data with the same global batch, one with BatchNorm and
one without, and saves each rank's final weights to OUT_DIR/<design>-<world>-<rank>.pt.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from archdsl.data.base import ImageSet
from archdsl.lang.spec import parse_spec
from archdsl.run import distributed
from archdsl.run.recipe import TrainConfig
from archdsl.run.train import train

# LayerNorm only: each image is normalised by itself, so the ranks' share of a batch does not matter.
NO_BATCHNORM = """
arch flat {
    input   3x16x16
    classes 4
    stem    patch(4, 32)
    head    class
    pos     absolute
    stage s1(width=32) { attn(2, global) mlp(2) }
}
"""
# A conv stage: BatchNorm normalises with the statistics of each rank's share of the batch.
WITH_BATCHNORM = """
arch bn {
    input   3x16x16
    classes 4
    stem    conv3x3(8)
    conv  = basic
    stage c1(width=8) { conv }
}
"""
DESIGNS = {"flat": NO_BATCHNORM, "bn": WITH_BATCHNORM}
# No augmentation, no dropout: what each image contributes to a step is then the same on any rank.
CONFIG = TrainConfig(
    recipe="fast", epochs=2, batch_size=16, lr=0.05, crop_padding=0, hflip=0.0, device="cpu", optimize=False
)


def images(n: int, seed: int) -> ImageSet:
    """Noisy single-colour images, a colour per class."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    colours = np.random.default_rng(1).integers(0, 256, (4, 3))
    pixels = np.clip(rng.normal(0, 30, (n, 16, 16, 3)) + colours[labels][:, None, None, :], 0, 255)
    return ImageSet("colours", pixels.astype(np.uint8), labels.astype(np.int64), 4, (0.5,) * 3, (0.25,) * 3)


def main(out: Path) -> None:
    torch.set_num_threads(1)
    ranks = distributed.join_from_env("cpu", timeout_s=60)
    for name, spec in DESIGNS.items():
        result = train(parse_spec(spec), images(96, 0), images(16, 1), CONFIG, progress=False)
        torch.save(result.model.state_dict(), out / f"{name}-{ranks.world_size}-{ranks.rank}.pt")
    distributed.leave()
    distributed.exit_rank(0)  # as `archdsl` ends a rank: gloo's threads outlive the group


if __name__ == "__main__":
    main(Path(sys.argv[1]))


def rank_that_dies(rank: int, port: int, out: str) -> None:
    """Rank 1 of 2 exits in the middle of the first epoch; rank 0 writes the error it ends with to OUT/rank0.txt."""
    import os

    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1")
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    distributed.join_from_env("cpu", timeout_s=30)

    def die(step) -> None:
        if rank == 1 and step.step == 1:
            os._exit(3)

    try:
        train(parse_spec(NO_BATCHNORM), images(96, 0), images(16, 1), CONFIG, progress=False, on_step=die)
    except Exception as err:  # what the test checks
        (Path(out) / f"rank{rank}.txt").write_text(f"{type(err).__name__}: {err}")
    finally:
        # As `archdsl train` ends a rank: the group closed, then the process ended without the
        # interpreter's teardown. gloo's threads outlive the group, and that teardown once aborted
        # here ("terminate called without an active exception", SIGABRT instead of exit 0).
        distributed.leave()
        if rank == 0:
            distributed.exit_rank(0)
