"""`archdsl import SRC --spec NAME --out DST.safetensors`: another project's weights -> an archdsl checkpoint.

Reads SRC without unpickling arbitrary objects, converts its weights from their layout
(detected, or `--format`) to the spec's model, loads them strictly and writes a checkpoint
that carries the spec's IR, so `eval`, `analyze` and `archdsl.load_checkpoint` take it.
(The module is `import_` because `import` is a Python keyword; the command is `import`.)
"""

from __future__ import annotations

import argparse

from archdsl.commands._say import say
from archdsl.commands.recording_parser import Subcommands
from archdsl.commands.spec_args import add_classes_argument, add_spec_argument

EXAMPLES = (
    "archdsl import vit_ti_cifar100_9857b21357.pth.tar --spec vit-ti --out vit-ti.safetensors --dataset cifar100",
    "archdsl import cifar100_preresnet_dnn_50.pth.tar --spec resnet50 --out r50.safetensors --dataset cifar100",
    "archdsl import cifar100_alternet_50.pth.tar --spec alter50-code --out a50.safetensors --format reference",
    "archdsl import weights.pth --spec my.arch --classes 10 --out mine.safetensors --force",
)


def register(subparsers: Subcommands) -> None:
    parser = subparsers.add_parser(
        "import",
        help="turn another project's checkpoint (timm, the reference's .pth.tar) into an archdsl checkpoint",
        description=(
            "Read SRC (a torch.save file such as the authors' released .pth.tar files, a timm or reference "
            "implementation checkpoint, or a plain safetensors file) with torch.load(weights_only=True): a "
            "file that would need arbitrary Python objects unpickled is refused. Find its state dict (at the "
            "top level or under 'state_dict'/'model'; DataParallel's 'module.' prefix dropped), convert it from "
            "its layout to SPEC's model, load it strictly (missing, unexpected and mis-shaped weights are "
            "named) and write DST: the weights with SPEC's IR, a checkpoint for eval, analyze and "
            "archdsl.load_checkpoint. See docs/import.md."
        ),
    )
    parser.add_argument("source", metavar="SRC", help="the checkpoint to import (.pth, .pth.tar, .bin, .safetensors)")
    add_spec_argument(
        parser, "--spec", what="the design the weights belong to", example="vit-ti", required=True, metavar="SPEC"
    )
    parser.add_argument("--out", required=True, metavar="DST", help="the archdsl checkpoint to write (.safetensors)")
    parser.add_argument(
        "--format",
        dest="source_format",
        metavar="NAME",
        help="the layout of SRC's weights (default: recognised from their names); see docs/import.md",
    )
    add_classes_argument(parser)
    parser.add_argument(
        "--dataset",
        metavar="NAME",
        help="record the dataset the weights were trained on, eval's and analyze's default there (default: none)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite DST if it exists")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from archdsl.lang import load_spec, with_classes
    from archdsl.outputs import output_file
    from archdsl.run import import_checkpoint

    arch = with_classes(load_spec(args.spec), args.classes)
    with output_file(args.out, "--out", overwrite=args.force) as out:  # checked before the source is read
        imported = import_checkpoint(args.source, arch, out, source_format=args.source_format, dataset=args.dataset)
    say(
        f"imported {imported.source_name} ({imported.source_format} layout, {imported.tensors} tensors) as "
        f"{arch.name} ({imported.params:,} params) to {imported.path}"
    )
    return 0
