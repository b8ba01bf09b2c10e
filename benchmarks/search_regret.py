"""Is the search better than random search? The build-up walk judged as the field judges NAS, from measured tables.

The truth is a reference table (`--reference`: every design trained long, on several seeds); the searches are
answered from cheap tables of the same designs: one at the search's fixed budget (`--cheap`), or one per budget
rung of the ladder the walk climbs (`--rungs T0 T1 ...`, in ladder order). Every method is replayed on paired
seeds drawn from the cheap tables (`--seeds` per search, as the search's `--seeds`):

- the build-up walk (`archdsl.search.walk.buildup.walk`, the search's own) at the fixed budget; with `--rungs`,
  also at the top budget alone, and climbing the ladder (`per-verdict` and `calibrate` budgeting); each with every
  rule of `--keep` (the search's: beyond the noise, or on the mean); racing with `--max-seeds` (`replay_all`);
- random search at the walk's CPU: designs drawn uniformly without replacement, each measured as the walk
  measures one (the same seeds, at the budget the walk's answer settled at), while its CPU stays within the
  walk's on the same seeds; its answer is the design of the best mean;
- TPE at the walk's CPU: Optuna's `TPESampler(multivariate=True)` asked and told (in memory), each new design
  answered from the table as random search's, a design it draws again told its value at no cost, stopped at
  the walk's CPU in the same way. Its first `--tpe-startup` trials (Optuna's 10) are random: in a space where
  the walk's CPU pays for fewer designs, TPE is its start-up sampling.

CPU is the sum of `train_cpu_seconds` of the table runs a method used. Replays share seeds, so they are not
independent: where the tables hold at least `MIN_DISJOINT_SETS` disjoint sets of `--seeds` seeds, the replays
are those sets and the intervals resample them; otherwise the point figures average every set of `--seeds` of
the seeds every cheap table has, and the intervals come from a bootstrap over those seeds: each replicate draws
the seeds with replacement and weighs each set by how often it drew each of the set's seeds (`SeedPlan`), the same
weights for every method, so that differences between methods are paired. Each replicate resamples the reference's
seeds too (the same draw for every method: a regret is a difference of reference means, and the reference's own
noise belongs in it; the best is the resample's own, so a regret is never below 0), and a sampler's own draws on
each set. A 95 % interval is the 2.5th and 97.5th percentiles of the replicates (`Spread.interval`), so it stays
within a figure's bounds; a difference between methods is called where its interval excludes 0. With only
`--seeds` seeds in common every search runs on the same seeds, and the intervals leave the cheap seeds' noise out
(the report says so).

Reported per method: the regret (the reference best's mean validation top-1 less the reference mean of the
answer, in points; on test too, for reporting only) with its 95 % interval; the share of answers within 0.5
points of the reference's best, and the share the reference's paired test (`seed_stats.improves_beyond_noise`)
cannot tell from it; the CPU per search; right answers (within 0.5 points) per CPU-hour; walk - random and
walk - TPE in regret (and, with several `--keep` rules, each walk against the same walk under the first rule),
called a difference only where the interval excludes 0. Of the tables: Kendall's tau
between each cheap table's design means and the reference's, with its bootstrap standard error; each reference
design's mean and standard error, the share within 0.5 points of its best, the largest standard error within 2
points of its best.

    python benchmarks/search_regret.py --reference search/tables/odd-one-out-k-reference.json \
        --cheap search/tables/odd-one-out-k.json --figures runs/search-regret
    python benchmarks/search_regret.py --reference search/tables/fashion-mnist-k-reference.json \
        --cheap benchmarks/tables/fashion-mnist-k-seeds-3-5/fashion-mnist-k-6-seeds.json
    python benchmarks/search_regret.py --reference search/tables/fashion-mnist-k-reference.json \
        --rungs benchmarks/tables/fashion-mnist-k-seeds-3-5/fashion-mnist-k-6-seeds.json E4.json E8.json E16.json

(E4, E8, E16: the same designs at 4, 8 and 16 epochs, assembled by `benchmarks/buildup_table.py --assemble`.)
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import math
import random
import statistics
import sys
import warnings
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from script_args import file_prefix, output_file, output_folder

from archdsl.errors import UsageError, UserError, visible_lines
from archdsl.search.settings import KEEPS, Keep
from archdsl.search.space import ParamValue, Space
from archdsl.search.walk.keep_rules import KNOBS, Knobs

POINTS = 100.0  # accuracies are fractions; regrets are reported in points
RIGHT_WITHIN = 0.005  # an answer within half a point of the reference's best is right
NEAR_BEST = 0.02  # the reference's noise is judged on the designs within 2 points of its best
MIN_DISJOINT_SETS = 10  # fewer independent replays give too coarse an interval: a bootstrap over seeds instead
MAX_SETS = 120  # sets of seeds averaged per replicate (a sample of them where the seeds make more)
TWINS_IN_A_ROW = 25  # TPE drawing only designs it has measured: it has converged and spends nothing more
LEVEL = 0.95


def _chance(text: str) -> float:
    """--chance: a probability strictly between 0 and 1."""
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a probability between 0 and 1 (a guess's accuracy, 1/classes)")
    return value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True, help="the truth: every design trained long, several seeds")
    cheap = parser.add_mutually_exclusive_group(required=True)
    cheap.add_argument("--cheap", help="the table the search is answered from, at its fixed budget")
    cheap.add_argument("--rungs", nargs="+", metavar="TABLE", help="one table per budget rung, in ladder order")
    parser.add_argument("--seeds", type=int, default=3, help="paired seeds per search (the search's --seeds)")
    parser.add_argument(
        "--keep",
        nargs="+",
        choices=KEEPS,
        default=["beyond-noise"],
        help="how the walk keeps an MSA (the search's --keep); several: one walk of each, each with its samplers "
        "and set against the same walk under the first rule",
    )
    parser.add_argument(
        "--knobs",
        nargs="+",
        choices=KNOBS,
        default=["base"],
        help="a new MSA's other searched knobs (the search's --knobs): the base's, or chosen as a stage takes its "
        "first MSA; several: one walk of each (default base, the walk the shipped tables were replayed with before "
        "--knobs; the search's own default is choose: give --knobs choose to replay it)",
    )
    parser.add_argument(
        "--max-seeds",
        type=int,
        help="the walk races (the search's --max-seeds): where its paired test cannot tell, it measures one more "
        "seed, up to this many, drawn from the tables' seeds outside the set (default: --seeds, no racing)",
    )
    parser.add_argument(
        "--chance",
        type=_chance,
        help="the accuracy of a guess (1/classes): the walk stands a fresh seed in for one on which a design failed "
        "to learn (the search does, from the data's classes), drawn from the tables' seeds outside the set; "
        "default: no stand-ins (the walks before 2026-12-07)",
    )
    parser.add_argument(
        "--settle",
        metavar="TABLE",
        help="a table at the settle stage's budget (the search's --settle-steps 1: twice the cheap table's epochs), on "
        "seeds none of the other tables has: each walk is also replayed with its settle stage (the answer and its "
        "rival re-measured there on the table's first --seeds seeds), and so is random search followed by the same "
        "settle stage (its two best designs), each judged at its whole CPU",
    )
    parser.add_argument(
        "--list-settle-designs",
        metavar="FILE",
        help="instead of judging, write the designs the settle stage's shortlists visit (the settled walks', and "
        "random search's followed by the settle stage) to FILE, a digest a line, the most needed first: "
        "`buildup_table.py --designs FILE` trains the settle table",
    )
    parser.add_argument(
        "--replays", type=int, default=10, help="random search's and TPE's replays (own draws) on each set of seeds"
    )
    parser.add_argument(
        "--tpe-startup",
        type=int,
        default=10,
        help="TPE's random start-up trials (Optuna's default 10: more designs than a walk's CPU pays for in small "
        "spaces, where TPE is its start-up sampling)",
    )
    parser.add_argument("--bootstrap", type=int, default=10000, help="resamples behind each interval")
    parser.add_argument("--seed", type=int, default=0, help="seeds the resamples and the samplers' draws")
    parser.add_argument("--json", help="write the summary here (a file, in a folder that exists)")
    parser.add_argument(
        "--markdown", help="write the tables here (they are printed too; a file, in a folder that exists)"
    )
    parser.add_argument("--figures", help="write the regret figure into this folder (created if missing)")
    parser.add_argument(
        "--name", default="", help="a prefix for the figure's file name (letters, digits, '.', '_', '-')"
    )
    args = parser.parse_args(argv)
    # The outputs before the replays (minutes on a large space): a path it cannot write ends here, in one line.
    output_file(args.json, "--json")
    output_file(args.markdown, "--markdown")
    output_file(args.list_settle_designs, "--list-settle-designs")
    output_folder(args.figures, "--figures")
    file_prefix(args.name, "--name")
    if min(args.seeds, args.replays, args.tpe_startup) < 1 or args.bootstrap < 20:
        raise UsageError(
            "--seeds, --replays and --tpe-startup must be 1 or more, --bootstrap 20 or more",
            hint="--seeds 3 --replays 10 --bootstrap 1000",
        )
    for flag, values, both in (("--keep", args.keep, "beyond-noise mean"), ("--knobs", args.knobs, "base choose")):
        twice = sorted({value for value in values if values.count(value) > 1})
        if twice:
            raise UsageError(
                f"{flag} names {' and '.join(twice)} twice: each rule is one walk",
                hint=f"{flag} {both} (both rules, side by side)",
            )
    if args.max_seeds is None:
        args.max_seeds = args.seeds
    if args.max_seeds < args.seeds:
        raise UsageError(
            f"--max-seeds {args.max_seeds} is below --seeds {args.seeds}",
            hint="racing measures more seeds than --seeds, never fewer: give --max-seeds >= --seeds",
        )
    return args


# -- the tables ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rung:
    """A cheap table as the replays read it: per design, each seed's validation top-1 and training CPU."""

    source: str
    budget: str  # `12 epochs on 100 %`
    val: dict[str, dict[int, float]]  # digest -> seed -> validation top-1
    cpu: dict[str, dict[int, float]]  # digest -> seed -> train CPU seconds
    seeds: tuple[int, ...]  # the seeds every design has a run of

    def cost(self, digest: str, seeds: Sequence[int]) -> float:
        return sum(self.cpu[digest][s] for s in seeds)

    def values(self, digest: str, seeds: Sequence[int]) -> tuple[float, ...]:
        return tuple(self.val[digest][s] for s in seeds)


