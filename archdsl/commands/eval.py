"""`archdsl eval CKPT --dataset NAME`: accuracy, NLL (and ECE) of a checkpoint; per corruption for `-c` sets."""

from __future__ import annotations

import argparse
import json
import sys

from archdsl.commands._args import (
    NO_PROGRESS_HELP,
    add_data_arguments,
    add_optimize_argument,
    device_name,
    name_list,
    positive_int,
    severity_list,
)

EXAMPLES = (
    "archdsl eval runs/a50/final.safetensors",
    "archdsl eval runs/a50/final.safetensors --dataset cifar100-c --severities 3,5",
)


def register(subparsers) -> None:
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
    parser.add_argument("--dataset", metavar="NAME", help="dataset (default: the one the checkpoint was trained on)")
    add_data_arguments(parser)
    parser.add_argument(
        "--corruptions", type=name_list, metavar="A,B", help="-c sets only: these corruptions, comma-separated"
    )
    parser.add_argument(
        "--severities", type=severity_list, metavar="S,S", help="-c sets only: these severities, e.g. 3,5"
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=256, metavar="N", help="evaluation batch size (default: 256)"
    )
    parser.add_argument("--device", type=device_name, default="auto", help="auto (default), cpu, cuda, cuda:N or mps")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    add_optimize_argument(parser)
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from archdsl.analysis import EvalSettings, TestEvaluation, evaluate

    settings = EvalSettings(
        dataset=args.dataset, data_root=args.data_root, download=args.download, corruptions=args.corruptions,
        severities=args.severities, batch_size=args.batch_size, device=args.device, optimize=args.optimize,
        progress=not args.no_progress,
    )  # fmt: skip
    result = evaluate(args.checkpoint, settings)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    elif isinstance(result, TestEvaluation):
        print(
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
    out = sys.stdout
    out.write(f"{name} on {dataset}: top-1 % per corruption and severity\n")
    out.write(f"{'corruption':<{width}} " + " ".join(f"{s:>6}" for s in severities) + f" {'mean':>6}\n")
    for corruption in corruptions:
        values: list[float | None] = [by_key.get((corruption, s)) for s in severities]
        present = [v for v in values if v is not None]
        cells = " ".join(f"{100 * v:6.2f}" if v is not None else f"{'-':>6}" for v in values)
        out.write(f"{corruption:<{width}} {cells} {100 * sum(present) / len(present):6.2f}\n")
    per_severity = []
    for s in severities:
        column = [by_key[(c, s)] for c in corruptions if (c, s) in by_key]
        per_severity.append(f"{100 * sum(column) / len(column):6.2f}")
    out.write(f"{'mean':<{width}} " + " ".join(per_severity) + f" {100 * mean:6.2f}\n")
