"""`archdsl train SPEC --dataset NAME`: train a design and keep a resumable run directory."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from archdsl.commands._args import (
    NO_PROGRESS_HELP,
    RUNS_DIR,
    add_data_arguments,
    add_dist_timeout_argument,
    add_optimize_argument,
    device_name,
    fraction,
    non_negative_int,
    positive_int,
)
from archdsl.commands.config_file import add_config_argument
from archdsl.commands.recipe_flags import add_recipe_arguments, recipe_settings
from archdsl.errors import UsageError, UserError
from archdsl.run.recipe import DEFAULT_RECIPE, RECIPE_DEFAULTS, RECIPES  # torch-free

EXAMPLES = (
    "archdsl train tiny --dataset synthetic --recipe fast --epochs 5",
    "archdsl train tiny --dataset synthetic --recipe deit --epochs 8 --warmup-epochs 1 --aa none --mixup 0",
    "archdsl train alter50 --dataset cifar100 --data-root ~/data --out runs/a50",
    "archdsl train alter50 --dataset cifar100 --data-root ~/data --out runs/a50 --resume",
)


def register(subparsers) -> None:
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
    parser.add_argument("--dataset", required=True, metavar="NAME", help="dataset name (e.g. synthetic, cifar100)")
    parser.add_argument(
        "--classes",
        type=positive_int,
        metavar="N",
        help="override the spec's number of classes (must match the dataset's)",
    )
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
    parser.add_argument("--out", metavar="DIR", help=f"run directory (default: {RUNS_DIR}/train/<spec>-<id>)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out from its last checkpoint (with a larger --epochs: extend it)",
    )
    parser.add_argument(
        "--save-every",
        type=positive_int,
        metavar="N",
        help="also keep the weights after every N-th epoch (epoch-NNNN.safetensors), e.g. for "
        "`archdsl analyze RUN_DIR --metrics hessian` over training",
    )
    parser.add_argument(
        "--log",
        choices=("tensorboard",),
        help="also log each epoch's metrics as TensorBoard scalars in DIR/tensorboard (needs the extra: "
        "pip install 'archdsl[tensorboard]', or pip install -e '.[tensorboard]' in a clone); metrics.csv is "
        "written either way",
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


def _train_state(path: Path) -> dict:
    """The JSON training state of a run's checkpoint (config, epoch, history); {} if none."""
    from archdsl.run.checkpoint import read_checkpoint_file, train_state_info

    _, metadata = read_checkpoint_file(path)
    return train_state_info(metadata, path)


def _saved_config(run_dir: Path) -> tuple[dict, int]:
    """The config a run was started with and the epochs it has finished (its last checkpoint), for `--resume`."""
    from archdsl.run.checkpoint import read_train_state
    from archdsl.run.train import LAST_CHECKPOINT, checked_resume

    path = run_dir / LAST_CHECKPOINT
    if not path.is_file():
        raise UserError(f"nothing to resume: {path} does not exist", hint="start the run without --resume")
    state = read_train_state(path)
    if state is None or "config" not in state.info:
        raise UserError(f"{path} holds no training state (was it written by `archdsl train`?)")
    info, _ = checked_resume(state, path)  # all of it checked before anything is printed
    return info.config.model_dump(mode="json"), info.epoch


def _refuse_foreign_files(run_dir: Path) -> None:
    """A new run writes config.json, metrics.csv, ... into --out: never over someone else's files."""
    from archdsl.run.train import is_run_file  # what a run directory holds; anything else is the user's

    if not run_dir.is_dir():
        return
    foreign = sorted(p.name for p in run_dir.iterdir() if not is_run_file(p.name))
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise UserError(
            f"--out {run_dir} is not empty ({shown}) and holds no run", hint="give --out a new or empty folder"
        )


def _check_classes(arch, args: argparse.Namespace, dataset_classes: int) -> None:
    """The design's class count (the spec's, or --classes) against the dataset's, naming the flag that fixes it."""
    if arch.classes == dataset_classes:
        return
    given = args.classes is not None
    source = f"--classes {args.classes}" if given else f"design {arch.name!r} has {arch.classes} classes"
    error = UsageError if given else UserError  # a bad flag exits 2, a spec that does not fit the data 1
    raise error(
        f"{source}, but {args.dataset!r} has {dataset_classes} classes",
        hint=f"pass --classes {dataset_classes}, or set `classes {dataset_classes}` in the spec",
    )


def _shared(ranks) -> str:
    """How the global batch is shared under torchrun, for the header line."""
    return "" if ranks is None else f" over {ranks.world_size} ranks"


def run(args: argparse.Namespace) -> int:
    from archdsl.run.distributed import command_scope

    with command_scope():  # under torchrun: rank 0 prints; every rank leaves the process group at the end
        return _train(args)


