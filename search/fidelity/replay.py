"""Replay: answer a search's trials from a fully measured table instead of training (`--fidelity table:PATH`).

A table (`archdsl.search-table/2`, written by `benchmarks/buildup_table.py`) holds every design of a space
trained over several seeds: per run the validation curve (what a replayed search scores, prunes and chooses
on), the test figures (for reporting only, never for a choice), the final measures and the times of training
and measuring. The real search (strategies, pruners, storages, workers, report) runs with each trial answered
from the table, as NAS-Bench answers it: docs/replay.md says how a trial draws its run, reports its
curve and keeps its simulated time. The table must be of this search's dataset, base and knobs.

This module is the table (its models, loading and checks, what the study's plan holds); `replaying` answers the
trials from it.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from archdsl import json_text
from archdsl.errors import UserError, visible
from archdsl.ir import Arch
from archdsl.search.fidelity import measures as measure
from archdsl.search.objectives import Cost, Objective
from archdsl.search.seed_stats import SeedStatistics
from archdsl.search.space import ParamValue, Space, layout_text
from archdsl.search.studies.record import SIM_SECONDS_ATTR

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial


TABLE_SCHEMA = "archdsl.search-table/2"
# The earlier schema scored every run on the test set: replaying it would choose on test images.
OLD_TABLE_SCHEMAS = ("archdsl.search-table/1",)
TABLE_PREFIX = "table:"  # --fidelity table:PATH or table:NAME (a built-in table)
# The measures a run records, by objective name (params and FLOPs come from the IR).
RECORDED = ("accuracy", "robustness", "nep", "ape", "latency")
# A table file is read whole and parsed into objects: one past this is refused by its size before it is read
# (the shipped ones are ~100 KB; 1,000 designs x 5 seeds x 50 epochs: ~47 MB).
MAX_TABLE_BYTES = 64 * 1024 * 1024
# ... and one that may hold more values than this (json_text.most_values) before it is parsed. What a table takes
# in memory goes with its values, not its bytes: parsed and checked, 180-270 bytes a value, so this bounds a load
# to ~700 MB (780,000 minimal designs, under the byte bound, took 1.4 GB); 1,000 designs x 5 seeds x 50 epochs
# hold 2.1 million.
MAX_TABLE_VALUES = 2_500_000


# What a table's numbers may be: every one finite, fractions in [0, 1], times non-negative and below
# a century (a duration the report can still print), whole numbers within 64 bits. Checked as the
# table is loaded, so that a bad value is named by its place in the file, not met mid-search.
Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Finite = Annotated[float, Field(allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Seconds = Annotated[float, Field(ge=0, le=100 * 365 * 24 * 3600, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0, le=2**63 - 1)]


class CurvePoint(BaseModel):
    """One epoch of a run: the validation top-1 (a fraction) and NLL after it (what a search's pruner
    sees), the test top-1 and NLL when recorded (for reporting only), and its wall time."""

    model_config = ConfigDict(extra="allow")
    epoch: Annotated[int, Field(ge=0, le=10**9)]
    val_acc: Fraction
    val_nll: NonNegative | None = None
    test_acc: Fraction | None = None
    test_nll: NonNegative | None = None
    train_loss: Finite | None = None
    seconds: Seconds


class TableRun(BaseModel):
    """One training of one design with one seed: its validation top-1 and NLL (what a search scores and
    chooses on), its test top-1 and NLL (read once, after training: for reporting, never for a choice),
    and what was measured after it."""

    model_config = ConfigDict(extra="allow")
    seed: Count
    val_acc: Fraction
    val_nll: NonNegative | None = None
    test_acc: Fraction
    test_nll: NonNegative | None = None
    robustness: Fraction | None = None
    nep: Fraction | None = None
    ape: Finite | None = None
    latency: NonNegative | None = None
    curve: list[CurvePoint] = Field(min_length=1)
    train_seconds: Seconds
    measure_seconds: Seconds = 0.0
    # The CPU time of one single-threaded run is its cost on an idle core; the wall time also holds
    # whatever else the machine was doing (the shipped table was made beside other work).
    train_cpu_seconds: Seconds | None = None
    measure_cpu_seconds: Seconds | None = None
    test_cpu_seconds: Seconds | None = None  # scoring the trained model on the test split once

    @property
    def accuracy(self) -> float:
        """The `accuracy` objective of a replayed trial: the validation top-1, as a trained trial's."""
        return self.val_acc

    @property
    def train_time(self) -> float:
        """The simulated clock's training time: the CPU time when the table has it, else the wall time."""
        return self.train_seconds if self.train_cpu_seconds is None else self.train_cpu_seconds

    @property
    def measure_time(self) -> float:
        """The simulated clock's measuring time (as `train_time`)."""
        return self.measure_seconds if self.measure_cpu_seconds is None else self.measure_cpu_seconds

    def accuracy_after(self, epochs: int) -> float:
        """The run's validation accuracy after `epochs` (its final one when they are all)."""
        return self.curve[epochs - 1].val_acc if epochs < len(self.curve) else self.val_acc

    def cpu_seconds(self, epochs: int) -> float | None:
        """The CPU a trained trial spends on this run: training `epochs` of its curve (that share of the run's
        training CPU), then scoring the test split once; None where the table records either as wall time only."""
        if self.train_cpu_seconds is None or self.test_cpu_seconds is None:
            return None
        return min(1.0, epochs / len(self.curve)) * self.train_cpu_seconds + self.test_cpu_seconds


