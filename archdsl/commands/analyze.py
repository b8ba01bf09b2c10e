"""`archdsl analyze CKPT`: accuracy, calibration, robustness, Hessian spectrum and feature maps of a checkpoint.

Writes `metrics.json` (every result with the options used), one PNG per analysis and
`report.md` linking them, into `--out` (default: `<checkpoint stem>-analysis/` beside it).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from archdsl.commands._say import say
from archdsl.commands.config_file import add_config_argument
from archdsl.commands.settings_flags import add_settings_arguments, settings_given, value_parser
from archdsl.errors import UsageError

EXAMPLES = (
    "archdsl analyze runs/a50/final.safetensors",
    "archdsl analyze runs/a50/final.safetensors --metrics acc,hessian --out runs/a50/analysis",
    "archdsl analyze runs/a50/final.safetensors --metrics cka,lesion,landscape --landscape-dims 2",
    "archdsl analyze runs/a50 --metrics hessian   # a run kept with `archdsl train --save-every N`",
)


def register(subparsers) -> None:
    from archdsl.analysis import AnalysisSettings, AnalysisSources

    parser = subparsers.add_parser(
        "analyze",
        help="analyse a checkpoint: accuracy/ECE, robustness, Hessian NEP/APE, feature maps, CKA, lesions, landscape",
        description=(
            "Measure a trained checkpoint the way Park & Kim do: top-1, NLL and ECE on the test split; mean "
            "accuracy over the corrupted sets (<dataset>-c); the Hessian max-eigenvalue spectrum (NEP, APE) on "
            "augmented training batches; Delta log amplitude and variance of the feature maps block by block; "
            "NLL on augmented training data (nll-train); the filter-normalised loss landscape; mini-batch CKA "
            "between every pair of blocks; accuracy with each block's residual branch removed (lesion). Given a "
            "run directory, measures the Hessian spectrum of every checkpoint it kept (train --save-every). "
            "Writes metrics.json, PNG figures and report.md. Cost: by default every measure reads the whole test "
            "split, and robustness first makes 75 corrupted copies of the whole test split (15 corruptions x 5 "
            "severities) and scores each; on a CPU that is most of the time analyze takes (minutes to tens of "
            "minutes). --test-subset 0.1 scores a tenth of the test split and its copies, and --corruptions and "
            "--severities fewer copies. With --progress (the default), a terminal shows a bar and a log a line per "
            "stage; metrics.json records each stage's seconds (stage_seconds)."
        ),
    )
    parser.add_argument(
        "checkpoint", metavar="CKPT",
        help="a .safetensors checkpoint written by archdsl train, or a run directory (--metrics hessian)",
    )  # fmt: skip
    parser.add_argument("--out", metavar="DIR", help="output folder (default: <CKPT stem>-analysis beside CKPT)")
    parser.add_argument(
        "--force", action="store_true", help="replace an analysis already in --out (its files only; stale plots go)"
    )
    # The old spelling: --subset is the training set's fraction everywhere else (train, search).
    parser.add_argument(
        "--subset", dest="old_subset", type=value_parser(AnalysisSettings, "test_subset"), help=argparse.SUPPRESS
    )
    # What to measure on which data (AnalysisSources), and every setting of the measures (AnalysisSettings):
    # each a field that declares its flag (default, bounds, help).
    add_settings_arguments(parser, AnalysisSources)
    add_settings_arguments(parser, AnalysisSettings)
    add_config_argument(parser)
    parser.set_defaults(func=run)


def settings_from_args(args: argparse.Namespace) -> dict:
    """The analysis settings the command line gives (AnalysisSettings fields, nested); the rest are the
    fields' defaults, the recipe and (unless --weight-decay) the weight decay the checkpoint's."""
    from archdsl.analysis import AnalysisSettings

    given = settings_given(args, AnalysisSettings)
    old = getattr(args, "old_subset", None)
    if old is not None:  # the old --subset of analyze, said so once: the word means the training set elsewhere
        if "test_subset" in given:
            raise UsageError("give --test-subset alone: --subset is its old name in analyze")
        say(
            f"archdsl: analyze --subset is now --test-subset (the test and corrupted sets; --subset means the "
            f"training set in train and search): taken as --test-subset {old:g}",
            err=True,
        )
        given["test_subset"] = old
    return given


def sources_from_args(args: argparse.Namespace):
    from archdsl.analysis import AnalysisSources

    return AnalysisSources(**settings_given(args, AnalysisSources))


def run(args: argparse.Namespace) -> int:
    from archdsl.analysis import analyze_checkpoint, default_out, render_text

    out = Path(args.out) if args.out else default_out(args.checkpoint)
    report = analyze_checkpoint(
        args.checkpoint, settings_from_args(args), sources_from_args(args), out=out, force=args.force
    )
    say(render_text(report))
    say(f"wrote {out / 'metrics.json'}, {out / 'report.md'} and {len(report.figures)} figure(s)")
    return 0
