"""The field's checklist for a search, answered for the run (Lindauer and Hutter, "Best practices for scientific
research on neural architecture search", JMLR 2020): the seeds, the validation protocol, the sealed test split,
each budget, the whole CPU time, and where a table can say, what a random pick in that CPU would score. Words for
report.md (`checklist_items`) and one line for the terminal (`checklist_line`), from the study's protocol
(`record.Protocol`) and its trials' CPU records."""

from __future__ import annotations

from statistics import fmean

from archdsl.search.fidelity.validation_power import difference_text
from archdsl.search.report._retrain import recipe_words
from archdsl.search.report._summary import StudySummary, duration_text
from archdsl.search.studies.record import Protocol

CHECKLIST = 'Lindauer and Hutter, "Best practices for scientific research on neural architecture search", JMLR 2020'


def checklist_items(summary: StudySummary) -> list[tuple[str, str]]:
    """(what, how this run did it) for each question of the checklist; [] for a study without a protocol."""
    protocol = summary.protocol
    if protocol is None:
        return []
    items = [
        ("Seeds", _seeds(protocol)),
        ("Validation", _validation(protocol, _answer_accuracy(summary))),
        ("Test", _test(protocol)),
        ("Budgets", _budgets(summary, protocol)),
        ("Training", _training(protocol)),
        ("CPU time", _cpu(summary, protocol)),
    ]
    pick = _random_pick(summary)
    return [*items, ("Random pick", pick)] if pick else items


def checklist_line(summary: StudySummary) -> str | None:
    """`checklist: seeds 0, 1 (paired); 10 validation images chose, 32 test images sealed until the end; ...`."""
    protocol = summary.protocol
    if protocol is None:
        return None
    seeds = ", ".join(map(str, protocol.training_seeds[: protocol.seeds])) or "drawn per trial"
    seeds = f"seed{'s' if protocol.seeds > 1 else ''} {seeds}{' (paired)' if protocol.seeds > 1 else ''}"
    if protocol.table is not None:
        seeds, data = f"table runs of {seeds}", "the table's validation figures chose, its test figures"
    else:
        data = f"{protocol.validation_images} validation images chose, {protocol.test_images} test images"
    parts = [seeds, f"{data} sealed until the end"]
    parts += [
        _budget_words(summary, protocol),
        f"CPU {duration_text(summary.cpu_seconds)} ({_measured(summary)} trials)",
    ]
    pick = summary.random_pick
    if pick is not None:
        parts.append(f"a random pick in that CPU: {pick.expected_best:.4g} expected")
    return "checklist: " + "; ".join(parts)


def _seeds(protocol: Protocol) -> str:
    indices = list(range(protocol.seeds))
    text = f"each design on {protocol.seeds} paired seed{'s' if protocol.seeds > 1 else ''}, "
    text += f"ind{'ices' if protocol.seeds > 1 else 'ex'} {', '.join(map(str, indices))}, "
    if not protocol.training_seeds:
        return text + "each answered by a run drawn per trial from the table's"
    seeds = ", ".join(map(str, protocol.training_seeds[: protocol.seeds]))
    if protocol.table is not None:
        text += f"answered by the table's runs of seeds {seeds}"
    else:
        text += f"trained with seeds {seeds} (--seed {protocol.seed} + the index)"
    text += " for every design alike (the same training subset, batch order and augmentation draws)"
    if protocol.max_seeds > protocol.seeds:
        more = ", ".join(f"index {i}: seed {s}" for i, s in enumerate(protocol.training_seeds) if i >= protocol.seeds)
        text += f"; where they cannot tell, a race measures more, up to {protocol.max_seeds} ({more})"
    return text