@dataclass(frozen=True)
class Reference:
    """The truth: per design (in `digests` order) its validation and test top-1 on each of the reference's seeds."""

    source: str
    budget: str
    digests: tuple[str, ...]
    layouts: tuple[str, ...]
    n_msa: tuple[int, ...]
    seeds: tuple[int, ...]
    val: np.ndarray  # [designs, seeds]
    test: np.ndarray

    @property
    def means(self) -> np.ndarray:
        return self.val.mean(axis=1)

    @property
    def best(self) -> int:
        return int(np.argmax(self.means))

    @property
    def test_best(self) -> int:
        return int(np.argmax(self.test.mean(axis=1)))

    @functools.cached_property
    def within(self) -> np.ndarray:
        """The designs within `RIGHT_WITHIN` of the best's mean (the best included)."""
        return self.means >= self.means[self.best] - RIGHT_WITHIN - 1e-12

    @functools.cached_property
    def tied(self) -> np.ndarray:
        """The best and the designs its mean does not beat beyond the noise on the paired seeds (the walk's test)."""
        from archdsl.search.objectives import OBJECTIVES
        from archdsl.search.seed_stats import improves_beyond_noise

        best = tuple(self.val[self.best])
        lead = OBJECTIVES["accuracy"]
        return np.array(
            [i == self.best or not improves_beyond_noise(best, tuple(v), lead) for i, v in enumerate(self.val)]
        )


def budget_text(table) -> str:
    f = table.fidelity
    epochs, subset = f.get("epochs"), f.get("subset")
    if epochs is None:
        return "?"
    return f"{epochs} epochs" + (f" on {100 * subset:.3g} %" if subset is not None else "")


def load(path: str):
    """The table at `path`, checked (`load_replay`), with a run of every design."""
    from archdsl.search.fidelity.replay import load_replay

    table = load_replay(path).table
    empty = [d.layout for d in table.designs if not d.runs]
    if empty:
        raise UserError(
            f"{path} has no run of {len(empty)} of its {len(table.designs)} designs (first: {empty[0]})",
            hint="a table being made: judge the search on it when every design has its runs",
        )
    return table


def read_settle(path: str) -> tuple[Rung, int, int]:
    """`--settle`: a table at the settle stage's budget, which may hold a part of the space (the designs the settle
    stage visits, `buildup_table.py --designs`) and may be cut short: its designs with a run on every seed any of
    them has, the others left out; with the designs it holds and the space's."""
    from archdsl.search.fidelity.replay import load_replay

    table = load_replay(path).table
    seeds = set().union(*({r.seed for r in d.runs} for d in table.designs))
    whole = [d for d in table.designs if seeds and {r.seed for r in d.runs} >= seeds]
    if not whole:
        raise UserError(
            f"--settle {path} has no design with a run on each of its seeds",
            hint="train the designs the settle stage visits there (buildup_table.py --designs)",
        )
    return read_rung(path, table.model_copy(update={"designs": whole})), len(whole), len(table.designs)


def common_seeds(table) -> tuple[int, ...]:
    """The seeds every design of `table` has a run of."""
    return tuple(sorted(set.intersection(*({r.seed for r in d.runs} for d in table.designs))))


def design_name(design, searched: Sequence[str]) -> str:
    """Where a design's MSAs are and, in a space that searches more than k, its other knobs: a stage's in the stages
    that hold an MSA, the whole design's once (`c1:CM c2:CC c3:CMCM, window 2/-/4, init timm`: designs that share a
    layout differ there)."""
    from archdsl.search.space import STAGE_KNOBS, msa_per_stage

    msas = msa_per_stage(design.layout)
    knobs = []
    for knob in searched:
        if knob in STAGE_KNOBS and any(msas.values()):
            values = (str(design.params[f"{knob}_{stage}"]) if n else "-" for stage, n in msas.items())
            knobs.append(f"{knob} " + "/".join(values))
        elif knob != "k" and knob not in STAGE_KNOBS:
            knobs.append(f"{knob} {design.params[knob]}")
    return ", ".join([design.layout, *knobs])


def read_rung(path: str, table) -> Rung:
    return Rung(
        source=path,
        budget=budget_text(table),
        val={d.digest: {r.seed: r.val_acc for r in d.runs} for d in table.designs},
        cpu={d.digest: {r.seed: r.train_time for r in d.runs} for d in table.designs},
        seeds=common_seeds(table),
    )


def read_reference(path: str, table, order: Sequence[str]) -> Reference:
    by_digest = {d.digest: d for d in table.designs}
    seeds = common_seeds(table)
    if len(seeds) < 2:
        raise UserError(f"the reference {path} has {len(seeds)} seed(s) of every design", hint="a reference needs 2+")
    runs = [{r.seed: r for r in by_digest[d].runs} for d in order]
    return Reference(
        source=path,
        budget=budget_text(table),
        digests=tuple(order),
        layouts=tuple(design_name(by_digest[d], table.searched) for d in order),
        n_msa=tuple(by_digest[d].n_msa for d in order),
        seeds=seeds,
        val=np.array([[r[s].val_acc for s in seeds] for r in runs]),
        test=np.array([[r[s].test_acc for s in seeds] for r in runs]),
    )


def check_same_designs(reference, cheap: Sequence[tuple[str, Any]], reference_path: str) -> None:
    """A UserError unless every table measured the same space and the same designs."""
    ref_digests = {d.digest: d for d in reference.designs}
    for path, table in cheap:
        # The data by name: a reference may hold out more validation images (`odd-one-out:train=7000,...`).
        same_data = table.dataset.split(":")[0] == reference.dataset.split(":")[0]
        if tuple(table.searched) != tuple(reference.searched) or not same_data:
            raise UserError(
                f"{path} searched {','.join(table.searched)} on {table.dataset}, the reference {reference_path} "
                f"{','.join(reference.searched)} on {reference.dataset}",
                hint="the cheap tables and the reference must measure the same space",
            )
        digests = {d.digest: d for d in table.designs}
        missing = [d for d in digests if d not in ref_digests] + [d for d in ref_digests if d not in digests]
        if missing:
            first = (digests.get(missing[0]) or ref_digests[missing[0]]).layout
            raise UserError(
                f"{path} and the reference {reference_path} do not hold the same designs "
                f"({len(missing)} in one only, first: {first})",
                hint="a partial table: assemble it again when every design has a run",
            )


