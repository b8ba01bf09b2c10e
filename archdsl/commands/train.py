"""`archdsl train SPEC --dataset NAME`: train a design and keep a resumable run directory."""

from __future__ import annotations

import argparse
import sys

from archdsl.commands._args import (
    NO_PROGRESS_HELP,
    add_data_arguments,
    add_dist_timeout_argument,
    add_optimize_argument,
    device_name,
    fraction,
    non_negative_int,
)
from archdsl.commands.config_file import add_config_argument
from archdsl.commands.recipe_flags import add_recipe_arguments, recipe_settings
from archdsl.commands.settings_flags import add_settings_arguments, settings_given
from archdsl.run import DEFAULT_RECIPE, RECIPES  # torch-free

EXAMPLES = (
    "archdsl train tiny --dataset synthetic --recipe fast --epochs 5",
    "archdsl train tiny --dataset synthetic --recipe deit --epochs 8 --warmup-epochs 1 --aa none --mixup 0",
    "archdsl train alter50 --dataset cifar100 --data-root ~/data --out runs/a50",
    "archdsl train alter50 --dataset cifar100 --data-root ~/data --out runs/a50 --resume",
)


def register(subparsers) -> None:
    from archdsl.run import TrainSettings

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
    parser.add_argument("spec", help="a .arch file or a built-in spec name (e.g. alter50)")
    # The run's settings (TrainSettings declares each: default, bounds, help, flag).
    add_settings_arguments(parser, TrainSettings)
    add_data_arguments(parser)
    parser.add_argument(
        "--recipe",
        choices=RECIPES,
        help=f"training recipe: deit (the paper's), weak (the reference's SGD one) or fast "
        f"(short runs); each flag below defaults to the recipe's value (default: {DEFAULT_RECIPE})",
    )
    recipe = parser.add_argument_group("recipe settings (timm train.py's names; docs/training.md)")
    add_recipe_arguments(recipe)
    parser.add_argument(
        "--initial-checkpoint",
        metavar="FILE",
        help="start from these weights instead of a fresh model: an archdsl checkpoint, or any file "
        "`archdsl import` reads (the reference's .pth.tar, a timm file, a state dict); not with --resume",
    )
    parser.add_argument("--seed", type=int, metavar="N", help="random seed (default: 0)")
    parser.add_argument(
        "--subset", type=fraction, metavar="FRACTION",
        help="train on a class-stratified fraction of the training set (default: 1; the test set stays whole)",
    )  # fmt: skip
    parser.add_argument("--device", type=device_name, help="auto (default), cpu, cuda, cuda:N or mps")
    parser.add_argument(
        "--workers", type=non_negative_int, metavar="N", help="data-loading worker processes (default: 0)"
    )
    parser.add_argument(
        "--resident",
        action="store_true",
        default=None,
        help="keep the training set on the device and augment there (recipes without RandAugment)",
    )
    add_optimize_argument(parser, default=None)  # None: the config's (on), or the resumed run's
    distributed = parser.add_argument_group("under torchrun (docs/training.md: Data-parallel training)")
    distributed.add_argument(
        "--sync-bn",
        action="store_true",
        default=None,
        help="normalise BatchNorm with the global batch's statistics (torch's SyncBatchNorm; CUDA only)",
    )
    add_dist_timeout_argument(distributed)
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
    add_config_argument(parser)
    parser.set_defaults(func=run)


# argparse destination -> TrainConfig field, for the flags that set a config value (besides the
# recipe's own, archdsl.commands.recipe_flags).
_CONFIG_FLAGS = {
    "recipe": "recipe",
    "initial_checkpoint": "initial_checkpoint",
    "seed": "seed",
    "subset": "subset",
    "device": "device",
    "workers": "workers",
    "resident": "resident",
    "optimize": "optimize",
    "sync_bn": "sync_bn",
}


def settings_from_args(args: argparse.Namespace):
    """The command line as `archdsl.train`'s arguments: the run's settings and the TrainConfig fields given."""
    from archdsl.run import TrainSettings

    # The run's flags are TrainSettings' own; those shared with other commands are copied here.
    settings = TrainSettings(
        **settings_given(args, TrainSettings), data_root=args.data_root, download=args.download,
        progress=not args.no_progress, dist_timeout=args.dist_timeout,
    )  # fmt: skip
    given = {field: getattr(args, dest) for dest, field in _CONFIG_FLAGS.items() if getattr(args, dest) is not None}
    given.update(recipe_settings(args))
    return settings, given


def run(args: argparse.Namespace) -> int:
    from archdsl.run import command_scope

    with command_scope():  # under torchrun: rank 0 prints; every rank leaves the process group at the end
        return _train(args)


def _train(args: argparse.Namespace) -> int:
    from archdsl.run import (
        FINAL_CHECKPOINT,
        LAST_CHECKPOINT,
        TENSORBOARD_DIR,
        plan_training,
        quiet_followers,
        run_training,
    )

    settings, given = settings_from_args(args)
    plan = plan_training(args.spec, settings, given)
    quiet_followers(plan.ranks)
    for line in plan.describe():
        print(line, file=sys.stderr)
    run_dir = plan.run_dir
    if settings.log == "tensorboard":
        print(f"logging to TensorBoard: tensorboard --logdir {run_dir / TENSORBOARD_DIR}", file=sys.stderr)
    try:
        result = run_training(plan)
    except KeyboardInterrupt:
        if not (run_dir / LAST_CHECKPOINT).exists():
            print("archdsl: interrupted before the first epoch finished; nothing was saved", file=sys.stderr)
            return 130
        print(
            f"archdsl: interrupted; the last finished epoch is saved in {run_dir / LAST_CHECKPOINT}\n"
            f"  continue with: archdsl train {args.spec} --dataset {args.dataset} --out {run_dir} --resume",
            file=sys.stderr,
        )
        return 130

    arch, history = plan.arch, result.history
    best = max(history, key=lambda m: m.test_acc)
    total = sum(m.seconds for m in history)
    mean_speed = sum(m.img_per_s for m in history) / len(history)
    print(f"{arch.name} on {args.dataset}: {len(history)} epoch{'s' if len(history) != 1 else ''} in {total:.1f} s")
    print(f"  final test top-1 {history[-1].test_acc:.2%}  NLL {history[-1].test_loss:.4f}")
    print(f"  best  test top-1 {best.test_acc:.2%} (epoch {best.epoch})")
    print(f"  training speed   {mean_speed:.0f} img/s")
    print(f"  run directory    {run_dir} ({FINAL_CHECKPOINT}, metrics.csv)")
    return 0
