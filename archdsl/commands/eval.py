"""`archdsl eval CKPT --dataset NAME`: accuracy, NLL (and ECE) of a checkpoint; per corruption for `-c` sets."""

from __future__ import annotations

import argparse
import json

from archdsl.commands._say import say
from archdsl.commands.config_file import add_config_argument
from archdsl.commands.settings_flags import add_settings_arguments, settings_given

EXAMPLES = (
    "archdsl eval runs/a50/final.safetensors",
    "archdsl eval runs/a50/final.safetensors --dataset cifar100-c --severities 3,5",
)


def register(subparsers) -> None:
    from archdsl.analysis import EvalSettings

    parser = subparsers.add_parser(
        "eval",
        help="evaluate a checkpoint on a test set (or a corrupted -c set)",
        description=(
            "Top-1 accuracy, NLL and ECE of a checkpoint on a dataset's test "
            "split. For a corrupted dataset (a name ending in -c, e.g. cifar100-c or synthetic-c) it "
            "reports accuracy per corruption and severity, and their mean."
        ),
    )
    parser.add_argument("checkpoint", metavar="CKPT", help="a .safetensors checkpoint written by archdsl train")
    # Every setting is an EvalSettings field that declares its flag (default, bounds, help).
    add_settings_arguments(parser, EvalSettings)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    add_config_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from archdsl.analysis import EvalSettings, evaluate

    result = evaluate(args.checkpoint, EvalSettings(**settings_given(args, EvalSettings)))
    say(json.dumps(result.to_dict(), indent=2) if args.json else result.to_text())
    return 0