# -- the space, memoised ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoSpace(Space):
    """The table's space, each design built once: the walk rebuilds its designs from their parameters at every
    look (a few milliseconds each), and a replay looks thousands of times."""

    memo: dict[tuple[tuple[str, ParamValue], ...], tuple[Any, str]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    def arch_from_params(self, params: dict[str, ParamValue]):
        return self._built(params)[0]

    def digest_of(self, params: dict[str, ParamValue]) -> str:
        return self._built(params)[1]

    def _built(self, params: dict[str, ParamValue]) -> tuple[Any, str]:
        key = tuple(sorted(params.items()))
        found = self.memo.get(key)
        if found is None:
            arch = super().arch_from_params(params)
            found = self.memo[key] = (_DigestedArch(arch), arch.digest())
        return found


class _DigestedArch:
    """An Arch whose digest is computed once (the walk asks for it at every look)."""

    def __init__(self, arch) -> None:
        self._arch, self._digest = arch, arch.digest()

    def digest(self) -> str:
        return self._digest

    def __getattr__(self, name: str):
        return getattr(self._arch, name)


def space_of(table) -> MemoSpace:
    from archdsl.lang.spec import parse_spec
    from archdsl.search.space import make_space

    space = make_space(parse_spec(table.base), tuple(table.searched))
    return MemoSpace(space.base, space.stages, space.searched)


# -- the methods --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One search: its answer (a digest; None when it could afford no design), the CPU it used, the designs it
    measured, and the rung (index into the rung tables) its answer was measured at."""

    answer: str | None
    cpu: float
    measured: int
    rung: int
    searched_cpu: float | None = None  # a settled search's CPU before its settle stage (None: no settle stage)
    shortlist: tuple[str, ...] = ()  # the designs its settle stage measured


@dataclass(frozen=True)
class WalkVariant:
    """A way to run the walk (`label`: its budget or budgeting): the rung tables it climbs (indices, in order)
    and how."""

    label: str
    tables: tuple[int, ...]
    budgeting: Literal["per-verdict", "calibrate"] = "per-verdict"
    keep: Keep = "beyond-noise"  # the search's --keep
    knobs: Knobs = "base"  # the search's --knobs
    settle: bool = False  # followed by the settle stage (the search's --settle-steps 1)

    def kinds(self) -> list[str]:
        """The methods replayed for this walk: the walk and the samplers at its CPU (and, once settled, random search
        followed by the same settle stage)."""
        return [kind for kind in KIND_NAMES if kind != "random+settle" or self.settle]

    def method(self, kind: str) -> str:
        """The name of the walk's row, or of the sampler held to its CPU: `random, 12 epochs on 100 %`."""
        return f"{KIND_NAMES[kind]}, {self.label}"


KIND_NAMES = {"walk": "walk", "random": "random", "tpe": "TPE", "random+settle": "random + settle"}


def rung_label(rungs: Sequence[Rung], index: int) -> str:
    """A rung by its budget (`12 epochs on 100 %`), or by its file where that does not tell it from the others."""
    budgets = [r.budget for r in rungs]
    if budgets[index] != "?" and budgets.count(budgets[index]) == 1:
        return budgets[index]
    return Path(rungs[index].source).name


def walk_variants(
    rungs: Sequence[Rung], keeps: Sequence[Keep] = ("beyond-noise",), settle: bool = False,
    knobs: Sequence[Knobs] = ("base",),
) -> list[WalkVariant]:  # fmt: skip
    """The walk at the first budget; with a ladder, also at the top budget alone and climbing it both ways; each
    with every rule of `keeps` (the search's --keep) and of `knobs` (--knobs), labelled where not the default."""
    ladder = tuple(range(len(rungs)))
    variants = [WalkVariant(rung_label(rungs, 0), (0,))]
    if len(rungs) > 1:
        variants += [
            WalkVariant(rung_label(rungs, len(rungs) - 1), (len(rungs) - 1,)),
            WalkVariant("per-verdict ladder", ladder, "per-verdict"),
            WalkVariant("calibrated ladder", ladder, "calibrate"),
        ]
    kept = [
        dataclasses.replace(v, keep=keep, label=v.label if keep == "beyond-noise" else f"{v.label}, keep {keep}")
        for keep in keeps
        for v in variants
    ]
    kept = [
        dataclasses.replace(v, knobs=knob, label=v.label if knob == "base" else f"{v.label}, knobs {knob}")
        for knob in knobs
        for v in kept
    ]
    return kept + [dataclasses.replace(v, settle=True, label=f"{v.label}, settled") for v in kept if settle]


def run_walk(
    space: MemoSpace,
    rungs: Sequence[Rung],
    seeds: tuple[int, ...],
    variant: WalkVariant,
    paired: int | None = None,
    chance: float | None = None,
    stand_ins: int = 0,
    settle: Rung | None = None,
) -> Outcome:
    """The search's own walk, each measurement answered from the rung table on `seeds` (seed index i: seeds[i]).
    With `paired` below len(seeds) the walk races, as the search's `--seeds paired --max-seeds len(seeds)`: a
    design is measured on its first `paired` seeds, and on seed index i alone where a race asks for it. With
    `chance`, a seed on which a design failed to learn is stood in for (the search's rule): each stand-in index the
    walk asks for takes the next of the last `stand_ins` of `seeds` (which are no race's). A settled variant's settle
    stage is answered from `settle`: its fresh seed indices `paired`.. on the table's seeds in order (a stand-in there
    on the next; none left: the seed is lost)."""
    from archdsl.search.objectives import OBJECTIVES
    from archdsl.search.seed_stats import Racing
    from archdsl.search.studies.record import Measured
    from archdsl.search.walk.buildup import Rules, walk

    lead = OBJECTIVES["accuracy"]
    paired = len(seeds) if paired is None else paired
    most = len(seeds) - stand_ins
    racing = Racing(paired, most if variant.keep == "beyond-noise" else paired)  # a mean has no test to race
    settles = variant.settle and settle is not None
    rules = Rules(
        racing, len(variant.tables), variant.budgeting, variant.keep, chance=chance, settle=int(settles),
        knobs=variant.knobs,
    )  # fmt: skip
    slot: dict[int, int] = {}  # a stand-in's seed index -> its place in `seeds`
    settle_slot: dict[int, int] = {}  # a settle-stage seed index -> its place in the settle table's seeds
    measured: dict[tuple[str, int], Measured] = {}
    cpu = searched = 0.0
    shortlist: list[str] = []
    while (ask := walk(space, measured, lead, rules).next) is not None:
        digest = space.digest_of(ask.params)
        at_settle = ask.rung >= len(variant.tables)
        if at_settle and not searched:
            searched = cpu
        if at_settle and digest not in shortlist:
            shortlist.append(digest)
        indices = range(paired) if ask.seed_index is None else (ask.seed_index,)
        if at_settle:
            assert settle is not None
            indices = range(paired, 2 * paired) if ask.seed_index is None else (ask.seed_index,)
        known = measured.get((digest, ask.rung))
        values = dict(known.seeds) if known is not None else {}
        lost = set(known.lost) if known is not None else set()
        for i in indices:
            if at_settle:
                assert settle is not None
                place = settle_slot.setdefault(i, len(settle_slot))
                if digest not in settle.val:
                    raise UserError(
                        f"--settle {settle.source} has no runs of design {digest[:12]}",
                        hint="train the designs the settle stage may visit there (the walk's path)",
                    )
                if place >= len(settle.seeds):
                    lost.add(i)  # no fresh seed left to stand in
                    continue
                values[i] = settle.val[digest][settle.seeds[place]]
                cpu += settle.cpu[digest][settle.seeds[place]]
                continue
            rung = rungs[variant.tables[ask.rung]]
            at = i if i < most else slot.setdefault(i, most + len(slot))  # a stand-in: the next of the last ones
            values[i] = rung.val[digest][seeds[at]]
            cpu += rung.cpu[digest][seeds[at]]
        mean = statistics.fmean(values.values()) if values else None
        measured[(digest, ask.rung)] = Measured("COMPLETE" if values else "FAIL", mean, values, frozenset(lost))
    done = walk(space, measured, lead, rules)
    answer = space.digest_of(done.answer) if done.answer is not None else None
    last_search = variant.tables[min(done.answer_rung, len(variant.tables) - 1)]
    searched_cpu = (searched or cpu) if settles else None
    return Outcome(answer, cpu, len(measured), last_search, searched_cpu, tuple(shortlist))


@dataclass(frozen=True)
class Trajectory:
    """A sampler's run: after each new design it measured, its CPU so far and the design of the best mean so far.
    Stopped at any budget, it is the run that stops at the first new design the budget cannot pay for (the
    samplers' draws do not depend on the budget)."""

    cpu: tuple[float, ...]
    best: tuple[str, ...]
    second: tuple[str | None, ...] = ()  # the design of the second-best mean so far

    def rival_at(self, budget: float) -> str | None:
        """The runner-up of the run stopped at `budget` (None: it measured one design or none)."""
        n = int(np.searchsorted(np.asarray(self.cpu), budget * (1 + 1e-12), side="right"))
        return self.second[n - 1] if n and self.second else None

    def at(self, budget: float, rung: int) -> Outcome:
        n = int(np.searchsorted(np.asarray(self.cpu), budget * (1 + 1e-12), side="right"))
        if n == 0:
            return Outcome(None, 0.0, 0, rung)
        return Outcome(self.best[n - 1], self.cpu[n - 1], n, rung)


def _trajectory(order, rung: Rung, seeds: tuple[int, ...], budget: float) -> Trajectory:
    """Measure the designs `order` yields (a generator told each value) until one more would pass `budget`."""
    cpu, best, second, spent = [], [], [], 0.0
    top: tuple[float, str] | None = None
    runner_up: tuple[float, str] | None = None
    digest = order.send(None)
    while digest is not None:
        cost = rung.cost(digest, seeds)
        if spent + cost > budget * (1 + 1e-12):
            break
        spent += cost
        value = statistics.fmean(rung.values(digest, seeds))
        if top is None or value > top[0]:
            top, runner_up = (value, digest), top
        elif runner_up is None or value > runner_up[0]:
            runner_up = (value, digest)
        cpu.append(spent)
        best.append(top[1])
        second.append(runner_up[1] if runner_up is not None else None)
        digest = order.send(value)
    order.close()
    return Trajectory(tuple(cpu), tuple(best), tuple(second))


def settled_pick(answer: Outcome, rival: str | None, settle: Rung, paired: int) -> Outcome:
    """A sampler's answer followed by the settle stage: its best and runner-up measured on the settle table's first
    `paired` seeds; the better mean there is the answer, at the sampler's CPU plus the settle stage's."""
    if answer.answer is None:
        return answer
    seeds = settle.seeds[:paired]
    shortlist = [d for d in (answer.answer, rival) if d is not None]
    best = max(shortlist, key=lambda d: statistics.fmean(settle.values(d, seeds)))
    cost = sum(settle.cost(d, seeds) for d in shortlist)
    return Outcome(best, answer.cpu + cost, answer.measured + len(shortlist), answer.rung, answer.cpu, tuple(shortlist))


def random_trajectory(digests: Sequence[str], rung: Rung, seeds: tuple[int, ...], rng: random.Random) -> Trajectory:
    """Random search: designs drawn uniformly without replacement, every one of them (stop it at a budget with
    `Trajectory.at`)."""
    shuffled = list(digests)
    rng.shuffle(shuffled)

    def order():
        for digest in shuffled:  # noqa: UP028 (`yield from` would pass the values sent in to the list's iterator)
            yield digest
        yield None

    return _trajectory(order(), rung, seeds, math.inf)


def tpe_trajectory(
    space: MemoSpace, rung: Rung, seeds: tuple[int, ...], budget: float, seed: int, startup: int = 10
) -> Trajectory:
    """TPE (`TPESampler(multivariate=True)`, Optuna's ask and tell, in memory); a design it draws again (a twin,
    as the search's copies) is told its value and costs nothing, as in the search."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(multivariate=True, seed=seed, n_startup_trials=startup)
    study = optuna.create_study(storage=optuna.storages.InMemoryStorage(), sampler=sampler, direction="maximize")
    known: dict[str, float] = {}
    n_designs = len(rung.val)

    def order():
        twins = 0
        while len(known) < n_designs and twins < TWINS_IN_A_ROW:
            trial = study.ask()
            digest = space.digest_of(space.suggest(trial))
            if digest in known:
                study.tell(trial, known[digest])
                twins += 1
                continue
            twins = 0
            value = yield digest
            known[digest] = value
            study.tell(trial, value)
        yield None

    return _trajectory(order(), rung, seeds, budget)


# -- the replays --------------------------------------------------------------------------------------

SeedSet = tuple[int, ...]  # the table seeds of one search's paired seed indices 0..n-1, distinct and sorted


@dataclass(frozen=True)
class SeedPlan:
    """Which sets of seeds the searches run on (`sets`: the point figures average them alike), and per bootstrap
    replicate the weight of each set (`replicates`, rows summing to 1), shared by every method so that their
    differences are paired.

    With at least `MIN_DISJOINT_SETS` disjoint sets in the seeds (`disjoint`), the sets are independent and a
    replicate draws them with replacement. Otherwise (`bootstrap`) the sets are every `--seeds` of the seeds (a
    sample of `MAX_SETS` where they are more), and a replicate resamples the seeds with replacement and weighs
    each set by how often the resample drew each of its seeds (the product of their counts): the multinomial
    bootstrap of an average over sets of distinct seeds. A search trains each paired seed once, so a resample
    never makes one search train a seed twice: a walk on three copies of one seed would see no noise and keep
    every gain, a search no user can run."""

    mode: str  # "disjoint" or "bootstrap"
    pool: tuple[int, ...]
    sets: tuple[SeedSet, ...]
    replicates: np.ndarray  # [replicates, sets]

    @property
    def units(self) -> int:
        """The independent units a replicate resamples: the disjoint sets, or the seeds."""
        return len(self.sets) if self.mode == "disjoint" else len(self.pool)

    @property
    def seed_noise(self) -> bool:
        """Whether the searches run on more than one set of seeds (else the replicates cannot move them)."""
        return len(self.sets) > 1


def seed_plan(pool: Sequence[int], n: int, replicates: int, rng: np.random.Generator) -> SeedPlan:
    pool = tuple(sorted(pool))
    if len(pool) < n:
        raise UserError(
            f"--seeds {n}: the cheap tables have {len(pool)} seed{'s' if len(pool) != 1 else ''} of every design "
            "in common",
            hint=f"--seeds {len(pool)} at most with these tables",
        )
    if len(pool) // n >= MIN_DISJOINT_SETS:
        sets = tuple(tuple(pool[i * n : (i + 1) * n]) for i in range(len(pool) // n))
        counts = rng.multinomial(len(sets), np.full(len(sets), 1 / len(sets)), size=replicates)
        return SeedPlan("disjoint", pool, sets, counts / len(sets))
    positions = list(itertools.combinations(range(len(pool)), n))
    if len(positions) > MAX_SETS:
        positions = [positions[i] for i in sorted(rng.choice(len(positions), MAX_SETS, replace=False))]
    members = np.array(positions)  # [sets, n]: positions in the pool
    weights = np.zeros((replicates, len(positions)))
    todo = np.arange(replicates)
    while len(todo):  # a resample with fewer than n distinct seeds weighs no set: drawn again
        counts = rng.multinomial(len(pool), np.full(len(pool), 1 / len(pool)), size=len(todo))
        weights[todo] = counts[:, members].prod(axis=2)
        todo = todo[weights[todo].sum(axis=1) == 0]
    sets = tuple(tuple(pool[i] for i in p) for p in positions)
    return SeedPlan("bootstrap", pool, sets, weights / weights.sum(axis=1, keepdims=True))


@dataclass
class Replays:
    """Every method's searches on every set of seeds the plan needs: method -> seed set -> outcomes (one for a
    walk, which decides the same way on the same seeds; `--replays` for a sampler)."""

    methods: list[str]
    kinds: dict[str, str]  # method -> walk, random, tpe
    partner: dict[str, str]  # a sampler -> the walk whose CPU it was given
    label: dict[str, str]  # method -> its walk's budget or budgeting
    outcomes: dict[str, dict[SeedSet, list[Outcome]]]
    curves: dict[int, list[Trajectory]]  # rung -> random search's whole runs (the figure's curve)
    rivals: dict[str, str] = field(default_factory=dict)  # a walk -> the same walk under the first --keep rule


def race_orders(pool: Sequence[int], seeds: SeedSet, extra: int, most: int, tag: str) -> list[tuple[int, ...]]:
    """The extra seeds a racing walk on `seeds` may draw, in the order it would draw them: every order of `extra`
    of the pool's other seeds, or `most` of them drawn at random (one walk replays each order)."""
    orders = list(itertools.permutations(sorted(set(pool) - set(seeds)), extra))
    if len(orders) < 1:
        raise UserError(
            f"--max-seeds {len(seeds) + extra}: the cheap tables have {len(pool)} seeds of every design in common",
            hint=f"--max-seeds {len(pool)} at most with these tables",
        )
    return orders if len(orders) <= most else random.Random(f"race-{tag}").sample(orders, most)


