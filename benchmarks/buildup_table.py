"""A fully measured build-up space: every design of `resnet-fmnist`'s k x heads space, trained over paired seeds.

The NAS-Bench way of asking whether a search is worth running: train every design of a small
space several times, keep every number, then replay searches against the table
(`archdsl search --fidelity table:PATH`, `benchmarks/search_efficiency.py`) instead of training.

The space is what `archdsl search --dataset fashion-mnist --base resnet-fmnist --search k,heads`
searches (32 designs; `--search k` gives its 8 with the default heads, trained first: `--first`).
Each design is trained once per seed as a search trial trains it, at the search's own default
fidelity (`session.fidelity_for` on a real dataset: `fast`, 2 epochs, a tenth of the training
split less the validation images), with the search's code (`archdsl.search.fidelity.measures.train_candidate`),
and is measured as a trial measures it: validation top-1 and NLL after every epoch (the curve a
pruner sees), the test top-1 and NLL on the whole test set after every epoch too (for reporting only;
`--test-curves` adds them to runs recorded with the last epoch's alone), robustness
on the corrupted validation images, Hessian NEP/APE, params, FLOPs, latency, and the wall and CPU
time of training and of measuring.

Each finished run is one line of `--work/runs-*.jsonl`, so the script resumes where it stopped
and runs in pieces (`--shard 0/2` and `--shard 1/2` in two processes); `--assemble` writes the
table (a JSON file with its schema, the exact command and the versions) from those lines:

    OMP_NUM_THREADS=1 nohup nice -n 10 python benchmarks/buildup_table.py --shard 0/2 > table-0.log 2>&1 &
    OMP_NUM_THREADS=1 nohup nice -n 10 python benchmarks/buildup_table.py --shard 1/2 > table-1.log 2>&1 &
    python benchmarks/buildup_table.py --assemble [--search k --out search/tables/fashion-mnist-k.json]

Needs Fashion-MNIST (`apt-get install dataset-fashion-mnist`, or the IDX files under --data-root).

A bad flag or a damaged --work ends in one line (exit 2) before any training; a last line cut short mid-write
(a run killed as it wrote) is dropped, said, and that run trained again.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import resource
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from script_args import at_least, fraction, non_negative, positive_int, shard

from archdsl.errors import UsageError, UserError, visible, visible_lines

if TYPE_CHECKING:
    import torch

    from archdsl.search.fidelity.replay import Table

BASE = "resnet-fmnist"
SEARCHED = ("k", "heads")
DATASET = "fashion-mnist"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, every value checked (argparse's types, then `check_args`) before any work."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--work", default="benchmarks/tables/fashion-mnist-k-heads", help="where each finished run's line goes"
    )
    parser.add_argument("--out", default="search/tables/fashion-mnist-k-heads.json", help="the assembled table")
    parser.add_argument("--data-root", default=os.environ.get("ARCHDSL_DATA", "/usr/share/datasets"))
    parser.add_argument("--seeds", type=at_least(0), nargs="+", default=[0, 1, 2])
    # The search's own default fidelity (measures.Fidelity, session.fidelity_for on a real dataset) unless given:
    # a table measured at another fidelity would describe another search.
    parser.add_argument("--recipe", help="training recipe (default: the search's)")
    parser.add_argument("--epochs", type=positive_int, help="epochs per run (default: the search's)")
    parser.add_argument(
        "--subset", type=fraction, help="class-stratified fraction of the training images (above 0, at most 1)"
    )
    parser.add_argument(
        "--search", default=",".join(SEARCHED), help="the knobs: the space trained, and the one --assemble writes"
    )
    parser.add_argument(
        "--first",
        default="k",
        help="knobs of a sub-space whose designs are trained first (k: the 8 designs with the default heads), so "
        "that a table of that sub-space is complete soonest (`--assemble --search k`)",
    )
    parser.add_argument("--dataset", default=DATASET, help="the dataset (default: %(default)s)")
    parser.add_argument("--base", default=BASE, help="the base network (default: %(default)s)")
    parser.add_argument(
        "--val-subset", type=fraction,
        help="class-stratified fraction of the validation images that score each run (default: the search's, the "
        "--subset fraction; 1: all of them, as the end-of-training reference reads them)",
    )  # fmt: skip
    parser.add_argument(
        "--val-split",
        help="validation images held out of the training split (default: the search's on the dataset); a reference "
        "on generated data can hold out many (`--dataset odd-one-out:train=6500 --val-split 5000`: the search's 1,500 "
        "training images, scored on 5,000)",
    )
    parser.add_argument(
        "--val-curve",
        type=positive_int,
        help="score the per-epoch validation curve on a class-stratified N of the validation images and only the "
        "last epoch on all of them (a reference scored on many images at the cost of one pass, not one per epoch)",
    )
    parser.add_argument(
        "--accuracy-only", action="store_true",
        help="train and read validation and test after every epoch, skip robustness, NEP/APE and latency (a reference "
        "that ranks by accuracy needs no analyses)",
    )  # fmt: skip
    parser.add_argument(
        "--seed-major", action="store_true",
        help="run every design on the first seed, then every design on the next (a table cut short holds whole "
        "seeds: every design on as many paired seeds), instead of whole designs first",
    )  # fmt: skip
    parser.add_argument(
        "--test-once", action="store_true",
        help="read the test split after the last epoch only (a rung table, whose runs only choose, needs no curve)",
    )  # fmt: skip
    parser.add_argument(
        "--only-within", type=non_negative, metavar="POINTS",
        help="train only the designs whose mean validation top-1 over the runs already in --work is within POINTS "
        "points of the best such mean (a reference's further seeds where they decide who ties with the best; "
        "designs with no run yet are trained)",
    )  # fmt: skip
    parser.add_argument(
        "--designs", metavar="FILE",
        help="train only the designs this file names, a digest at the start of each line, in its order (the designs "
        "a replay's settle stage visits, the most needed first, so that a table cut short holds those); default: "
        "every design of the space",
    )  # fmt: skip
    parser.add_argument("--threads", type=positive_int, default=1)
    parser.add_argument(
        "--shard", type=shard, default="0/1", help="I/N: this process runs every N-th run from the I-th (0 <= I < N)"
    )
    parser.add_argument("--limit", type=positive_int, help="stop after this many runs (a smoke test; 1 or more)")
    parser.add_argument("--assemble", action="store_true", help="write --out from the finished runs and stop")
    parser.add_argument(
        "--test-curves",
        action="store_true",
        help="add the test figures after every epoch but the last to the finished runs recorded without them (the "
        "first tables): each run is trained again to its last-but-one epoch, its validation figures must equal its "
        "line's, and its test figures go to --work/test-curves-*.jsonl, which --assemble merges (resumes and shards "
        "as the runs do)",
    )
    parser.add_argument(
        "--markdown", help="with --assemble: also write the per-design table (docs/results-search.md's) here"
    )
    parser.add_argument(
        "--fidelity-words", default="the search's default fidelity",
        help="with --assemble: the table description's words for how its runs were trained",
    )  # fmt: skip
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # the command a table records
    check_args(args)
    return args


def check_args(args: argparse.Namespace) -> None:
    """What argparse's types cannot check alone, as `archdsl search` checks it: the dataset and the knobs (a
    `UsageError`), and --work (a folder, or nothing yet)."""
    from archdsl.data import describe
    from archdsl.search.space import parse_searched

    try:
        describe(args.dataset)
    except UsageError:
        raise
    except UserError as err:  # an unknown name is a bad flag: exit 2, as argparse's own
        raise UsageError(err.message, hint=err.hint) from None
    args.searched = parse_searched(args.search)
    if args.first:
        parse_searched(args.first)
    work = Path(args.work)
    if work.exists() and not work.is_dir():
        raise UsageError(f"--work '{visible(work)}' is a file", hint="give --work the folder of the runs' lines")


def named_designs(path: Path, all_designs: list[tuple[str, dict, object]]) -> list[tuple[str, dict, object]]:
    """`--designs`: the designs `path` names (a digest, or its first 12 or more characters, at the start of each
    line; `#` starts a comment), in the file's order; a name that is no design of the space is a `UsageError`."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"--designs '{visible(path)}' cannot be read: {err}", hint="a text file of digests") from None
    chosen: list[tuple[str, dict, object]] = []
    for number, line in enumerate(lines, start=1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        found = [d for d in all_designs if len(words[0]) >= 12 and d[0].startswith(words[0])]
        if len(found) != 1:
            raise UsageError(
                f"--designs '{visible(path)}' line {number}: {visible(words[0][:64])} names no design of the space",
                hint="a digest (12 characters or more) of a design of the --search space on --base",
            )
        if found[0] not in chosen:
            chosen.append(found[0])
    if not chosen:
        raise UsageError(f"--designs '{visible(path)}' names no design", hint="a digest at the start of each line")
    return chosen


def the_space(searched: tuple[str, ...] = SEARCHED, dataset: str = DATASET, base_name: str = BASE):
    """The searched space, fitted to the dataset exactly as `archdsl search` fits it."""
    from archdsl.data import describe
    from archdsl.search.fidelity.measures import fit_to_data, load_base
    from archdsl.search.space import make_space

    info = describe(dataset)
    base = fit_to_data(load_base(base_name), info.image_shape, info.num_classes)
    return make_space(base, searched)


def designs(space) -> list[tuple[str, dict, object]]:
    """(digest, the first parameter set naming it, Arch) for every distinct design, in grid order."""
    choices = space.choices()
    seen: dict[str, tuple[str, dict, object]] = {}
    for values in itertools.product(*choices.values()):
        params = dict(zip(choices, values, strict=True))
        arch = space.arch_from_params(params)
        seen.setdefault(arch.digest(), (arch.digest(), params, arch))
    return list(seen.values())


def fidelity(args: argparse.Namespace):
    """The search's default fidelity on the dataset, with the settings given on the command line."""
    from archdsl.search.planning import fidelity_for
    from archdsl.search.settings import SearchSettings

    given = {"recipe": args.recipe, "epochs": args.epochs, "subset": args.subset, "hessian_batches": 2}
    given["val_subset"] = getattr(args, "val_subset", None)
    given["val_split"] = getattr(args, "val_split", None)
    dataset = getattr(args, "dataset", DATASET)
    fid = fidelity_for(SearchSettings(dataset=dataset), {k: v for k, v in given.items() if v is not None})
    # A table run trains one seed (its --seeds are separate runs): its recorded fidelity says so, whatever the
    # search's --seeds default (the extra seeds 3-5 were made when it was 2, and their lines say 2).
    return fid.model_copy(update={"seeds": 1})


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class TrainedRun(NamedTuple):
    """A design trained as a search trial trains it, and read on the test set after every epoch."""

    model: torch.nn.Module
    val_acc: float
    curve: list[dict]  # per epoch: val_acc, val_nll (the validation images), test_acc, test_nll, train_loss, seconds
    test_acc: float
    test_nll: float
    train_seconds: float
    train_cpu_seconds: float
    test_cpu_seconds: float


class _Enough(Exception):
    """Stops a run after the epochs `test_curve` needs."""


def train_and_test(arch, data, test_set, fid, seed: int, every_epoch: bool = True, whole_validation=None) -> TrainedRun:
    """One training of `arch` as a search trial trains it (on the training split less the validation
    images, scored on those after every epoch), read on the test split after every epoch too: the
    reporting values, never seen by a search's choice (after the last epoch alone without `every_epoch`).
    `whole_validation` (`--val-curve`): `data.validation` is a part of it, which scores the curve; the
    run's own validation figures are the last epoch's model scored on the whole of it."""
    from archdsl.run.evaluate import evaluate

    tested: dict[int, tuple[float, float]] = {}
    wall0, cpu0 = time.perf_counter(), cpu_seconds()
    trained, _, (test_cpu, test_wall) = _tested_training(
        arch, data, test_set, fid, seed, tested, stop_after=None, every_epoch=every_epoch
    )
    assert trained is not None
    train_wall, train_cpu = time.perf_counter() - wall0 - test_wall, cpu_seconds() - cpu0 - test_cpu
    cpu1 = cpu_seconds()
    test = evaluate(trained.model, test_set)
    tested[fid.epochs] = (test.top1, test.nll)
    test_cpu += cpu_seconds() - cpu1
    curve, val_acc = _curve(trained.history, tested), trained.accuracy
    if whole_validation is not None:  # the last epoch on every validation image (--val-curve)
        whole = evaluate(trained.model, whole_validation)
        val_acc = whole.top1
        curve[-1] = {**curve[-1], "val_acc": whole.top1, "val_nll": whole.nll}
    return TrainedRun(trained.model, val_acc, curve, test.top1, test.nll, train_wall, train_cpu, test_cpu)


def test_curve(arch, data, test_set, fid, seed: int, epochs: int) -> list[dict]:
    """The first `epochs` points of `train_and_test`'s curve (the run stopped after them): what a run
    recorded without test figures per epoch lacks, for `--test-curves`."""
    tested: dict[int, tuple[float, float]] = {}
    _, history, _ = _tested_training(arch, data, test_set, fid, seed, tested, stop_after=epochs)
    return _curve(history, tested)


def _tested_training(
    arch, data, test_set, fid, seed: int, tested: dict, stop_after: int | None, every_epoch: bool = True
):
    """(the trained design or None when stopped after epoch `stop_after`, its per-epoch metrics, the CPU and
    wall seconds of the test reads): trained by `measures.train_candidate`, the model after each epoch but the last
    read on `test_set` into `tested[epoch]`. That model is the run's checkpoint (`last.safetensors`,
    written before the epoch's callback), so the reads change nothing in training."""
    import tempfile

    from archdsl.run.checkpoint import load_checkpoint
    from archdsl.run.evaluate import evaluate
    from archdsl.search.fidelity import measures as measure

    cost = [0.0, 0.0]  # the test reads' CPU and wall seconds
    with tempfile.TemporaryDirectory(prefix="table-run-") as scratch:
        run_dir = Path(scratch) / "run"

        def on_epoch(epoch: int, top1: float) -> None:
            if every_epoch and epoch < fid.epochs:  # the last epoch's model is the trained one: the caller reads it
                cpu, wall = cpu_seconds(), time.perf_counter()
                test = evaluate(load_checkpoint(run_dir / "last.safetensors").model, test_set)
                tested[epoch] = (test.top1, test.nll)
                cost[0] += cpu_seconds() - cpu
                cost[1] += time.perf_counter() - wall
            if stop_after is not None and epoch >= stop_after:
                raise _Enough

        try:
            trained = measure.train_candidate(
                arch, data, fid, device="cpu", seed=seed, run_dir=run_dir, on_epoch=on_epoch, progress=False
            )
        except _Enough:
            return None, _epoch_rows(run_dir), (cost[0], cost[1])
    return trained, trained.history, (cost[0], cost[1])


def _epoch_rows(run_dir: Path) -> list[dict]:
    """The run's per-epoch metrics so far (its metrics.jsonl)."""
    from archdsl.run._run_dir import METRICS_JSONL

    return [json.loads(line) for line in (run_dir / METRICS_JSONL).read_text().splitlines() if line.strip()]


def _curve(history: list[dict], tested: dict[int, tuple[float, float]]) -> list[dict]:
    """The table's curve from train's per-epoch metrics (scored on the search's validation images,
    measures.train_candidate) and the test figures read after each epoch."""
    return [
        {
            "epoch": int(m["epoch"]),
            "val_acc": m["val_acc"],
            "val_nll": m["val_loss"],
            "test_acc": tested.get(int(m["epoch"]), (None, None))[0],
            "test_nll": tested.get(int(m["epoch"]), (None, None))[1],
            "train_loss": m["train_loss"],
            "seconds": m["seconds"],
        }
        for m in history
    ]


def run_one(
    arch, data, test_set, fid, seed: int, accuracy_only: bool = False, test_once: bool = False, whole_validation=None
) -> dict:
    """One table run: `train_and_test`, then the other measures a trial takes (none with `accuracy_only`)."""
    from archdsl.search.fidelity import measures as measure

    run = train_and_test(arch, data, test_set, fid, seed, every_epoch=not test_once, whole_validation=whole_validation)
    wall2, cpu2 = time.perf_counter(), cpu_seconds()
    if accuracy_only:
        return {**_trained_fields(run, seed), "measure_seconds": 0.0, "measure_cpu_seconds": 0.0}
    robustness = measure.robustness(run.model, data, fid, seed=seed, device="cpu")
    nep, ape = measure.hessian(run.model, data, fid, seed=seed, device="cpu")
    latency = measure.latency_ms(arch, data, fid, "cpu", seed)
    return {
        **_trained_fields(run, seed),
        "robustness": robustness,
        "nep": nep,
        "ape": ape,
        "latency": latency,
        "measure_seconds": time.perf_counter() - wall2,
        "measure_cpu_seconds": cpu_seconds() - cpu2,
    }


def _trained_fields(run: TrainedRun, seed: int) -> dict:
    return {
        "seed": seed,
        "val_acc": run.val_acc,
        "val_nll": run.curve[-1]["val_nll"],
        "test_acc": run.test_acc,
        "test_nll": run.test_nll,
        "test_cpu_seconds": run.test_cpu_seconds,
        "curve": run.curve,
        "train_seconds": run.train_seconds,
        "train_cpu_seconds": run.train_cpu_seconds,
    }


def near_the_best(done: dict[tuple[str, int], dict], points: float):
    """Whether a design (by digest) has no run in `done` yet, or a mean validation top-1 over its runs within
    `points` points of the best design's mean (`--only-within`)."""
    by_design: dict[str, list[float]] = {}
    for (digest, _), row in done.items():
        by_design.setdefault(digest, []).append(row["run"]["val_acc"])
    means = {digest: sum(values) / len(values) for digest, values in by_design.items()}
    best = max(means.values(), default=0.0)
    return lambda digest: digest not in means or means[digest] >= best - points / 100


def versions() -> dict[str, str]:
    import numpy
    import optuna
    import timm
    import torch

    import archdsl

    return {
        "archdsl": archdsl.__version__,
        "torch": torch.__version__,
        "timm": timm.__version__,
        "optuna": optuna.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
    }


def machine() -> str:
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next(
        (line.split(":", 1)[1].strip() for line in lines if "model name" in line),
        platform.processor() or "unknown CPU",
    )
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} x {cpu}"