def _train(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from archdsl.lang.spec import load_spec

    cores = os.cpu_count() or 1
    if args.workers is not None and args.workers > 4 * cores:
        # torch would only warn, then fork them all and bring the machine to a halt.
        raise UsageError(
            f"--workers {args.workers} is more than 4 per CPU core ({cores} here)",
            hint=f"use at most {cores} (0 loads data in the main process)",
        )
    arch = load_spec(args.spec)
    if args.classes is not None:
        from archdsl.lang.checks import ensure_valid

        arch = ensure_valid(arch.model_copy(update={"classes": args.classes}))
    run_dir = Path(args.out) if args.out else Path(RUNS_DIR) / "train" / f"{arch.name}-{arch.short_id}"
    saved: dict = {}  # the resumed run's config and its finished epochs
    finished = 0
    given = {field: getattr(args, dest) for dest, field in _CONFIG_FLAGS.items() if getattr(args, dest) is not None}
    given.update(recipe_settings(args))
    if args.resume and args.initial_checkpoint is not None:
        raise UsageError(
            "--initial-checkpoint cannot be combined with --resume: a resumed run goes on from its own last checkpoint",
            hint="leave out --initial-checkpoint to resume, or start a new run in another --out",
        )
    if args.initial_checkpoint is not None and not Path(args.initial_checkpoint).is_file():
        raise UsageError(f"--initial-checkpoint {args.initial_checkpoint}: no such file")
    if args.resume:
        # Flags left out mean "as the run was started"; a flag that changes the result is refused by train(),
        # except a larger --epochs, which extends the run.
        saved, finished = _saved_config(run_dir)
        settings = {**saved, **given}
    else:
        if (run_dir / "last.safetensors").exists():
            raise UserError(f"{run_dir} already holds a run", hint="add --resume to continue it, or pass another --out")
        _refuse_foreign_files(run_dir)
        settings = given
    from archdsl.run.recipe import TrainConfig

    recipe = settings.get("recipe", DEFAULT_RECIPE)
    randaugment = settings["randaugment"] if "randaugment" in settings else RECIPE_DEFAULTS[recipe]["randaugment"]
    if settings.get("resident") and randaugment not in (None, "", "none"):
        raise UsageError(
            f"--resident cannot be used with the {recipe} recipe: its RandAugment works on PIL images",
            hint="add --recipe weak or --recipe fast, or --aa none, or leave out --resident",
        )
    try:
        config = TrainConfig(**settings)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in err.errors())
        raise UsageError(f"bad training settings: {problems}") from None
    if args.resume:  # settings the run cannot go on with are refused before anything is printed
        from archdsl.run.train import resumed_config

        resumed_config(run_dir, TrainConfig.model_validate(saved), config, finished=finished)

    from archdsl.run.distributed import join_if_launched

    ranks = join_if_launched(config.device, timeout_s=args.dist_timeout)
    if args.log == "tensorboard":
        from archdsl.run.tensorboard import require_tensorboard

        require_tensorboard()

    from archdsl.commands.outputs import output_dir
    from archdsl.data import load_split
    from archdsl.run.train import check_run_files, check_trainable

    # --out before the data (a bad --out should not wait for CIFAR to load); a missing dataset leaves no empty folder.
    with output_dir(run_dir, "--out"):
        train_set = load_split(args.dataset, "train", root=args.data_root, download=args.download)
        test_set = load_split(args.dataset, "test", root=args.data_root, download=args.download)
        _check_classes(arch, args, train_set.num_classes)
        check_trainable(arch, train_set, test_set, config)
        check_run_files(run_dir)
        if config.initial_checkpoint is not None and not args.resume:  # weights that do not fit: refused now
            from archdsl.run.initial import initial_weights

            initial_weights(config.initial_checkpoint, arch)

    from archdsl.run.train import FINAL_CHECKPOINT, LAST_CHECKPOINT, TrainingDiverged, train

    if args.resume and config.epochs > saved["epochs"]:
        print(
            f"extending {run_dir} from {saved['epochs']} to {config.epochs} epochs after epoch {finished}: "
            f"the learning rate follows a {config.epochs}-epoch schedule from here",
            file=sys.stderr,
        )
    elif args.resume:
        print(f"resuming {run_dir} after epoch {finished} of {config.epochs}", file=sys.stderr)
    print(
        f"training {arch.name} ({arch.short_id}) on {args.dataset}: recipe {config.recipe}, {config.epochs} epoch(s), "
        f"batch {config.batch_size}{_shared(ranks)}, lr {config.lr:g} -> {run_dir}",
        file=sys.stderr,
    )
    log = None
    if args.log == "tensorboard" and (ranks is None or ranks.leader):
        from archdsl.run.tensorboard import TENSORBOARD_DIR, TensorBoardLog

        log = TensorBoardLog(run_dir, first_epoch=finished + 1)
        print(f"logging to TensorBoard: tensorboard --logdir {run_dir / TENSORBOARD_DIR}", file=sys.stderr)
    try:
        result = train(
            arch, train_set, test_set, config, run_dir=run_dir, resume=args.resume, progress=not args.no_progress,
            save_every=args.save_every, on_epoch=log,
        )  # fmt: skip
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
    except TrainingDiverged as err:
        kept = _train_state(run_dir / LAST_CHECKPOINT).get("epoch") if (run_dir / LAST_CHECKPOINT).is_file() else None
        if kept:
            err.hint = f"{err.hint}; the last good epoch ({kept}) is kept in {run_dir / LAST_CHECKPOINT}"
        raise
    finally:
        if log is not None:
            log.close()

    history = result.history
    best = max(history, key=lambda m: m.test_acc)
    total = sum(m.seconds for m in history)
    mean_speed = sum(m.img_per_s for m in history) / len(history)
    print(f"{arch.name} on {args.dataset}: {len(history)} epoch{'s' if len(history) != 1 else ''} in {total:.1f} s")
    print(f"  final test top-1 {history[-1].test_acc:.2%}  NLL {history[-1].test_loss:.4f}")
    print(f"  best  test top-1 {best.test_acc:.2%} (epoch {best.epoch})")
    print(f"  training speed   {mean_speed:.0f} img/s")
    print(f"  run directory    {run_dir} ({FINAL_CHECKPOINT}, metrics.csv)")
    return 0
