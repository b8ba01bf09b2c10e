"""`archdsl data`: list the datasets, describe one, write a CIFAR-C style corrupted copy."""

from __future__ import annotations

import argparse

from archdsl.commands._args import name_list
from archdsl.commands._say import say
from archdsl.commands.settings_flags import add_settings_arguments, settings_given
from archdsl.common_settings import DataSettings, ProgressSettings
from archdsl.errors import UsageError

EXAMPLES = (
    "archdsl data list",
    "archdsl data info --dataset cifar100 --data-root ~/data",
    "archdsl data corrupt --dataset synthetic --out data/synthetic-C",
)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "data",
        help="list datasets, show where one loads from, generate corrupted test sets",
    )
    _describe_datasets_when_asked(parser)
    actions = parser.add_subparsers(dest="data_command", metavar="ACTION")

    listing = actions.add_parser("list", help="the dataset names and what they are")
    listing.set_defaults(func=run)

    info = actions.add_parser("info", help="sizes, classes and where a dataset loads from")
    info.add_argument(
        "--dataset", required=True, metavar="NAME", help="a dataset name, e.g. cifar100 or synthetic:classes=5"
    )
    add_settings_arguments(info, DataSettings)  # --data-root, --download
    info.add_argument("--checksums", action="store_true", help="also compare CIFAR files with the official MD5s")
    info.set_defaults(func=run)

    corrupt = actions.add_parser(
        "corrupt",
        help="corrupt a dataset's test split into the CIFAR-C layout (<corruption>.npy, labels.npy)",
    )
    corrupt.add_argument("--dataset", required=True, metavar="NAME", help="the clean dataset, e.g. cifar100")
    add_settings_arguments(corrupt, DataSettings)
    corrupt.add_argument("--out", required=True, metavar="DIR", help="folder to write the .npy files into")
    corrupt.add_argument(
        "--corruptions",
        type=name_list,
        metavar="A,B",
        help="comma-separated names (default: the 15; 'all' adds the 4 extras)",
    )
    corrupt.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the random corruptions (default: 0)")
    corrupt.add_argument("--force", action="store_true", help="replace .npy files that --out already holds")
    add_settings_arguments(corrupt, ProgressSettings)  # --progress/--no-progress
    corrupt.set_defaults(func=run)

    parser.set_defaults(func=run, data_parser=parser)


def run(args: argparse.Namespace) -> int:
    command = getattr(args, "data_command", None)
    if command == "list":
        return _list()
    if command in ("info", "corrupt"):
        data = DataSettings(**settings_given(args, DataSettings))
        if data.image_size is not None:  # the dataset as read at that size, in every line below
            from archdsl.data import sized_name

            args.dataset = sized_name(args.dataset, data.image_size, data.data_root)
        return _info(args, data) if command == "info" else _corrupt(args, data)
    args.data_parser.print_help()
    raise UsageError("choose an action: list, info or corrupt")


def _describe_datasets_when_asked(parser: argparse.ArgumentParser) -> None:
    """`archdsl data --help` names every dataset `archdsl.data` knows. The names are read when the
    help is shown: archdsl.data takes a noticeable time to import, and every command builds this parser."""
    plain_help = parser.format_help

    def format_help() -> str:
        from archdsl.data import dataset_names

        parser.description = (
            f"Datasets: {', '.join(dataset_names())}. Parameters follow the name, e.g. synthetic:classes=5,train=2000."
        )
        return plain_help()

    parser.format_help = format_help  # type: ignore[method-assign]


def _list() -> int:
    # Names and descriptions only: `describe` looks for files (and imports torchvision to do so).
    from archdsl.data import dataset_descriptions

    descriptions = dataset_descriptions()
    width = max(len(name) for name in descriptions)
    for name, description in descriptions.items():
        say(f"{name:{width}s}  {description}")
    return 0


def _info(args: argparse.Namespace, data: DataSettings) -> int:
    from archdsl.data import about, fetch_dataset

    if data.download:  # then describe what is there now
        fetch_dataset(args.dataset, args.data_root)
    described = about(args.dataset, args.data_root, checksums=args.checksums)
    for line in described.lines:
        say(line)
    # A script that asks whether the data is there gets its answer from the exit status too.
    return 0 if described.available else 1


def _corrupt(args: argparse.Namespace, data: DataSettings) -> int:
    from archdsl.data import corrupt_dataset
    from archdsl.outputs import output_dir

    progress = ProgressSettings(**settings_given(args, ProgressSettings)).progress
    with output_dir(args.out, "--out") as out:  # a missing dataset leaves no empty --out behind
        written = corrupt_dataset(
            args.dataset, out, args.corruptions, root=data.data_root, download=data.download, seed=args.seed,
            overwrite=args.force, progress=progress,
        )  # fmt: skip
    say(
        f"wrote {len(written.files)} files ({len(written.corruptions)} corruptions x 5 severities x "
        f"{written.images:,} images) to {args.out}"
    )
    return 0