def replay_all(
    space: MemoSpace,
    rungs: Sequence[Rung],
    plan: SeedPlan,
    replays: int,
    seed: int,
    curve_rungs: Sequence[int],
    tpe_startup: int = 10,
    max_seeds: int | None = None,
    keeps: Sequence[Keep] = ("beyond-noise",),
    chance: float | None = None,
    settle: Rung | None = None,
    knobs: Sequence[Knobs] = ("base",),
) -> Replays:
    """Every method on every seed set of `plan`. A racing walk (`max_seeds` above the sets' seeds) is replayed once
    per order of extra seeds it may draw (`race_orders`: a walk's own draws, like a sampler's), and the samplers'
    draws are held in turn to those walks' CPU; they measure the set's seeds alone. The bootstrap weighs a set by
    its own seeds (`SeedPlan`), not by the extras a race drew."""
    digests = sorted(rungs[0].val)
    variants = walk_variants(rungs, keeps, settle is not None, knobs)
    # random search + settle needs the settle table to hold every design random search may pick; a table of the
    # walk's path alone (the designs at the base's other knobs) settles the walk only
    whole = settle is not None and set(digests) <= set(settle.val)

    def kinds_of(v: WalkVariant) -> list[str]:
        return [kind for kind in v.kinds() if kind != "random+settle" or whole]

    methods = [v.method(kind) for v in variants for kind in kinds_of(v)]
    kinds = {v.method(kind): kind for v in variants for kind in kinds_of(v)}
    partner = {v.method(kind): v.method("walk") for v in variants for kind in kinds_of(v) if kind != "walk"}
    label = {v.method(kind): v.label for v in variants for kind in kinds_of(v)}
    first_rule = {(v.tables, v.budgeting, v.knobs): v.method("walk") for v in variants if v.keep == keeps[0]}
    rivals = {v.method("walk"): first_rule[v.tables, v.budgeting, v.knobs] for v in variants if v.keep != keeps[0]}
    outcomes: dict[str, dict[SeedSet, list[Outcome]]] = {m: {} for m in methods}
    curves: dict[int, list[Trajectory]] = {r: [] for r in curve_rungs}
    for seeds in plan.sets:
        extra = (max_seeds or len(seeds)) - len(seeds)
        orders = race_orders(plan.pool, seeds, extra, replays, f"{seed}-{seeds}") if extra else [()]
        # stand-ins come from the pool's other seeds, in the pool's order (after a race's draws, when it races)
        spare = tuple(s for s in plan.pool if s not in seeds) if chance is not None else ()
        races = {
            v: [
                run_walk(space, rungs, seeds + order + tuple(s for s in spare if s not in order), v, len(seeds),
                         chance, len([s for s in spare if s not in order]), settle)
                for order in orders
            ]
            for v in variants
        }  # fmt: skip
        for v, ws in races.items():
            outcomes[v.method("walk")][seeds] = ws
        for k in range(replays):
            walks = {v: ws[k % len(ws)] for v, ws in races.items()}  # the race whose CPU this draw is held to
            # One sampler run per rung, as long as the dearest walk answered at that rung needs; each walk's
            # samplers are those runs stopped at the walk's CPU.
            budgets: dict[int, float] = {}
            for w in walks.values():
                budgets[w.rung] = max(budgets.get(w.rung, 0.0), w.cpu)
            tag = f"{seed}-{k}-{','.join(map(str, seeds))}"
            rand = {
                rung: random_trajectory(digests, rungs[rung], seeds, random.Random(f"random-{rung}-{tag}"))
                for rung in sorted(set(budgets) | set(curve_rungs))
            }
            tpe = {
                rung: tpe_trajectory(
                    space, rungs[rung], seeds, budget, zlib.crc32(f"tpe-{rung}-{tag}".encode()), tpe_startup
                )
                for rung, budget in budgets.items()
            }
            for v, w in walks.items():
                outcomes[v.method("random")].setdefault(seeds, []).append(rand[w.rung].at(w.cpu, w.rung))
                outcomes[v.method("tpe")].setdefault(seeds, []).append(tpe[w.rung].at(w.cpu, w.rung))
                if v.settle and whole and settle is not None and w.searched_cpu is not None:  # at the walk's own part
                    picked = rand[w.rung].at(w.searched_cpu, w.rung)
                    rival = rand[w.rung].rival_at(w.searched_cpu)
                    outcomes[v.method("random+settle")].setdefault(seeds, []).append(
                        settled_pick(picked, rival, settle, len(seeds))
                    )
            for rung in curve_rungs:
                curves[rung].append(rand[rung])
    return Replays(methods, kinds, partner, label, outcomes, curves, rivals)


