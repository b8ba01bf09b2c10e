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


def _metrics(logits, labels) -> dict[str, float]:
    from archdsl.analysis.metrics import classification_metrics

    scored = classification_metrics(logits, labels)
    return {"top1": scored.top1, "nll": scored.nll, "ece": scored.ece}


def run(args: argparse.Namespace) -> int:
    from archdsl.run.evaluate import checkpoint_named

    with checkpoint_named(args.checkpoint):  # a model whose logits are NaN: the message names its file
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from archdsl.errors import UserError
    from archdsl.progress import progress_bar
    from archdsl.run.checkpoint import load_checkpoint
    from archdsl.run.device import select_device
    from archdsl.run.evaluate import predict_logits, require_finite_logits, score_logits
    from archdsl.run.train import check_compatible

    device = select_device(args.device)
    checkpoint = load_checkpoint(args.checkpoint, device=device)
    dataset = args.dataset or checkpoint.meta.get("dataset")
    if not dataset:
        raise UserError(f"{args.checkpoint} does not say which dataset it was trained on", hint="pass --dataset NAME")
    progress = not args.no_progress
    amp = device.type == "cuda"
    predict = dict(batch_size=args.batch_size, device=device, amp=amp, optimize=args.optimize)

    corrupted = dataset.split(":", 1)[0].endswith("-c")  # e.g. cifar100-c, synthetic-c:test=200
    if not corrupted:
        if args.corruptions or args.severities:
            from archdsl.errors import UsageError

            raise UsageError("--corruptions/--severities only apply to corrupted (-c) datasets")
        from archdsl.data import load_split

        test_set = load_split(dataset, "test", root=args.data_root, download=args.download)
        _refuse_empty(test_set, dataset)
        check_compatible(checkpoint.arch, test_set)
        logits = predict_logits(checkpoint.model, test_set, progress=progress, **predict)
        result = {
            "checkpoint": str(args.checkpoint),
            "dataset": dataset,
            "images": len(test_set),
            **_metrics(logits, test_set.labels),
        }
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            line = (
                f"{checkpoint.arch.name} on {dataset} ({len(test_set)} images): "
                f"top-1 {result['top1']:.2%}  NLL {result['nll']:.4f}"
            )
            line += f"  ECE {result['ece']:.4f}"
            print(line)
        return 0

    from archdsl.data import load_corrupted

    sets = load_corrupted(
        dataset, root=args.data_root, corruptions=args.corruptions, severities=args.severities, download=args.download
    )
    if not sets:
        raise UserError(f"{dataset}: no corrupted sets selected")
    model = checkpoint.model
    if args.optimize:  # one fast copy for all the sets, so compiling is judged on all their images
        from archdsl.run.optimize import optimize_model

        model = optimize_model(model, training=False, device=device, images=sum(len(s.images) for s in sets))
    rows = []
    for corrupted in progress_bar(sets, desc=f"eval {dataset}", show=progress):
        _refuse_empty(corrupted.images, f"{dataset} ({corrupted.corruption}, severity {corrupted.severity})")
        check_compatible(checkpoint.arch, corrupted.images)
        logits = predict_logits(model, corrupted.images, **predict)
        scored = score_logits(require_finite_logits(logits, corrupted.images.name), corrupted.images.labels)
        rows.append(
            {"corruption": corrupted.corruption, "severity": corrupted.severity, "top1": scored.top1, "nll": scored.nll}
        )
    mean = sum(r["top1"] for r in rows) / len(rows)
    if args.json:
        print(
            json.dumps(
                {"checkpoint": str(args.checkpoint), "dataset": dataset, "mean_top1": mean, "sets": rows}, indent=2
            )
        )
        return 0
    _print_table(rows, mean, checkpoint.arch.name, dataset)
    return 0


def _refuse_empty(image_set, what: str) -> None:
    from archdsl.errors import UserError

    if len(image_set) == 0:  # its accuracy would be NaN, printed as if it were a result
        raise UserError(f"{what}: the test set holds no images")


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