class TableDesign(BaseModel):
    """One design of the space (keyed by `Arch.digest()`) and its runs."""

    model_config = ConfigDict(extra="allow")
    digest: str
    layout: str
    n_msa: Count
    params: dict[str, ParamValue]
    n_params: Count
    flops: NonNegative
    runs: list[TableRun]


class Table(BaseModel):
    """A fully measured space: the schema `archdsl.search-table/2`."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    schema_: str = Field(alias="schema")
    description: str = ""
    command: str = ""
    versions: dict[str, str] = {}
    machine: str = ""
    dataset: str
    base: str  # the canonical .arch text of the base, fitted to the dataset
    searched: list[str]
    fidelity: dict[str, Any] = {}
    seeds: list[Count] = []
    # The seed statistics of its designs (archdsl.search.seed_stats), as --assemble computed them.
    statistics: SeedStatistics | None = None
    designs: list[TableDesign]

    @model_validator(mode="after")
    def _one_entry_per_design(self) -> Table:
        first: dict[str, int] = {}
        for index, design in enumerate(self.designs):
            if design.digest in first:  # which of two entries answers a trial would be an accident
                raise PydanticCustomError(
                    "twin_digest",
                    "designs[{index}].digest: the digest of designs[{other}] again",
                    {"index": index, "other": first[design.digest]},
                )
            first[design.digest] = index
        return self


@dataclass(frozen=True)
class Replay:
    """A loaded table, ready to answer trials: its designs by digest, and the epochs replayed."""

    table: Table
    source: str  # what --fidelity named: a path or a built-in name
    epochs: int  # the curve's length (every run has at least these)

    @functools.cached_property  # built once: every trial and check_replay's every design look up here
    def by_digest(self) -> dict[str, TableDesign]:
        return {d.digest: d for d in self.table.designs}

    def design(self, arch: Arch) -> TableDesign:
        """The table's entry of a design; a UserError if the table lacks it or has no run of it."""
        found = self.by_digest.get(arch.digest())
        if found is None or not found.runs:
            what = "is not in" if found is None else "has no run in"
            raise UserError(
                f"design {layout_text(arch)} ({arch.digest()[:12]}) {what} the table {self.source}",
                hint="the table must hold every design of the searched space (is it a partial table?)",
            )
        return found

    def draw(self, design: TableDesign, seed: int, number: int) -> TableRun:
        """The run that answers trial `number`: one of the design's seeds, drawn from (seed, number)."""
        from archdsl.run.loader import derive_seed  # torch at import: only when a trial is answered

        return design.runs[derive_seed(seed, number) % len(design.runs)]


# -- loading and checking -----------------------------------------------------------------


def is_replay(fidelity: str) -> bool:
    """Whether a --fidelity value names a table (`table:...`) rather than training (`train`)."""
    return fidelity.startswith(TABLE_PREFIX)


def builtin_tables() -> list[str]:
    """The names of the tables shipped with archdsl (`search/tables/*.json`)."""
    folder = resources.files("archdsl.search").joinpath("tables")
    if not folder.is_dir():
        return []
    return sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json"))


def table_path(ref: str) -> Path:
    """The file of `ref`: a path, or the name of a built-in table."""
    path = Path(ref)
    if path.exists() or path.suffix == ".json" or len(path.parts) > 1:
        if not path.is_file():
            raise UserError(f"no search table at {ref}", hint=_known_tables_hint())
        return path
    folder = resources.files("archdsl.search").joinpath("tables")
    found = folder.joinpath(f"{ref}.json")
    if not found.is_file():
        raise UserError(f"no search table named {ref!r}", hint=_known_tables_hint())
    return Path(str(found))