def finished(work: Path) -> dict[tuple[str, int], dict]:
    """The finished runs' lines by (digest, seed), as written."""
    return {
        (row["digest"], row["run"]["seed"]): row
        for row in _lines(work, "runs-*.jsonl", _is_run, "finished run's record")
    }


def _is_run(row: Any) -> bool:
    """Whether a line of runs-*.jsonl is a finished run's record (what `finished` and `--assemble` read)."""
    return (
        isinstance(row, dict)
        and isinstance(row.get("digest"), str)
        and isinstance(row.get("run"), dict)
        and isinstance(row["run"].get("seed"), int)
    )


def _is_test_curve(row: Any) -> bool:
    """Whether a line of test-curves-*.jsonl is a run's test curve (`--test-curves`)."""
    return (
        isinstance(row, dict)
        and isinstance(row.get("digest"), str)
        and isinstance(row.get("seed"), int)
        and isinstance(row.get("curve"), list)
    )


def with_test_curves(done: dict[tuple[str, int], dict], work: Path) -> dict[tuple[str, int], dict]:
    """`done` (from `finished`) with the runs' curves completed by `--test-curves`' lines: the test figures
    after each epoch, the last epoch's being the run's own."""
    added = {
        (row["digest"], row["seed"]): row["curve"]
        for row in _lines(work, "test-curves-*.jsonl", _is_test_curve, "run's test curve")
    }
    for key, row in done.items():
        run = row["run"]
        tests = {p["epoch"]: (p["test_acc"], p["test_nll"]) for p in added.get(key, [])}
        tests[len(run["curve"])] = (run["test_acc"], run["test_nll"])
        for point in run["curve"]:
            if point.get("test_acc") is None and point["epoch"] in tests:
                point["test_acc"], point["test_nll"] = tests[point["epoch"]]
    return done


