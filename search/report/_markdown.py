"""report.md of a study: the best designs with their specs, the plots, and a table of every trial."""

from __future__ import annotations

from archdsl.markdown import table as markdown_table
from archdsl.search.report._checklist import CHECKLIST, checklist_items
from archdsl.search.report._figures import MIN_TRIALS_FOR_IMPORTANCE, importance_rung, importance_trials
from archdsl.search.report._numbers import estimate_text
from archdsl.search.report._retrain import retrain_note, retrain_text
from archdsl.search.report._settle import choice_lines, failed_seed_lines, settle_lines
from archdsl.search.report._summary import (
    PRUNED_MARK,
    StudySummary,
    TrialRow,
    copies_text,
    design_text,
    duration_text,
    held_out_text,
    held_out_value_text,
    moving_steps,
    objective_values_text,
    standings_text,
    step_layout,
    step_value_text,
    ties_text,
    verdict_text,
)
from archdsl.search.seed_stats import INTERVAL_LEVEL, KEEP_LEVEL
from archdsl.search.studies.record import NOT_USED


def markdown(
    summary: StudySummary,
    figure_files: dict[str, str],
    best_files: dict[int, str],
    spec_paths: dict[int, str] | None = None,
) -> str:
    """report.md of a study: the best designs with their specs (`best_files`: their links from the report;
    `spec_paths`: their paths as written, which the retrain commands name), its ties, the build-up walk, the
    checklist, the plots, and a table of every trial."""
    objs = ", ".join(f"{o.name} ({o.direction})" for o in summary.objectives)
    total = sum(r.seconds or 0.0 for r in summary.rows)
    lines = [
        f"# Search report: {summary.name}",
        "",
        f"- strategy: {summary.strategy}",
        f"- objectives: {objs}",
        f"- trials: {len(summary.rows)} ({summary.count('COMPLETE')} complete, {summary.count('PRUNED')} pruned, "
        f"{summary.count('FAIL')} failed, {summary.count('RUNNING')} running, {summary.count('WAITING')} waiting), "
        f"{duration_text(total)} of {'simulated ' if any(r.simulated for r in summary.rows) else ''}trial time"
        + (f"; {copies_text(summary.copies)} drawn again (not counted)" if summary.copies else ""),
    ]
    if summary.command:
        lines += [f"- reproduce: `{summary.command}`"]
    lines += _best_lines(summary, best_files, spec_paths or {})
    lines += _ties_lines(summary)
    lines += _buildup_lines(summary)
    lines += _checklist_lines(summary)
    lines += _plot_lines(summary, figure_files)
    lines += _trial_table_lines(summary)
    lines += ["", "All trials as CSV: `trials.csv` (also `archdsl report STUDY --csv`)."]
    return "\n".join(lines) + "\n"


def _best_lines(summary: StudySummary, best_files: dict[int, str], spec_paths: dict[int, str]) -> list[str]:
    """The best designs (or the Pareto front), each with its values, seeds, layout, spec and retrain command."""
    lines = ["", "## Best designs" if len(summary.objectives) == 1 else "## Pareto front", ""]
    if not summary.best:
        lines += ["No trial has completed yet.", ""]
    for row in summary.best:
        lines += [f"### Trial {row.number} ({row.n_msa} MSA): {objective_values_text(summary, row, ' = ')}", ""]
        if summary.laddered:
            lines += [
                f"Measured at {summary.budget_text(row.rung)}, the budget the walk's last verdict settled at.",
                "",
            ]
        lines += _seeds_lines(summary, row)
        if row.layout:
            lines += [f"Layout: `{row.layout}`", ""]
        if row.number in best_files:
            lines += [f"Spec: `{best_files[row.number]}`", ""]
        if row.spec:
            lines += ["```arch", row.spec.rstrip(), "```", ""]
        command = retrain_text(summary, row, spec_paths.get(row.number))
        if command:
            lines += [
                f"Retrain it as its trial trained it (the same data, validation images, recipe, budget and seed; "
                f"{retrain_note(summary, row)}): `{command}`",
                "",
            ]
    return lines