def stand_in_settle(rungs: Sequence[Rung], taken: set[int], seeds: int) -> Rung:
    """A settle table for `--list-settle-designs`: every design, on `seeds` fresh seeds, each run alike (0.5, at no
    chance and no failed seed) at twice the first rung's CPU; which designs the shortlists name does not depend on
    the values measured there."""
    fresh = tuple(range(max(taken) + 1, max(taken) + 1 + seeds))
    first = rungs[0]
    return Rung(
        "(every design)",
        "twice the first rung's",
        {d: dict.fromkeys(fresh, 0.5) for d in first.val},
        {d: dict.fromkeys(fresh, 2 * max(first.cpu[d].values())) for d in first.cpu},
        fresh,
    )


def settle_needs(replays: Replays) -> list[tuple[str, int, int]]:
    """(digest, seed sets whose settled walks' shortlists hold it, random + settle searches whose shortlists do)
    for every design a shortlist holds, the most needed first (by the walks, then random search)."""
    walks: dict[str, set] = {}
    randoms: Counter[str] = Counter()
    for name, by_set in replays.outcomes.items():
        kind = replays.kinds[name]
        for seeds, outcomes in by_set.items():
            for outcome in outcomes:
                for digest in outcome.shortlist:
                    if kind == "walk":
                        walks.setdefault(digest, set()).add(seeds)
                    elif kind == "random+settle":
                        randoms[digest] += 1
    found = [(d, len(walks.get(d, ())), randoms[d]) for d in set(walks) | set(randoms)]
    return sorted(found, key=lambda row: (-row[1], -row[2], row[0]))


def settle_needs_text(needs: list[tuple[str, int, int]], names: dict[str, str], sets: int, searches: int) -> str:
    """`--list-settle-designs`'s file: `buildup_table.py --designs` reads the digest that starts each line."""
    lines = [
        f"# the designs the settle stage's shortlists visit, the most needed first: digest, the seed sets (of {sets}) "
        f"whose settled walks need it, the random + settle searches (of {searches}) that do, the design"
    ]
    lines += [f"{d}\t{w}\t{r}\t{names[d]}" for d, w, r in needs]
    return "\n".join(lines) + "\n"


