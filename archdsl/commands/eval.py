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
    from archdsl.analysis import EvalSettings, TestEvaluation, evaluate

    result = evaluate(args.checkpoint, EvalSettings(**settings_given(args, EvalSettings)))
    if args.json:
        say(json.dumps(result.to_dict(), indent=2))
    elif isinstance(result, TestEvaluation):
        say(
            f"{result.arch} on {result.dataset} ({result.images} images): "
            f"top-1 {result.top1:.2%}  NLL {result.nll:.4f}  ECE {result.ece:.4f}"
        )
    else:
        _print_table(result.to_dict()["sets"], result.mean_top1, result.arch, result.dataset)
    return 0


def _print_table(rows: list[dict], mean: float, name: str, dataset: str) -> None:
    severities = sorted({r["severity"] for r in rows})
    corruptions = list(dict.fromkeys(r["corruption"] for r in rows))
    by_key = {(r["corruption"], r["severity"]): r["top1"] for r in rows}
    width = max(len(c) for c in corruptions + ["corruption"])
    say(f"{name} on {dataset}: top-1 % per corruption and severity")
    say(f"{'corruption':<{width}} " + " ".join(f"{s:>6}" for s in severities) + f" {'mean':>6}")
    for corruption in corruptions:
        values: list[float | None] = [by_key.get((corruption, s)) for s in severities]
        present = [v for v in values if v is not None]
        cells = " ".join(f"{100 * v:6.2f}" if v is not None else f"{'-':>6}" for v in values)
        say(f"{corruption:<{width}} {cells} {100 * sum(present) / len(present):6.2f}")
    per_severity = []
    for s in severities:
        column = [by_key[(c, s)] for c in corruptions if (c, s) in by_key]
        per_severity.append(f"{100 * sum(column) / len(column):6.2f}")
    say(f"{'mean':<{width}} " + " ".join(per_severity) + f" {100 * mean:6.2f}")
