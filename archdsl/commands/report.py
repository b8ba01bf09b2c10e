"""`archdsl report STUDY`: the best designs, the Pareto front, plots and report.md of a search."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

EXAMPLES = (
    "archdsl report alter-small-base-synthetic-buildup",
    "archdsl report my-study --storage postgresql://user:pass@host/db",
)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "report",
        help="report on a search: best designs, Pareto front, plots, report.md",
        description=(
            "Read a study from its storage and write OUT/STUDY/report/report.md with plots "
            "(optimisation history, Pareto front, parameter importances, objective against MSAs) "
            "and the winning designs as OUT/STUDY/best/*.arch."
        ),
    )
    parser.add_argument("study", metavar="STUDY", help="the study name (`archdsl search --study-name`)")
    parser.add_argument(
        "--storage", metavar="URL", help="the study's storage (default: the journal OUT/STUDY/study.journal)"
    )
    parser.add_argument("--out", metavar="DIR", default="runs", help="the runs folder (default: runs)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from archdsl.commands.search import STUDY_NAME
    from archdsl.errors import UsageError, UserError
    from archdsl.search.runner import load_study
    from archdsl.search.storage import StorageOptions, journal_path, open_storage

    if not STUDY_NAME.match(args.study):
        raise UsageError(
            f"bad study name {args.study!r}",
            hint="letters, digits, '.', '_' and '-' only; give the runs folder with --out, not in the name",
        )
    out = Path(args.out)
    if args.storage is None and not journal_path(out, args.study).exists():
        raise UserError(
            f"no study {args.study!r} under {out}/ (no {journal_path(out, args.study)})",
            hint="give --out where the search ran, or --storage for a database study",
        )
    storage = open_storage(StorageOptions(url=args.storage), out, args.study)
    study = load_study(args.study, storage)
    paths = write_report(study, out / args.study)
    print(paths.summary_text)
    print(f"report: {paths.report}")
    return 0


@dataclass(frozen=True)
class ReportPaths:
    report: Path
    figures: dict[str, Path]
    best: dict[int, Path]
    summary_text: str


def write_report(study, study_dir: Path) -> ReportPaths:
    """Write report.md, its PNGs and best/*.arch for `study` under `study_dir`."""
    import matplotlib.pyplot as plt

    from archdsl.search.report import make_figures, markdown, summarize_study

    summary = summarize_study(study)
    report_dir = study_dir / "report"
    best_dir = study_dir / "best"
    report_dir.mkdir(parents=True, exist_ok=True)
    best_dir.mkdir(parents=True, exist_ok=True)
    for old in best_dir.glob("*.arch"):  # the front can shrink: keep only today's winners
        old.unlink()
    best: dict[int, Path] = {}
    for rank, row in enumerate(summary.best, start=1):
        if row.spec:
            path = best_dir / f"{rank}-trial{row.number}-{row.short_id}.arch"
            path.write_text(row.spec)
            best[row.number] = path
    figures: dict[str, Path] = {}
    for name, fig in make_figures(study, summary).items():
        path = report_dir / f"{name}.png"
        fig.savefig(path, dpi=100, bbox_inches="tight")  # keeps legends placed outside the axes
        plt.close(fig)
        figures[name] = path
    text = markdown(
        summary,
        {name: path.name for name, path in figures.items()},
        {n: str(Path("..") / "best" / p.name) for n, p in best.items()},
    )
    report = report_dir / "report.md"
    report.write_text(text)
    return ReportPaths(report=report, figures=figures, best=best, summary_text=_summary_text(summary))


def _summary_text(summary) -> str:
    lines = [
        f"study {summary.name}: {len(summary.rows)} trials ({summary.count('COMPLETE')} complete, "
        f"{summary.count('PRUNED')} pruned, {summary.count('FAIL')} failed)"
    ]
    for row in summary.best:
        values = ", ".join(f"{o.name}={v:.4g}" for o, v in zip(summary.objectives, row.values or (), strict=False))
        params = " ".join(f"{k}={v}" for k, v in row.params.items())
        lines.append(f"  best: trial {row.number} ({row.n_msa} MSA) {values}  [{params}]")
    return "\n".join(lines)