# -- the statistics -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float

    def text(self, digits: int = 2, scale: float = 1.0) -> str:
        v, lo, hi = (round(scale * x, digits) + 0.0 for x in (self.value, self.low, self.high))  # no "-0.00"
        return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


@dataclass(frozen=True)
class Spread:
    """A figure, and its bootstrap replicates: each replicate resamples at once the seeds of the searches (the sets
    of `SeedPlan`), a sampler's own draws on each set, and the reference's seeds; every method is judged on the
    same resamples of the seeds and the reference (a sampler's draws are its own), so differences are paired."""

    point: float
    replicates: np.ndarray  # [replicates]

    def __sub__(self, other: Spread) -> Spread:
        """The difference, paired: replicate by replicate."""
        return Spread(self.point - other.point, self.replicates - other.replicates)

    def interval(self, scale: float = 1.0) -> Estimate:
        """The point and the 2.5th and 97.5th percentiles of its replicates: within the figure's own bounds (a regret
        is never below 0, a share never outside [0, 1]), where the point -+ t x a standard error is not. With a few
        seeds a percentile interval is narrower than that one (in simulated worlds of 8 designs, 5 or 6 cheap and 4
        reference seeds, it held the walk's true expected regret 79-90 % of the time, the t-interval 87-95 %)."""
        low, high = np.percentile(self.replicates, [50 * (1 - LEVEL), 50 * (1 + LEVEL)])
        return Estimate(scale * self.point, scale * float(low), scale * float(high))


@dataclass(frozen=True)
class Figures:
    """What an answer is worth, per design (and, in the last column, for no answer: a uniform guess), on the whole
    reference (`point`) and on each bootstrap replicate's resample of the reference's seeds (`replicates`)."""

    point: np.ndarray  # [designs + 1]
    replicates: np.ndarray  # [replicates, designs + 1]


def regret_figures(values: np.ndarray, columns: np.ndarray) -> Figures:
    """The regret of each design (the best mean of `values` [designs, seeds] less its own), on all the seeds and on
    each row of `columns` (resampled seed positions). The best is the resample's own: a regret is never below 0."""

    def regrets(means: np.ndarray) -> np.ndarray:
        found = means.max(axis=-1, keepdims=True) - means
        return np.concatenate([found, found.mean(axis=-1, keepdims=True)], axis=-1)

    return Figures(regrets(values.mean(axis=1)), regrets(values[:, columns].mean(axis=2).T))


def share_figures(members: np.ndarray, replicates: int) -> Figures:
    """1 for the designs of a group (a share of answers in it is a mean of these), the guess's chance last."""
    row = np.append(members.astype(float), members.mean())
    return Figures(row, np.broadcast_to(row, (replicates, len(row))))


class Judge:
    """A method's searches on each set of seeds as answer indices (one past the designs' where a search answered
    nothing: a guess), and every figure of the method as their average over the point sets, with its bootstrap
    replicates by source (`Spread`). Every method is judged on the same resamples of the seeds and the reference:
    paired."""

    def __init__(self, reference: Reference, plan: SeedPlan, rng: np.random.Generator) -> None:
        self.index = {d: i for i, d in enumerate(reference.digests)}
        self.plan, self.rng = plan, rng

    def answers(self, outcomes: dict[SeedSet, list[Outcome]]) -> tuple[np.ndarray, np.ndarray]:
        """[sets, searches] answer indices (the guess's column where a search answered nothing) and CPU seconds."""
        rows = [outcomes[s] for s in self.plan.sets]
        found = np.array([[self.index[o.answer] if o.answer else len(self.index) for o in row] for row in rows])
        return found, np.array([[o.cpu for o in row] for row in rows])

    def draws(self, searches: int) -> np.ndarray:
        """[replicates, sets, searches]: which of each set's searches (a sampler's draws) each replicate averages."""
        shape = (len(self.plan.replicates), len(self.plan.sets), searches)
        if searches == 1:
            return np.zeros(shape, dtype=int)
        return self.rng.integers(0, searches, size=shape)

    def of_answers(self, answers: np.ndarray, figures: Figures, draws: np.ndarray) -> Spread:
        """The mean of a per-answer figure ([designs + 1]) over the searches ([sets, searches] answers): in each
        replicate, the figure on its resample of the reference, of the searches its draws pick on each set, the
        sets weighed as its resample of the seeds weighs them."""
        sets = np.arange(answers.shape[0])
        picked = answers[sets[None, :, None], draws]  # [replicates, sets, searches]
        rows = np.arange(len(draws))[:, None, None]
        per_set = figures.replicates[rows, picked].mean(axis=2)  # [replicates, sets]
        return Spread(float(figures.point[answers].mean()), (self.plan.replicates * per_set).sum(axis=1))

    def of_searches(self, values: np.ndarray, draws: np.ndarray) -> Spread:
        """The mean of a per-search figure ([sets, searches], the CPU), which the reference does not move."""
        sets = np.arange(values.shape[0])
        per_set = values[sets[None, :, None], draws].mean(axis=2)  # [replicates, sets]
        return Spread(float(values.mean()), (self.plan.replicates * per_set).sum(axis=1))


@dataclass(frozen=True)
class MethodResult:
    name: str
    kind: str
    label: str  # the walk's budget or budgeting it belongs with
    partner: str | None
    searches: int  # searches its point figures average
    regret: Estimate  # validation, points
    test_regret: Estimate
    within: Estimate  # share of answers within 0.5 points of the reference's best
    tied: Estimate  # share the reference's paired test cannot tell from its best
    cpu_seconds: Estimate
    right_per_cpu_hour: float
    designs_measured: float
    answers: dict[str, float]  # layout -> share, most frequent first


@dataclass(frozen=True)
class Difference:
    first: str
    second: str
    regret: Estimate  # first - second, points
    called: bool  # the interval excludes 0


def judge_methods(
    reference: Reference, plan: SeedPlan, replays: Replays, rng: np.random.Generator
) -> tuple[dict[str, MethodResult], list[Difference]]:
    judge = Judge(reference, plan, rng)
    replicates = len(plan.replicates)
    columns = rng.integers(0, len(reference.seeds), size=(replicates, len(reference.seeds)))
    regret = regret_figures(reference.val, columns)
    test_regret = regret_figures(reference.test, columns)  # the same resample of seeds
    within, tied = share_figures(reference.within, replicates), share_figures(reference.tied, replicates)
    results: dict[str, MethodResult] = {}
    regrets: dict[str, Spread] = {}
    for name in replays.methods:
        outcomes = replays.outcomes[name]
        answers, cpu = judge.answers(outcomes)
        draws = judge.draws(answers.shape[1])
        found = {
            key: judge.of_answers(answers, figures, draws)
            for key, figures in (("regret", regret), ("test", test_regret), ("within", within), ("tied", tied))
        }
        regrets[name] = found["regret"]
        spent = judge.of_searches(cpu, draws)
        searches = [o for s in plan.sets for o in outcomes[s]]
        shares = Counter(reference.layouts[judge.index[o.answer]] if o.answer else "(none)" for o in searches)
        results[name] = MethodResult(
            name=name,
            kind=replays.kinds[name],
            label=replays.label[name],
            partner=replays.partner.get(name),
            searches=len(searches),
            regret=found["regret"].interval(POINTS),
            test_regret=found["test"].interval(POINTS),
            within=found["within"].interval(),
            tied=found["tied"].interval(),
            cpu_seconds=spent.interval(),
            right_per_cpu_hour=found["within"].point / (spent.point / 3600) if spent.point > 0 else math.inf,
            designs_measured=statistics.fmean(o.measured for o in searches),
            answers={layout: n / len(searches) for layout, n in shares.most_common()},
        )
    differences = []
    for name, walk in [*replays.partner.items(), *replays.rivals.items()]:  # walk - name
        found_difference = (regrets[walk] - regrets[name]).interval(POINTS)  # paired: the same replicates
        called = not found_difference.low <= 0 <= found_difference.high
        differences.append(Difference(walk, name, found_difference, called))
    return results, differences


