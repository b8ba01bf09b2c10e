"""`archdsl train SPEC --dataset NAME`: train a design and keep a resumable run directory."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from archdsl.commands._say import say
from archdsl.commands.config_file import add_config_argument
from archdsl.commands.recipe_flags import add_recipe_arguments
from archdsl.commands.settings_flags import add_settings_arguments, settings_given
from archdsl.commands.spec_args import add_spec_argument

EXAMPLES = (
    "archdsl train tiny --dataset synthetic --recipe fast --epochs 5",
    "archdsl train tiny --dataset synthetic --recipe deit --epochs 8 --warmup-epochs 1 --aa none --mixup 0",
    "archdsl train alter50 --dataset cifar100 --data-root ~/data --out runs/a50",
    "archdsl train alter50 --dataset cifar100 --data-root ~/data --out runs/a50 --resume",
)


def register(subparsers) -> None:
    from archdsl.run import TrainConfig, TrainSettings, recipe_flags

    parser = subparsers.add_parser(
        "train",
        help="train a spec on a dataset (resumable run directory)",
        description=(
            "Train a design with the paper's DeiT-style recipe (`--recipe deit`), the reference's SGD "
            "recipe (`--recipe weak`) or a short SGD one (`--recipe fast`); every setting of the recipe "
            "is a flag. Each epoch writes metrics and a checkpoint to the run directory; "
            "`--resume` continues a stopped run exactly where it stopped."
        ),
    )
    add_spec_argument(parser)
    # Every setting is a field that declares its flag (default, bounds, help): the run's (TrainSettings),
    # the config's besides its recipe (TrainConfig: --recipe, --seed, --device, ...), the recipe's.
    add_settings_arguments(parser, TrainSettings)
    add_settings_arguments(parser, TrainConfig, exclude=recipe_flags())
    add_recipe_arguments(parser)
    add_config_argument(parser)
    parser.set_defaults(func=run)


def settings_from_args(args: argparse.Namespace):
    """The command line as `archdsl.train`'s arguments: the run's settings and the TrainConfig fields given."""
    from archdsl.run import TrainConfig, TrainSettings

    return TrainSettings(**settings_given(args, TrainSettings)), settings_given(args, TrainConfig)


def resume_command(args: argparse.Namespace, run_dir: Path) -> str:
    """The command that continues this run: the spec, its settings file and the data it reads
    (those given: the run's config.json holds the rest), the run directory, --resume."""
    words = ["archdsl", "train", str(args.spec)]
    for flag in ("--config", "--dataset", "--data-root", "--classes", "--image-size"):
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            words += [flag, str(value)]
    words += ["--out", str(run_dir), "--resume"]
    return shlex.join(words)


def run(args: argparse.Namespace) -> int:
    from archdsl.run import command_scope

    with command_scope():  # under torchrun: rank 0 prints; every rank leaves the process group at the end
        return _train(args)


def _train(args: argparse.Namespace) -> int:
    from archdsl.run import LAST_CHECKPOINT, TENSORBOARD_DIR, plan_training, quiet_followers, run_training

    settings, given = settings_from_args(args)
    plan = plan_training(args.spec, settings, given)
    quiet_followers(plan.ranks)
    for line in plan.describe():
        say(line, err=True)
    run_dir = plan.run_dir
    if settings.log == "tensorboard":
        say(f"logging to TensorBoard: tensorboard --logdir {run_dir / TENSORBOARD_DIR}", err=True)
    try:
        result = run_training(plan)
    except KeyboardInterrupt:
        if not (run_dir / LAST_CHECKPOINT).exists():
            say("archdsl: interrupted before the first epoch finished; nothing was saved", err=True)
            return 130
        say(
            f"archdsl: interrupted; the last finished epoch is saved in {run_dir / LAST_CHECKPOINT}\n"
            f"  continue with: {resume_command(args, run_dir)}",
            err=True,
        )
        return 130

    for line in plan.summary(result):
        say(line)
    return 0