def _known_tables_hint() -> str:
    names = builtin_tables()
    return f"give a table's path, or a built-in table: {', '.join(names)}" if names else "give a table's path"


def load_replay(fidelity: str) -> Replay:
    """The table named by `--fidelity table:REF`, checked against the schema."""
    ref = fidelity[len(TABLE_PREFIX) :] if is_replay(fidelity) else fidelity
    if not ref:
        raise UserError("--fidelity table: names no table", hint="--fidelity table:PATH or table:NAME")
    path = table_path(ref)
    size = path.stat().st_size
    if size > MAX_TABLE_BYTES:
        raise UserError(
            f"{ref} is {size:,} bytes; a search table holds at most {MAX_TABLE_BYTES:,} bytes",
            hint="a table holds the designs of one space (the shipped ones are ~100 KB): is it a search table?",
        )
    raw = path.read_bytes()
    values = json_text.most_values(raw)
    if values > MAX_TABLE_VALUES:
        raise UserError(
            f"{ref} holds up to {values:,} JSON values (its commas and brackets); a search table holds at most "
            f"{MAX_TABLE_VALUES:,} (each takes about 250 bytes once read)",
            hint="a table holds the designs of one space (1,000 designs x 5 seeds x 50 epochs: 2.1 million values): "
            "is it a search table?",
        )
    try:
        data = json_text.parse(raw.decode("utf-8"))
    except json_text.TooDeepJSON as err:
        raise UserError(f"{ref} is not a search table: its {err}") from None
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError, an integer of too many digits
        raise UserError(f"{ref} is not a search table: not JSON ({err})") from None
    found = data.get("schema") if isinstance(data, dict) else None
    if found in OLD_TABLE_SCHEMAS:
        raise UserError(
            f"{ref} is a table of schema {found}: it records no validation values (val_acc), and replaying it "
            "would choose on the test set",
            hint=f"re-make it as {TABLE_SCHEMA} with benchmarks/buildup_table.py",
        )
    if found != TABLE_SCHEMA:
        raise UserError(
            f"{ref} is not a search table of schema {TABLE_SCHEMA}"
            + (f" (its schema is {found!r})" if found is not None else " (it names no schema)"),
            hint="tables are written by benchmarks/buildup_table.py --assemble",
        )
    try:
        table = Table.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        if first["type"] == "twin_digest":
            raise UserError(f"{ref}: not a valid {TABLE_SCHEMA} table: {first['msg']}") from None
        where = json_place(first["loc"])
        value = f" (it is {visible(repr(first['input'])[:40])})" if first["type"] != "missing" else ""
        raise UserError(f"{ref}: not a valid {TABLE_SCHEMA} table: {where}: {first['msg']}{value}") from None
    runs = [r for d in table.designs for r in d.runs]
    if not runs:
        raise UserError(f"{ref}: the table holds no run", hint="a table being made: assemble it when runs are done")
    return Replay(table=table, source=ref, epochs=min(len(r.curve) for r in runs))


def json_place(loc: tuple[int | str, ...]) -> str:
    """A validation error's place as a JSON path: `designs[2].runs[1].accuracy`."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")


def check_replay(
    replay: Replay, space: Space, dataset: str, objectives: tuple[Objective, ...], seeds: int = 1, max_seeds: int = 1
) -> None:
    """A UserError unless the table answers this search: its dataset, base, knobs, designs, objectives, and
    runs enough for `max_seeds` paired seeds (`--seeds`, `--max-seeds`) of every design."""
    table = replay.table
    if table.dataset != dataset:
        raise UserError(
            f"the table {replay.source} measured {table.dataset}, not {dataset}", hint=f"--dataset {table.dataset}"
        )
    _check_base(replay, space)
    if tuple(table.searched) != tuple(space.searched):
        raise UserError(
            f"the table {replay.source} searched {','.join(table.searched)}, not {','.join(space.searched)}",
            hint=f"--search {','.join(table.searched)}",
        )
    _check_runs(replay, space, seeds, max_seeds)
    for o in objectives:
        if o.cost == Cost.STATIC:
            continue  # params and FLOPs: from the IR
        if o.name not in RECORDED or any(getattr(r, o.name) is None for d in table.designs for r in d.runs):
            recorded = [n for n in RECORDED if all(getattr(r, n) is not None for d in table.designs for r in d.runs)]
            raise UserError(
                f"the table {replay.source} records no {o.name} for every run",
                hint=f"it records {', '.join(recorded)}; params and flops come from the design",
            )


def _check_base(replay: Replay, space: Space) -> None:
    """A UserError unless the table measured this search's base, naming the first line that differs."""
    from archdsl.lang.spec import parse_spec

    base = parse_spec(replay.table.base, path=f"{replay.source}: base")
    if base.digest() != space.base.digest() and base.name == space.base.name:
        from archdsl.lang.printer import format_arch

        # Compared with their spaces collapsed: the printer pads a block's lines to its widest, so one wider
        # line moves its neighbours' columns without changing them.
        theirs, ours = ([" ".join(line.split()) for line in format_arch(a).splitlines()] for a in (base, space.base))
        line = next(
            (i for i, (a, b) in enumerate(zip(theirs, ours, strict=False)) if a != b), min(len(theirs), len(ours))
        )
        differs = [(lines[line:] or ["(nothing)"])[0] for lines in (theirs, ours)]
        raise UserError(
            f"the table {replay.source} measured another version of the base {base.name!r}: "
            f"its `{differs[0]}` is `{differs[1]}` in this search's",
            hint="search with the table's base (a spec file of its `base` text), or re-make the table",
        )
    if base.digest() != space.base.digest():
        raise UserError(
            f"the table {replay.source} measured the base {base.name!r}, not this search's {space.base.name!r}",
            hint=f"--base {base.name}",
        )