def kendall_with_se(
    rung_table, reference: Reference, replicates: int, rng: np.random.Generator
) -> tuple[float, float, int]:
    """Kendall's tau between a cheap table's design means (over the seeds every design has) and the reference's,
    and its standard error over resamples of both tables' seeds."""
    from scipy.stats import kendalltau

    seeds = common_seeds(rung_table)
    by = {d.digest: {r.seed: r.val_acc for r in d.runs} for d in rung_table.designs}
    cheap = np.array([[by[d][s] for s in seeds] for d in reference.digests])
    tau = float(kendalltau(cheap.mean(axis=1), reference.means).statistic)
    taus = []
    for _ in range(replicates):
        a = cheap[:, rng.integers(0, len(seeds), len(seeds))].mean(axis=1)
        b = reference.val[:, rng.integers(0, len(reference.seeds), len(reference.seeds))].mean(axis=1)
        found = kendalltau(a, b).statistic
        if not math.isnan(found):
            taus.append(float(found))
    return tau, float(np.std(taus, ddof=1)) if len(taus) > 1 else math.nan, len(seeds)


# -- the study ----------------------------------------------------------------------------------------


def summarize(args: argparse.Namespace) -> dict:
    import logging

    import optuna

    from archdsl.search.seed_stats import mean_and_stderr

    optuna.logging.set_verbosity(logging.WARNING)  # a line per TPE study otherwise
    paths = [args.cheap] if args.cheap else list(args.rungs)
    reference_table = load(args.reference)
    tables = [(p, load(p)) for p in paths]
    check_same_designs(reference_table, tables, args.reference)
    rungs = [read_rung(p, t) for p, t in tables]
    pool = sorted(set.intersection(*(set(r.seeds) for r in rungs)))
    reference = read_reference(args.reference, reference_table, sorted(rungs[0].val))
    space = space_of(tables[0][1])
    rng = np.random.default_rng(args.seed)
    plan = seed_plan(pool, args.seeds, args.bootstrap, rng)
    curve_rungs = sorted({0, len(rungs) - 1})
    settle_rung, settle_designs = None, None
    if args.settle:
        settle_rung, held, of = read_settle(args.settle)
        settle_designs = {"held": held, "of": of}
    if settle_rung is not None and set(settle_rung.seeds) & (set(pool) | set(reference.seeds)):
        raise UserError(
            f"--settle {args.settle} has seeds {sorted(set(settle_rung.seeds) & (set(pool) | set(reference.seeds)))} "
            "that the other tables have: the settle stage measures on fresh seeds",
            hint="train the settle table on seeds none of the other tables has",
        )
    if settle_rung is not None and len(settle_rung.seeds) < args.seeds:
        raise UserError(f"--settle {args.settle} has {len(settle_rung.seeds)} seeds of every design, below --seeds")
    if args.list_settle_designs:
        settle_rung = stand_in_settle(rungs, set(pool) | set(reference.seeds), args.seeds)
    replays = replay_all(
        space, rungs, plan, args.replays, args.seed, curve_rungs, args.tpe_startup, args.max_seeds, args.keep,
        args.chance, settle_rung, args.knobs,
    )  # fmt: skip
    if args.list_settle_designs:
        names = dict(zip(reference.digests, reference.layouts, strict=True))
        searches = sum(len(o) for name, by in replays.outcomes.items() if replays.kinds[name] == "random+settle"
                       for o in by.values())  # fmt: skip
        text = settle_needs_text(settle_needs(replays), names, len(plan.sets), searches)
        Path(args.list_settle_designs).write_text(text)
        return {"settle_designs_file": args.list_settle_designs}
    results, differences = judge_methods(reference, plan, replays, rng)

    best = reference.best
    near = reference.means >= reference.means[best] - NEAR_BEST
    stderrs = [mean_and_stderr(tuple(v))[1] for v in reference.val]
    widest = max((i for i in range(len(stderrs)) if near[i]), key=stderrs.__getitem__)
    designs = [
        {
            "layout": reference.layouts[i],
            "n_msa": reference.n_msa[i],
            "mean": float(reference.means[i]),
            "stderr": stderrs[i],
            "test_mean": float(reference.test[i].mean()),
            "within_half_a_point": bool(reference.within[i]),
            "tied_with_best": bool(reference.tied[i]),
        }
        for i in np.argsort(-reference.means)
    ]
    kendall = []
    for (path, table), rung in zip(tables, rungs, strict=True):
        tau, se, n = kendall_with_se(table, reference, args.bootstrap, rng)
        kendall.append({"table": path, "budget": rung.budget, "seeds": n, "tau": tau, "stderr": se})
    curves = {str(r): curve(replays.curves[r], reference) for r in curve_rungs}
    return {
        "reference": {
            "table": args.reference,
            "budget": reference.budget,
            "seeds": list(reference.seeds),
            "designs": len(reference.digests),
            "best": reference.layouts[best],
            "best_mean": float(reference.means[best]),
            "share_within_half_a_point": float(reference.within.mean()),
            "share_tied_with_best": float(reference.tied.mean()),
            "largest_stderr_within_2_points": {"layout": reference.layouts[widest], "stderr": stderrs[widest]},
            "per_design": designs,
        },
        "rungs": [
            {"table": r.source, "budget": r.budget, "label": rung_label(rungs, i), "seeds": list(r.seeds)}
            for i, r in enumerate(rungs)
        ],
        "kendall": kendall,
        "replays": {
            "mode": plan.mode,
            "seeds_per_search": args.seeds,
            "max_seeds": args.max_seeds,
            "keep": list(args.keep),
            "knobs": list(args.knobs),
            "settle": args.settle,
            "settle_designs": settle_designs,
            "seed_pool": list(plan.pool),
            "seed_sets": len(plan.sets),
            "sampler_replays_per_set": args.replays,
            "tpe_startup_trials": args.tpe_startup,
            "bootstrap": args.bootstrap,
            "seed_noise_in_intervals": plan.seed_noise,
        },
        "methods": [dataclasses.asdict(r) for r in results.values()],
        "differences": [dataclasses.asdict(d) for d in differences],
        "random_curves": curves,
    }