def _validation(protocol: Protocol, accuracy: float | None) -> str:
    if protocol.table is not None:
        return "every design was chosen on the table's validation figures (images held out of the training split)"
    shrunk = "" if protocol.validation_images == protocol.held_out else f" ({protocol.validation_images} of them)"
    text = (
        f"{protocol.held_out} validation images, held out of the training split (class-stratified, the same for "
        f"every trial and seed), scored every design{shrunk} and chose; each trained on the other "
        f"{protocol.train_images} images (a budget's subset of them)"
    )
    if protocol.validation_images:  # what they can call (docs/search.md, "What the validation can call")
        said = difference_text(protocol.validation_images, protocol.seeds, accuracy).removeprefix("validation: ")
        text += f"; the {said}"
    return text


def _answer_accuracy(summary: StudySummary) -> float | None:
    """The answer's mean validation top-1 over its seeds (what the smallest callable difference is computed at)."""
    values = summary.best[0].seed_values if summary.best else ()
    return fmean(values) if values else None


def _test(protocol: Protocol) -> str:
    images = "the table's test figures" if protocol.table is not None else f"the {protocol.test_images} test images"
    return (
        f"{images} chose nothing: each trial sealed its test figures on the study, opened once, after the search, "
        "for the best design and those tied with it"
    )


def _budgets(summary: StudySummary, protocol: Protocol) -> str:
    first = summary.budget_text(0)
    if len(protocol.budgets) == 1:
        return f"{first} for every trial" + (" (the table's runs)" if protocol.table is not None else "")
    raised = ", ".join(summary.budget_text(rung) for rung in range(1, len(protocol.budgets)))
    return f"{first}; then {raised}, one budget up at a time, while a verdict still moved"


def _training(protocol: Protocol) -> str:
    settings = " ".join(recipe_words(protocol))
    recipe = f"recipe {protocol.recipe}" + (f" (`{settings}`)" if settings else "")
    if protocol.table is not None:
        return f"the table's runs: {recipe}, on {protocol.device}"
    batch = f"; {protocol.batch_chosen}" if protocol.batch_chosen else ""
    return f"{recipe}, device {protocol.device}{batch}"


def _cpu(summary: StudySummary, protocol: Protocol) -> str:
    measured = _measured(summary)
    text = f"{duration_text(summary.cpu_seconds)} of CPU over {measured} trial{'s' if measured != 1 else ''}"
    if protocol.table is not None:
        text += ", simulated: the CPU the table recorded for the runs that answered them (training, test scoring)"
    else:
        text += " (training, validation and the test scoring each trial seals; the final test trains nothing)"
    if summary.cpu_unknown:
        text += f"; {summary.cpu_unknown} trial{' recorded' if summary.cpu_unknown == 1 else 's recorded'} none"
    return text


def _measured(summary: StudySummary) -> int:
    """The trials that measured a design (no copy): those whose CPU the total holds."""
    return sum(1 for row in summary.rows if row.digest is not None)


def _budget_words(summary: StudySummary, protocol: Protocol) -> str:
    """`1 or 2 epochs on 86 images (100 %)` where the budgets differ only in epochs, else each budget's text."""
    budgets = protocol.budgets
    if len(budgets) > 1 and all(b.subset == budgets[0].subset for b in budgets):
        images = summary.budget_text(0).split(" on ", 1)[1]
        return f"{' or '.join(str(b.epochs) for b in budgets)} epochs on {images}"
    return " or ".join(summary.budget_text(rung) for rung in range(len(budgets)))


def _random_pick(summary: StudySummary) -> str | None:
    pick = summary.random_pick
    if pick is None:
        return None
    answer = summary.best[0].seed_values if len(summary.best) == 1 else ()
    mine = f"; this search's answer: {fmean(answer):.4g}" if answer else ""
    return (
        f"designs drawn at random without repeats, each measured as this study measures one, within the same "
        f"{duration_text(pick.cpu_seconds)} of CPU would be expected to score {pick.expected_best:.4g} (the best "
        f"mean validation top-1 of the {pick.designs:.2g} designs such a pick measures on average, over "
        f"{pick.draws:,} random orders of the table's designs){mine}"
    )