def _check_runs(replay: Replay, space: Space, seeds: int, max_seeds: int) -> None:
    """A UserError unless every design of the space has runs enough for `max_seeds` paired seeds, on the same
    seeds for every design where seeds pair."""
    archs = _space_designs(space)
    missing = [layout_text(a) for a in archs if not getattr(replay.by_digest.get(a.digest()), "runs", None)]
    if missing:
        raise UserError(
            f"the table {replay.source} has no run of {len(missing)} of the space's {space.n_designs()} designs "
            f"(first: {missing[0]})",
            hint="a partial table: assemble it again when every design has a run",
        )
    designs = [replay.by_digest[a.digest()] for a in archs]
    fewest = min(designs, key=lambda d: len(d.runs))
    seed_sets = {tuple(sorted(r.seed for r in d.runs)): d for d in designs}
    if max_seeds > 1 and len(seed_sets) > 1:  # paired index s reads each design's run of the same seed
        (first, one), (other, another) = list(seed_sets.items())[:2]
        raise UserError(
            f"--seeds {seeds}: the table {replay.source} cannot pair seeds: its designs were measured on different "
            f"seeds ({one.layout}: {', '.join(map(str, first))}; {another.layout}: {', '.join(map(str, other))})",
            hint="--seeds 1 draws one run per trial; or re-make the table with the same seeds for every design",
        )
    if len(fewest.runs) < max_seeds:  # paired seed index s reads a design's s-th run: each needs max_seeds
        flag, n = ("--max-seeds", max_seeds) if max_seeds > seeds else ("--seeds", seeds)
        raise UserError(
            f"{flag} {n}: the table {replay.source} has {len(fewest.runs)} runs of {fewest.layout}",
            hint=f"{flag} {len(fewest.runs)} at most with this table",
        )


def _space_designs(space: Space) -> list[Arch]:
    """Every distinct design of the space (grid order)."""
    choices = space.choices()
    seen: dict[str, Arch] = {}
    for values in itertools.product(*choices.values()):
        arch = space.arch_from_params(dict(zip(choices, values, strict=True)))
        seen.setdefault(arch.digest(), arch)
    return list(seen.values())


# -- a trial's runs -------------------------------------------------------------------------


def paired_runs(design: TableDesign, seed: int, indices: Iterable[int]) -> tuple[TableRun, ...]:
    """The runs of `design` that answer paired seed indices `indices` in a replay with `--seed seed`: index s
    is the run at position `measures.seed_of(seed, s)` (the seed a trained search would train it with) of the
    design's runs sorted by seed, wrapped around: the same seed for every design, as `check_replay` makes sure
    every design has the same seeds when seeds are paired. So replays with other `--seed` values (the efficiency
    study's repeats) draw other paired seeds, as trained searches would; `--seed 0` reads the first ones."""
    ordered = sorted(design.runs, key=lambda r: r.seed)
    return tuple(ordered[measure.seed_of(seed, i) % len(ordered)] for i in indices)


def simulated_seconds(trials: list[FrozenTrial]) -> float:
    """The simulated time of a study's replayed trials, one worker running them one after another."""
    return sum(float(t.user_attrs.get(SIM_SECONDS_ATTR, 0.0)) for t in trials)
