"""The settle stage, the seeds that failed to learn and the knobs the walk chose, as the terminal and report.md say
them."""

from __future__ import annotations

from archdsl.search.report._summary import StudySummary, design_text


def digest_layout(summary: StudySummary, digest: str) -> str:
    """The design with this digest, from any of its rows: its layout (`c1:CC c2:CM c3:CMCM`) and, where the study
    searches more than k, its other knobs (two designs of one layout at other windows are told apart)."""
    row = next((r for r in summary.rows if r.digest == digest and r.layout), None)
    return design_text(row) if row is not None else digest[:12]


def seed_text(summary: StudySummary, index: int) -> str:
    """`seed 5 (index 2)`: a paired seed index and the training seed it stands for (a trained study's)."""
    protocol = summary.protocol
    if protocol is None or protocol.table is not None:
        return f"seed index {index}"
    return f"seed {protocol.seed + index} (index {index})"


def failed_seed_lines(summary: StudySummary) -> list[str]:
    """One line per seed on which a design failed to learn, with the seed that stood in for it."""
    return [
        f"failed seed: {digest_layout(summary, f.digest)} did not learn on {seed_text(summary, f.index)} at "
        f"{summary.budget_text(f.rung)}: {f.value:.3f}, where its other seeds' median is {f.typical:.3f}; "
        f"{seed_text(summary, f.replacement)} stands in for it in every later comparison"
        for f in summary.failed_seeds
    ]


def settle_lines(summary: StudySummary) -> list[str]:
    """One line per settle budget: the shortlist's means on fresh seeds there, best first, and the verdict."""
    lines = []
    for at in summary.settled:
        shown = sorted(at.values, key=lambda dv: -(dv[1] if dv[1] is not None else -1.0))
        means = ", ".join(f"{digest_layout(summary, d)} {'failed' if v is None else f'{v:.3f}'}" for d, v in shown)
        verdict = (
            "the best beats the rest beyond the noise"
            if at.called
            else "not called: the best does not beat every other beyond the noise"
        )
        lines.append(f"settle at {summary.budget_text(at.rung)}, fresh seeds: {means}; {verdict}")
    if summary.settled and not summary.settled[-1].called:
        lines.append("settle: tied at the last budget; the answer is the best mean there, named with its ties")
    return lines


def choice_lines(summary: StudySummary) -> list[str]:
    """One line per knob the walk chose as a stage took its first MSA: each value's mean, and the one chosen."""
    return [
        f"chose {c.knob} {c.chosen} for {c.stage}'s first MSA at {summary.budget_text(c.rung)}: "
        + ", ".join(f"{value} {'failed' if mean is None else f'{mean:.3f}'}" for value, mean in c.values)
        + (" (mean over the paired seeds)" if len(c.values) > 1 else "")
        for c in summary.choices
    ]