def _lines(work: Path, pattern: str, is_record: Callable[[Any], bool], kind: str) -> list[dict]:
    """Every record of the files `pattern` in `work`, each checked by `is_record`: a damaged line is a
    `UsageError` naming it; a last line cut short mid-write (no line break: a run killed as it wrote) is dropped,
    with a word, and its run is done again (`drop_cut_line` mends the file before this process appends to it)."""
    rows = []
    for path in sorted(work.glob(pattern)):
        lines = path.read_bytes().split(b"\n")
        cut = lines.pop()  # b"" after a whole last line
        for number, line in enumerate(lines, start=1):
            if line.strip():
                rows.append(_record(path, number, line, is_record, kind))
        if cut.strip():
            _say_cut(path)
    return rows


def _say_cut(path: Path) -> None:
    print(f"{visible(path)}: its last line was cut short (a run killed as it wrote it): dropped, that run is done "
          "again", flush=True)  # fmt: skip


def _record(path: Path, number: int, line: bytes, is_record: Callable[[Any], bool], kind: str) -> dict:
    try:
        row = json.loads(line)
    except ValueError:  # not JSON (nor UTF-8)
        row = None
    if not is_record(row):
        raise UsageError(
            f"{visible(path)} line {number} is not a {kind}",
            hint="the file is damaged: restore it, or remove that line (its run is then trained again)",
        )
    return row