def curve(trajectories: list[Trajectory], reference: Reference) -> dict[str, list[float]]:
    """Random search's mean regret (points) against its CPU, on a grid up to where the mean run has seen half
    the designs: the curve a method's point is read against."""
    index = {d: i for i, d in enumerate(reference.digests)}
    means = reference.means
    horizon = statistics.median(t.cpu[len(t.cpu) // 2] for t in trajectories)
    grid = np.linspace(0, horizon, 60)[1:]
    rows = []
    for t in trajectories:
        row = []
        for budget in grid:
            o = t.at(float(budget), 0)
            answer = means.mean() if o.answer is None else means[index[o.answer]]
            row.append(POINTS * (means[reference.best] - answer))
        rows.append(row)
    return {"cpu_seconds": [float(g) for g in grid], "regret": [float(v) for v in np.mean(rows, axis=0)]}


# -- the report ---------------------------------------------------------------------------------------


def difference_lines(summary: dict) -> list[str]:
    """The differences in regret as a markdown table, each called only where its interval excludes 0."""
    lines = ["", "| difference in regret (points) | 95 % interval | called |", "|---|---|---|"]
    kinds = {m["name"]: m["kind"] for m in summary["methods"]}
    for d in summary["differences"]:
        e = Estimate(**d["regret"])
        whose = "the first walk's" if kinds.get(d["second"]) == "walk" else "the walk's"
        verdict = f"yes: {whose} is {'lower' if e.value < 0 else 'higher'}" if d["called"] else "no"
        lines.append(f"| {d['first']} - {d['second']} | {e.text()} | {verdict} |")
    return lines


def markdown(summary: dict) -> str:
    ref, rep = summary["reference"], summary["replays"]
    widest = ref["largest_stderr_within_2_points"]
    lines = [
        f"Reference `{ref['table']}` ({ref['budget']}, {ref['designs']} designs x seeds {ref['seeds']}): best "
        f"`{ref['best']}` {POINTS * ref['best_mean']:.2f} %; {100 * ref['share_within_half_a_point']:.0f} % of the "
        f"designs within 0.5 points of it, {100 * ref['share_tied_with_best']:.0f} % tied with it by the paired "
        f"test; the largest standard error within 2 points of the best: {POINTS * widest['stderr']:.2f} points "
        f"(`{widest['layout']}`).",
        "",
    ]
    for k in summary["kendall"]:
        lines.append(
            f"- `{k['table']}` ({k['budget']}, {k['seeds']} seeds): Kendall's tau with the reference "
            f"{k['tau']:.2f} ± {k['stderr']:.2f}"
        )
    sets = f"{rep['seed_sets']} set{'s' if rep['seed_sets'] != 1 else ''}"
    if rep["mode"] == "disjoint":
        how = f"{sets} of {rep['seeds_per_search']} disjoint seeds, the sets resampled"
    else:
        how = (
            f"every {rep['seeds_per_search']} of seeds {rep['seed_pool']} ({sets}), the seeds resampled "
            "(each set weighed by how often the resample drew its seeds)"
        )
    lines += [
        "",
        f"Replays: {how}, with the reference's seeds and the samplers' draws, {rep['bootstrap']} times (95 % "
        "intervals: the 2.5th and 97.5th percentiles, all three resampled at once); random "
        f"search and TPE (its first {rep['tpe_startup_trials']} trials random) {rep['sampler_replays_per_set']} "
        "times per set, each held to its walk's CPU on the same seeds. Regret: points of validation top-1 below "
        "the reference's best (test: report only).",
    ]
    held = rep.get("settle_designs")
    if held:
        settled = {m["kind"] for m in summary["methods"]}
        lines += [
            "",
            f"**The settle stage** (`{rep['settle']}`): the table holds {held['held']} of the space's {held['of']} "
            "designs on every one of its seeds"
            + (
                "; random search followed by the settle stage, which may pick any design, is not replayed."
                if "random+settle" not in settled
                else "."
            ),
        ]
    if rep.get("max_seeds", rep["seeds_per_search"]) > rep["seeds_per_search"]:
        lines += [
            "",
            f"**The walk races** (the search's `--max-seeds {rep['max_seeds']}`): where its paired test cannot tell "
            f"at {rep['seeds_per_search']} seeds, it measures one more, up to {rep['max_seeds']}, drawn from the "
            "pool's seeds outside the set; it is replayed once per order of those extra seeds (every order, or "
            f"{rep['sampler_replays_per_set']} drawn), and each sampler draw is held to one of those walks' CPU in "
            f"turn, on the set's {rep['seeds_per_search']} seeds.",
        ]
    if not rep["seed_noise_in_intervals"]:
        lines += [
            "",
            f"**The tables hold only {rep['seeds_per_search']} seeds every design has in every cheap table**: every "
            "search runs on the same seeds, and the intervals hold the reference's noise and the samplers' draws, "
            "not the cheap seeds' (tables with more seeds than --seeds are needed for that).",
        ]
    lines += [
        "",
        "| method | regret (val) | regret (test) | within 0.5 points | tied with the best | designs measured "
        "| CPU per search | right per CPU-hour | answers (most often) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m in summary["methods"]:
        e = {k: Estimate(**m[k]) for k in ("regret", "test_regret", "within", "tied", "cpu_seconds")}
        answers = ", ".join(f"`{a}` {100 * s:.0f} %" for a, s in list(m["answers"].items())[:3])
        lines.append(
            f"| {m['name']} | {e['regret'].text()} | {e['test_regret'].text()} | {e['within'].text(0, 100)} % "
            f"| {e['tied'].text(0, 100)} % | {m['designs_measured']:.1f} | {e['cpu_seconds'].text(1, 1 / 60)} min "
            f"| {m['right_per_cpu_hour']:.1f} | {answers} |"
        )
    lines += difference_lines(summary)
    lines += [
        "",
        "| reference design | MSAs | val % (± standard error) | test % | within 0.5 points | tied with the best |",
        "|---|---|---|---|---|---|",
    ]
    near = [d for d in ref["per_design"] if d["mean"] >= ref["best_mean"] - NEAR_BEST][:20]
    for d in near:
        lines.append(
            f"| `{d['layout']}` | {d['n_msa']} | {POINTS * d['mean']:.2f} ± {POINTS * d['stderr']:.2f} "
            f"| {POINTS * d['test_mean']:.2f} | {'yes' if d['within_half_a_point'] else ''} "
            f"| {'yes' if d['tied_with_best'] else ''} |"
        )
    if len(ref["per_design"]) > len(near):
        lines.append(f"| ({len(ref['per_design']) - len(near)} more, further from the best) | | | | | |")
    return "\n".join(lines) + "\n"


COLOURS = {"walk": "tab:blue", "random": "tab:orange", "tpe": "tab:green"}
MARKERS = "osD^vP"


def figure(summary: dict, folder: Path, name: str) -> Path:
    """Left: each method's regret with its interval (test as open circles). Right: regret against CPU per search,
    with random search's mean curve at the first budget (and the top one) to read the methods against."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from archdsl.files import save_figure

    methods = summary["methods"]
    labels = list(dict.fromkeys(m["label"] for m in methods))
    marker = {label: MARKERS[i % len(MARKERS)] for i, label in enumerate(labels)}
    fig = Figure(figsize=(15, max(4.5, 2.6 + 0.32 * len(methods))), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=(1.1, 1))
    rows = list(range(len(methods)))[::-1]
    for y, m in zip(rows, methods, strict=True):
        r, t = Estimate(**m["regret"]), Estimate(**m["test_regret"])
        colour = COLOURS[m["kind"]]
        left.errorbar(r.value, y, xerr=[[r.value - r.low], [r.high - r.value]], fmt=marker[m["label"]],
                      color=colour, capsize=3)  # fmt: skip
        left.plot(t.value, y - 0.3, marker[m["label"]], mfc="none", color=colour, ms=4)
    left.axvline(POINTS * RIGHT_WITHIN, color="grey", ls=":", lw=1)
    left.axvline(0, color="black", lw=0.6)
    left.set_yticks(rows, [m["name"] for m in methods], fontsize=8)
    left.set_xlabel("regret: the reference's best less the answer (points of top-1; filled validation, open test)")
    left.set_title("regret per method (95 % intervals; dotted: 0.5 points)", fontsize=10)
    for rung, c in summary["random_curves"].items():
        right.plot(np.array(c["cpu_seconds"]) / 60, c["regret"], color="tab:orange", alpha=0.45,
                   ls="-" if rung == "0" else "--")  # fmt: skip
    for m in methods:
        r, cpu = Estimate(**m["regret"]), Estimate(**m["cpu_seconds"])
        right.errorbar(cpu.value / 60, r.value, yerr=[[r.value - r.low], [r.high - r.value]],
                       xerr=[[(cpu.value - cpu.low) / 60], [(cpu.high - cpu.value) / 60]], fmt=marker[m["label"]],
                       color=COLOURS[m["kind"]], capsize=2, alpha=0.85)  # fmt: skip
    right.axhline(0, color="black", lw=0.6)
    right.set_xlabel("CPU per search (minutes)")
    right.set_ylabel("regret (points, validation)")
    right.set_title(f"regret against CPU (the reference's best: {summary['reference']['best']})", fontsize=10)
    handles = [Line2D([], [], color=c, marker="o", ls="", label=KIND_NAMES[k]) for k, c in COLOURS.items()]
    handles += [Line2D([], [], color="grey", marker=marker[label], ls="", label=label) for label in labels]
    handles += [
        Line2D(
            [],
            [],
            color="tab:orange",
            alpha=0.45,
            ls="-" if rung == "0" else "--",
            label=f"random search's mean, {summary['rungs'][int(rung)]['label']}",
        )
        for rung in summary["random_curves"]
    ]
    right.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    folder.mkdir(parents=True, exist_ok=True)
    return save_figure(fig, folder / f"{name}search-regret.png", dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        summary = summarize(args)
    except UserError as err:
        print(visible_lines(f"archdsl: error: {err}"), file=sys.stderr)
        return err.exit_code
    from fidelity_study import write_summary

    if args.list_settle_designs:
        print(f"wrote {args.list_settle_designs}", file=sys.stderr)
        return 0
    write_summary(summary, markdown(summary), args.json, args.markdown)
    if args.figures:
        print(f"wrote {figure(summary, Path(args.figures), args.name)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
