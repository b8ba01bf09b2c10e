"""`archdsl compile SPEC`: check a spec, build the model, run it once and show what it is.

Prints one row per block (stage, index, kind, output shape, params, FLOPs) and the
totals, with the spec's `init` scheme; `--json` prints the same as JSON. `--export` writes
the freshly initialised weights as a safetensors checkpoint carrying the IR; `--onnx`
exports an ONNX graph.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from archdsl.commands._say import say
from archdsl.commands.recording_parser import Subcommands
from archdsl.commands.spec_args import add_classes_argument, add_spec_argument

EXAMPLES = (
    "archdsl compile alter50",
    "archdsl compile my.arch --classes 10 --json",
    "archdsl compile tiny --export tiny-init.safetensors",
)


def register(subparsers: Subcommands) -> None:
    parser = subparsers.add_parser(
        "compile",
        help="build a spec into a PyTorch model and show its blocks, params and FLOPs",
        description="Check SPEC, build the model, run a dummy forward pass and print a table per block "
        "(stage, index, kind, output shape, params, FLOPs per image) with totals.",
    )
    add_spec_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_classes_argument(parser)
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the initial weights (default: 0)")
    parser.add_argument(
        "--export",
        metavar="PATH",
        type=Path,
        help="write the initialised weights (with the IR) to a .safetensors checkpoint (default: none)",
    )
    parser.add_argument(
        "--onnx", metavar="PATH", type=Path, help="export the model as ONNX, which needs `onnx` (default: none)"
    )
    parser.add_argument("--force", action="store_true", help="overwrite --export/--onnx files that already exist")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from archdsl import save_checkpoint
    from archdsl.lang import load_spec, with_classes
    from archdsl.nn import compile_arch, export_onnx, require_onnx
    from archdsl.outputs import prepare_file

    arch = with_classes(load_spec(args.spec), args.classes)
    if args.onnx is not None:
        require_onnx()
    # Before any work: an existing --export may be a trained checkpoint.
    for option, path in (("--export", args.export), ("--onnx", args.onnx)):
        if path is not None:
            prepare_file(path, option, overwrite=args.force)
    compiled = compile_arch(arch, seed=args.seed)
    if args.export is not None:
        save_checkpoint(args.export, compiled.model, arch, {"source": "archdsl compile", "seed": args.seed})
    if args.onnx is not None:
        export_onnx(compiled.model, args.onnx)

    say(json.dumps(compiled.to_dict(), indent=2) if args.json else compiled.to_text())
    for what, path in (("weights", args.export), ("ONNX graph", args.onnx)):
        if path is not None and not args.json:
            say(f"wrote {what} to {path}")
    return 0