def _plot_lines(summary: StudySummary, figure_files: dict[str, str]) -> list[str]:
    """The plots, or why the parameter importances have none yet (computed at one budget: `importance_rung`)."""
    lines: list[str] = []
    rung = importance_rung(summary)
    where = f" at {summary.budget_label(rung)}" if summary.laddered and rung is not None else ""
    if figure_files:
        lines += ["## Plots", ""]
        if summary.laddered:
            lines += [
                "Each point is drawn in its budget's colour and marker: values at two budgets do not compare.",
                "",
            ]
        for name, path in figure_files.items():
            lines += [f"![{name}]({path})", ""]
            if name == "importance" and rung is not None:
                lines += [
                    f"Parameter importances (fANOVA) from {importance_trials(summary, rung)} complete trials{where}: "
                    "a rough guide until a study has a few dozen.",
                    "",
                ]
    complete = summary.count("COMPLETE")
    if complete and "importance" not in figure_files and rung is None:
        lines += [f"No parameter-importance plot: {_no_importance_reason(summary)}.", ""]
    return lines


def _no_importance_reason(summary: StudySummary) -> str:
    complete = [r for r in summary.rows if r.state == "COMPLETE"]
    if not summary.laddered:
        n = len(complete)
        if n >= MIN_TRIALS_FOR_IMPORTANCE:
            return "the parameters of the complete trials do not vary"
        return f"{n} complete trial{'s' if n != 1 else ''}; it needs {MIN_TRIALS_FOR_IMPORTANCE}"
    most = max(sum(r.rung == rung for r in complete) for rung in {r.rung for r in complete})
    return (
        f"at most {most} complete trials at one budget; it needs {MIN_TRIALS_FOR_IMPORTANCE} at one budget (trials "
        "at two budgets are not pooled: the budget's effect would be credited to the parameters), and their "
        "parameters must vary"
    )


def _trial_table_lines(summary: StudySummary) -> list[str]:
    """Every trial, one table row each (a pruned trial's last reported values marked)."""
    header = ["trial", "state", "MSA", "design", *[o.name for o in summary.objectives], "time", "note"]
    rows = []
    for row in summary.rows:
        mark = f" {PRUNED_MARK}" if row.state == "PRUNED" else ""
        shown = [_fmt(v) + mark for v in row.values] if row.values else ["" for _ in summary.objectives]
        budget = f"at {summary.budget_label(row.rung)}" if row.rung else ""  # a raised budget
        note = " ".join(p for p in (row.step or "", budget, row.note) if p)
        cells = [
            str(row.number),
            row.state,
            "" if row.n_msa is None else str(row.n_msa),
            f"`{design_text(row)}`" if design_text(row) else "",
            *shown,
            "" if row.seconds is None else duration_text(row.seconds),
            note,
        ]
        rows.append(cells)
    lines = ["## All trials", "", *markdown_table(header, rows)]
    if any(r.state == "PRUNED" and r.values for r in summary.rows):
        lines += ["", f"{PRUNED_MARK} pruned: the last value the trial reported before it was stopped."]
    return lines


def _seeds_lines(summary: StudySummary, row: TrialRow) -> list[str]:
    """The accuracy's seeds and interval, and the test figures, of a best design."""
    lines: list[str] = []
    seeds = summary.accuracy_estimate(row)
    if seeds is not None:
        per_seed = ", ".join(f"{v:.4g}" for v in seeds.values)
        how = (
            f"the mean with its {INTERVAL_LEVEL:.0%} t-interval, clipped to [0, 1]"
            if seeds.half_width is not None
            else "one seed: no interval (--seeds 2 or more gives one)"
        )
        lines += [f"Validation accuracy on each paired seed: {per_seed} ({how}).", ""]
    lines += [f"{_capital(held_out_text(summary.held_out.get(row.number)))}.", ""]
    return lines