def drop_cut_line(path: Path) -> None:
    """Cut `path` back to its last whole line (see `_lines`), so that the next line appended starts a line."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        _say_cut(path)
        with path.open("r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)


def add_test_curves(work: Path, shard: tuple[int, int], all_designs, data, test_set, fid) -> None:
    """`--test-curves`: each finished run of this shard whose curve lacks test figures, trained again to its
    last-but-one epoch (`test_curve`); it must repeat the line's validation figures exactly (the same code,
    seed and data: the same model), else the script stops, naming the run."""
    from archdsl.search.space import layout_text

    index, count = shard
    arch_of = {digest: arch for digest, _, arch in all_designs}
    rows = with_test_curves(finished(work), work)
    mine = [rows[key] for key in sorted(rows)][index::count]  # a fixed share of all runs, whatever is done already
    todo = [
        row for row in mine if any(p.get("test_acc") is None for p in row["run"]["curve"]) and row["digest"] in arch_of
    ]
    print(f"{len(todo)} runs to complete with test figures in this shard", flush=True)
    for n, row in enumerate(todo):
        started, run = time.perf_counter(), row["run"]
        arch, epochs = arch_of[row["digest"]], len(run["curve"]) - 1
        curve = test_curve(arch, data, test_set, fid, run["seed"], epochs)
        for again, recorded in zip(curve, run["curve"], strict=False):
            if (again["val_acc"], again["val_nll"]) != (recorded["val_acc"], recorded["val_nll"]):
                sys.exit(
                    f"seed {run['seed']} of {layout_text(arch)} does not repeat: epoch {again['epoch']} gave val "
                    f"{again['val_acc']}/{again['val_nll']}, its line {recorded['val_acc']}/{recorded['val_nll']}"
                )
        points = [{"epoch": p["epoch"], "test_acc": p["test_acc"], "test_nll": p["test_nll"]} for p in curve]
        with (work / f"test-curves-{index}.jsonl").open("a") as f:
            f.write(json.dumps({"digest": row["digest"], "seed": run["seed"], "curve": points}) + "\n")
        shown = ", ".join(f"epoch {p['epoch']} test {p['test_acc']:.4f}" for p in points)
        print(f"[{n + 1}/{len(todo)}] seed {run['seed']} {layout_text(arch)}: {shown} "
              f"({time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip


def assemble(args: argparse.Namespace, space, all_designs) -> Table:
    """The table of the finished runs in --work; a run whose line the table cannot read is a `UsageError`."""
    from pydantic import ValidationError

    from archdsl.search.fidelity.measures import static_costs
    from archdsl.search.seed_stats import seed_statistics
    from archdsl.search.space import layout_text

    done = with_test_curves(finished(Path(args.work)), Path(args.work))
    meta = next(iter(done.values()))["meta"] if done else {}
    rows = []
    for digest, params, arch in all_designs:
        runs = sorted((row["run"] for (d, _), row in done.items() if d == digest), key=lambda r: r["seed"])
        costs = static_costs(arch)
        rows.append(
            {
                "digest": digest,
                "layout": layout_text(arch),
                "n_msa": arch.n_msa,
                "params": params,
                "n_params": int(costs["params"]),
                "flops": costs["flops"],
                "runs": runs,
            }
        )
    try:
        table = _table(args, space, meta, rows)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UsageError(
            f"the runs in --work '{visible(args.work)}' do not make a table: {where}: {first['msg']}",
            hint="a line written by another version of this script? move it aside and train its run again",
        ) from None
    return table.model_copy(update={"statistics": seed_statistics(table.designs)})


def _table(args: argparse.Namespace, space, meta: dict, rows: list[dict]) -> Table:
    from archdsl.lang.printer import format_arch
    from archdsl.search.fidelity.replay import TABLE_SCHEMA, Table

    return Table.model_validate(
        {
            "schema": TABLE_SCHEMA,
            "description": (
                f"Every design of {args.base}'s {' x '.join(space.searched)} build-up space on {args.dataset}, trained "
                f"once per paired seed at {args.fidelity_words} by benchmarks/buildup_table.py: validation "
                "top-1/NLL after every epoch (what a search chooses on), test top-1/NLL after every epoch "
                "(for reporting only; runs made before they were recorded per epoch completed by --test-curves)"
            ),
            "command": meta.get("command", ""),
            "versions": meta.get("versions", {}),
            "machine": meta.get("machine", ""),
            "dataset": args.dataset,
            "base": format_arch(space.base),
            "searched": list(space.searched),
            "fidelity": meta.get("fidelity", {}),
            "seeds": sorted({r["seed"] for d in rows for r in d["runs"]}),
            "designs": rows,
        }
    )


def markdown(table: Table) -> str:
    """The table as docs/results-search.md shows it: each design's means +- standard deviations over the seeds."""
    import numpy as np

    def cell(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
        v = np.array(values) * scale
        return f"{v.mean():.{digits}f} +- {v.std(ddof=1):.{digits}f}" if len(v) > 1 else f"{v.mean():.{digits}f}"

    lines = [
        "| design | heads | params | val top-1 % | test top-1 % | val NLL | robustness % | train CPU s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = sorted((d for d in table.designs if d.runs), key=lambda d: -np.mean([r.val_acc for r in d.runs]))
    for d in rows:
        runs = d.runs
        heads = ",".join(str(v) for k, v in d.params.items() if k.startswith("heads") and d.params[f"k{k[5:]}"])
        lines.append(
            f"| `{d.layout}` | {heads or '-'} | {d.n_params:,} "
            f"| {cell([r.val_acc for r in runs], 100)} | {cell([r.test_acc for r in runs], 100)} "
            f"| {cell([r.val_nll or 0.0 for r in runs], digits=3)} "
            f"| {cell([r.robustness or 0.0 for r in runs], 100)} "
            f"| {cell([r.train_cpu_seconds or r.train_seconds for r in runs], digits=0)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """The script: 0, or a user's mistake in one line and its exit status (a bad flag or --work: 2)."""
    try:
        args = parse_args(argv)
        run(args)
    except UserError as err:
        print(visible_lines(f"archdsl: error: {err}"), file=sys.stderr)
        return err.exit_code
    return 0


def run(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    searched = args.searched
    space = the_space(searched, args.dataset, args.base)
    all_designs = designs(space)
    work = Path(args.work)
    if args.assemble:
        table = assemble(args, space, all_designs)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(table.model_dump_json(by_alias=True, indent=1) + "\n")
        n_runs = sum(len(d.runs) for d in table.designs)
        print(f"{out}: {len(table.designs)} designs, {n_runs} runs")
        print(table.statistics.model_dump_json(indent=1) if table.statistics else "no statistics (too few runs)")
        if args.markdown:
            Path(args.markdown).write_text(markdown(table))
        return

    from archdsl.search.fidelity import measures as measure

    index, count = args.shard
    named = named_designs(Path(args.designs), all_designs) if args.designs else None  # before any file is made
    work.mkdir(parents=True, exist_ok=True)
    drop_cut_line(work / f"runs-{index}.jsonl")  # this shard's file, which it appends to
    drop_cut_line(work / f"test-curves-{index}.jsonl")
    done = finished(work)
    # Design-major over a fixed shuffle of the designs: a table cut short holds whole designs (every seed,
    # so its seed statistics can be computed) spread over the space rather than the grid's first corner.
    import random

    first = set()
    if args.first:
        first = {digest for digest, _, _ in designs(the_space(tuple(args.first.split(",")), args.dataset, args.base))}
    shuffled = sorted(random.Random(0).sample(all_designs, len(all_designs)), key=lambda d: d[0] not in first)
    if named is not None:
        shuffled = named
    if args.seed_major:
        todo = [(seed, d) for seed in args.seeds for d in shuffled][index::count]
    else:
        todo = [(seed, d) for d in shuffled for seed in args.seeds][index::count]
    todo = [(seed, d) for seed, d in todo if (d[0], seed) not in done]
    if args.only_within is not None:
        near = near_the_best(done, args.only_within)
        todo = [(seed, d) for seed, d in todo if near(d[0])]
    fid = fidelity(args)
    meta = {
        "command": shlex.join(["python", "benchmarks/buildup_table.py", *args.argv]),
        "versions": versions(),
        "machine": machine(),
        "fidelity": {
            **fid.model_dump(exclude={"train_settings"}),
            "train_settings": dict(fid.train_settings),
            # measures.load_data: trials train on the training split less the validation images and are scored
            # on those; the test split is read after every epoch, for the table's test values
            "scored_on": "the validation images held out of the training split (archdsl.data.split_validation's "
            "default, shrunk to val_subset; robustness: their corrupted copies); test_acc/test_nll: the whole "
            "test split",
            "threads": args.threads,
        },
    }
    data = measure.load_data(
        args.dataset, Path(args.data_root), seed=0, val_subset=fid.val_subset, val_split=fid.val_split
    )
    from archdsl.data import load_split

    test_set = load_split(args.dataset, "test", Path(args.data_root))
    whole_validation = None
    if args.val_curve is not None:  # the curve on a part of the validation images, the last epoch on all
        import dataclasses

        whole_validation = data.validation
        part = whole_validation.subset(min(1.0, args.val_curve / len(whole_validation)), seed=0)
        data = dataclasses.replace(data, validation=part)
        meta["fidelity"]["scored_on"] += (
            f"; the curve's val_acc/val_nll on a class-stratified {len(part)} of the {len(whole_validation)} "
            "validation images, the last epoch's (and the run's) on all of them (--val-curve)"
        )
    if args.test_curves:
        add_test_curves(work, (index, count), all_designs, data, test_set, fid)
        return
    print(f"{len(all_designs)} designs, {len(todo)} runs to do in this shard", flush=True)
    for n, (seed, (digest, params, arch)) in enumerate(todo[: args.limit]):
        started = time.perf_counter()
        run = run_one(
            arch, data, test_set, fid, seed, accuracy_only=args.accuracy_only, test_once=args.test_once,
            whole_validation=whole_validation,
        )  # fmt: skip
        row = {"digest": digest, "params": params, "run": run, "meta": meta}
        with (work / f"runs-{index}.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")
        from archdsl.search.space import layout_text

        analyses = "" if args.accuracy_only else (
            f" rob {run['robustness']:.4f} nep {run['nep']:.3f} ape {run['ape']:.1f}"
        )  # fmt: skip
        print(
            f"[{n + 1}/{len(todo)}] seed {seed} {layout_text(arch)} {params}: "
            f"val {run['val_acc']:.4f} test {run['test_acc']:.4f}{analyses} "
            f"({time.perf_counter() - started:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