def _ties_lines(summary: StudySummary) -> list[str]:
    """The designs tied with the best within the noise, with their test figures."""
    said = ties_text(summary)
    if said is None:
        return []
    lines = [
        "## Tied with the best within the noise",
        "",
        f"Designs the best does not beat beyond the noise: the build-up walk's paired test (one-sided, "
        f"{KEEP_LEVEL:.0%}, on the per-seed differences) does not call the best better. Any of them is as "
        "good a choice on this evidence.",
        "",
    ]
    if not summary.ties:
        return [*lines, f"{_capital(said)}.", ""]
    header = ["trial", "MSA", "design", "accuracy (validation)", f"test ({NOT_USED})"]
    rows = []
    for row in summary.ties:
        seeds = summary.accuracy_estimate(row)
        test = held_out_value_text(summary.held_out.get(row.number))
        rows.append([row.number, row.n_msa, f"`{design_text(row)}`", estimate_text(seeds) if seeds else "", test])
    return [*lines, *markdown_table(header, rows), ""]


def _buildup_lines(summary: StudySummary) -> list[str]:
    """The build-up walk's verdicts, each at the budget it settled at, and those still moving at the top of the
    ladder."""
    if not summary.steps:
        return []
    on_mean = summary.protocol is not None and summary.protocol.keep == "mean"
    rule = (
        "where its mean over them is higher (--keep mean: no test of the noise; the ties below have one)"
        if on_mean
        else f"only where it is better beyond the noise (one-sided, {KEEP_LEVEL:.0%})"
    )
    lines = [
        "## Build-up walk",
        "",
        "Each verdict compares the design with the one it would replace (the design kept before it) on the paired "
        f"seeds, and keeps it {rule}"
        + (
            # the rule of walk/buildup.py (`_held`, and `gap_moved` at the last step up), word for word
            "; where no budget was measured for the data, a verdict is measured again one budget up until it holds, "
            "or up to the last budget. It holds when the design has the same standing at the last two budgets "
            "measured (tied) or the last three (better or worse beyond the noise), and at the last step up the gap "
            "between the two designs did not close beyond the noise (a one-sided paired test at "
            f"{KEEP_LEVEL:.0%} on the per-seed change of the gap). Two ties in a row whose gap closed do not settle "
            "a verdict: it goes one budget up."
            if summary.laddered
            else "."
        ),
        "",
    ]
    header = ["step", "design", "validation accuracy", "verdict", "budget"]
    header += ["standing at each budget"] if summary.laddered else []
    rows = []
    for step in summary.steps:
        verdict = verdict_text(step) + (" (still moving: train longer to be sure)" if step.moving else "")
        cells = [
            step.step,
            f"`{found}`" if (found := step_layout(summary, step)) else "",
            step_value_text(summary, step),
        ]
        cells += [verdict, summary.budget_text(step.rung)]
        cells += [standings_text(summary, step)] if summary.laddered else []
        rows.append(cells)
    settled = [f"- {line}" for line in [*choice_lines(summary), *failed_seed_lines(summary), *settle_lines(summary)]]
    return [*lines, *markdown_table(header, rows), "", *_moving_lines(summary), *settled, *([""] if settled else [])]


def _moving_lines(summary: StudySummary) -> list[str]:
    """The verdicts still moving at the top of the ladder, by design: train those longer to be sure."""
    if not summary.laddered:
        return []
    moving = moving_steps(summary)
    if not moving:
        return ["Every verdict held between the last two budgets it was measured at.", ""]
    lines = [
        "**Train longer to be sure.** These verdicts were still moving at the last budget: the design's standing "
        "against the one it would replace changed, or their gap closed beyond the noise, at the last step up, so "
        "a longer training may decide otherwise:",
        "",
    ]
    for step in moving:
        design = f" `{found}`" if (found := step_layout(summary, step)) else ""
        lines.append(f"- {step.step}{design}: {verdict_text(step)}; {standings_text(summary, step)}.")
    return [*lines, ""]


def _checklist_lines(summary: StudySummary) -> list[str]:
    """The field's checklist for the run, answered (`_checklist`)."""
    items = checklist_items(summary)
    if not items:
        return []
    lines = ["## Checklist", "", f"What the field's checklist asks of a search ({CHECKLIST}), for this one:", ""]
    return [*lines, *(f"- **{what}**: {how}." for what, how in items), ""]


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _fmt(value: float) -> str:
    if abs(value) >= 1e5:
        return f"{value:.4g}"
    return f"{value:.4f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))
