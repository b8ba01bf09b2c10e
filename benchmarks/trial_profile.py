"""Where one search trial's time goes: wall and CPU seconds per part, for the ResNet and an AlterNet.

A trial is measured as `archdsl search` measures it, through the search's own functions
(`archdsl.search.fidelity.measures`: the IR's costs, `train_candidate` at the search's fidelity, then the
analysis measures), at the search's defaults on Fashion-MNIST (as docs/tutorials.md's example; found in
/usr/share/datasets/fashion-mnist or --data-root): recipe `fast`, 2 epochs on a class-stratified
tenth of the training set (6,000 images), scored on a tenth of the test set (1,000), the model
through `optimize_model`, a checkpoint written after every epoch. The designs are those of
`resnet-fmnist`'s space: the ResNet (k0_0_0) and an MSA ending every stage (k1_1_1); --designs
takes others (k1_0_0: one MSA, in c1).

Training is split by wrapping what an epoch calls (`archdsl.run.train`, `archdsl.run.epoch_metrics`), without
changing it:
- data: the loader's batches (shuffle, crop, flip, collation; `next()` on the loader);
- forward, optimizer: the model's forward and `optimizer.step()` inside each `train_step`;
- backward: the rest of `train_step` (loss, zero_grad, backward);
- evaluation: `predict_logits` on the test subset after every epoch;
- setup and the rest: `train()`'s remaining time (building, optimize_model, checkpoints, the loop).
Then each analysis measure a search can ask for (`--objectives`): latency, robustness (its
corrupted sets are generated once per worker, shown apart), Hessian NEP/APE. The default search
(`--objectives accuracy`) runs the IR's costs and the training only.

Wall seconds are time.perf_counter's, CPU seconds the process's (all threads). The closing ratio is
the default trial's wall time over its training steps' (forward + backward + optimizer). Print the
load average too: on a shared machine the absolute numbers move with it, the shares much less.

    python benchmarks/trial_profile.py                      # fashion-mnist, both designs, a few minutes
    python benchmarks/trial_profile.py --quick              # synthetic data, 1 epoch, small subsets (smoke)
    python benchmarks/trial_profile.py --no-measures        # the default trial only
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from archdsl import markdown
from archdsl.buildup import layout
from archdsl.data.cards import OTHER
from archdsl.lang.spec import load_spec
from archdsl.nn.summary import ensure_fits
from archdsl.run import epoch_metrics as metrics_module
from archdsl.run import train as training_module
from archdsl.search.fidelity import measures
from archdsl.search.fidelity.measures import Fidelity

BASE = "resnet-fmnist"
TRAINING_PARTS = ("data", "forward", "backward", "optimizer", "evaluation", "setup and the rest")
STEP_PARTS = ("forward", "backward", "optimizer")


@dataclass
class Clock:
    """Wall and CPU seconds accumulated per named part."""

    wall: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    count: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, wall: float, cpu: float) -> None:
        self.wall[name] = self.wall.get(name, 0.0) + wall
        self.cpu[name] = self.cpu.get(name, 0.0) + cpu
        self.count[name] = self.count.get(name, 0) + 1

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - wall, time.process_time() - cpu)


class TimedBatches:
    """An iterable of the loader's batches that times each `next()` as `data`."""

    def __init__(self, batches: Iterable[Any], clock: Clock) -> None:
        self.batches, self.clock = batches, clock

    def __iter__(self) -> Iterator[Any]:
        iterator = iter(self.batches)
        while True:
            with self.clock.timed("data"):
                try:
                    batch = next(iterator)
                except StopIteration:
                    return
            yield batch

    def __len__(self) -> int:
        return len(self.batches)  # type: ignore[arg-type]


@contextlib.contextmanager
def instrumented_training(clock: Clock) -> Iterator[None]:
    """While open, an epoch's loader, train_step and predict_logits are timed into `clock`."""
    modules = {"make_loader": training_module, "train_step": training_module, "predict_logits": metrics_module}
    originals = {name: getattr(module, name) for name, module in modules.items()}

    def make_loader(*args: Any, **kwargs: Any) -> TimedBatches:
        return TimedBatches(originals["make_loader"](*args, **kwargs), clock)

    def train_step(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, optimizer, *rest, **kw):
        marks: dict[str, tuple[float, float]] = {}

        def start(name: str) -> Callable[..., None]:
            return lambda *_: marks.__setitem__(name, (time.perf_counter(), time.process_time()))

        def stop(name: str) -> Callable[..., None]:
            def record(*_: Any) -> None:
                wall, cpu = marks.pop(name)
                clock.add(name, time.perf_counter() - wall, time.process_time() - cpu)

            return record

        handles = [
            model.register_forward_pre_hook(start("forward")),
            model.register_forward_hook(stop("forward")),
            optimizer.register_step_pre_hook(start("optimizer")),
            optimizer.register_step_post_hook(stop("optimizer")),
        ]
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return originals["train_step"](model, images, labels, optimizer, *rest, **kw)
        finally:
            clock.add("step", time.perf_counter() - wall, time.process_time() - cpu)
            for handle in handles:
                handle.remove()

    def predict_logits(*args: Any, **kwargs: Any) -> torch.Tensor:
        with clock.timed("evaluation"):
            return originals["predict_logits"](*args, **kwargs)

    replacements = {"make_loader": make_loader, "train_step": train_step, "predict_logits": predict_logits}
    for name, replacement in replacements.items():
        setattr(modules[name], name, replacement)
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(modules[name], name, original)


@dataclass
class TrialProfile:
    """One design's trial: the training's parts, the whole default trial, and each measure."""

    design: str
    train: Clock
    trial: Clock  # "default trial" (IR costs + training) and each measure
    steps: int


def profile_trial(
    ks: tuple[int, ...], data: measures.DataContext, fidelity: Fidelity, *, seed: int, with_measures: bool, work: Path
) -> TrialProfile:
    arch = measures.fit_to_data(layout(load_spec(BASE), ks), data.train_set.image_shape, data.train_set.num_classes)
    name = "k" + "_".join(map(str, ks))
    train, trial = Clock(), Clock()
    with trial.timed("default trial"):
        measures.static_costs(arch)
        ensure_fits(arch)
        with train.timed("training"), instrumented_training(train):
            trained = measures.train_candidate(
                arch, data, fidelity, device="cpu", seed=seed, run_dir=work / name, on_epoch=lambda *_: None,
                progress=False,
            )  # fmt: skip
    step_wall, step_cpu = train.wall.pop("step"), train.cpu.pop("step")
    train.add("backward", step_wall - train.wall["forward"] - train.wall["optimizer"],
              step_cpu - train.cpu["forward"] - train.cpu["optimizer"])  # fmt: skip
    parts_wall = sum(train.wall[p] for p in TRAINING_PARTS[:-1])
    parts_cpu = sum(train.cpu[p] for p in TRAINING_PARTS[:-1])
    train.add("setup and the rest", train.wall["training"] - parts_wall, train.cpu["training"] - parts_cpu)
    if with_measures:
        with trial.timed("latency"):
            measures.latency_ms(arch, data, fidelity, "cpu", seed)
        with trial.timed("corrupted sets (once per worker)"):
            measures._corrupted_sets(data, fidelity)
        with trial.timed("robustness"):
            measures.robustness(trained.model, data, fidelity, seed=seed, device="cpu")
        with trial.timed("hessian (NEP, APE)"):
            measures.hessian(trained.model, data, fidelity, seed=seed, device="cpu")
    return TrialProfile(design=name, train=train, trial=trial, steps=train.count["forward"])


def table(profiles: list[TrialProfile]) -> str:
    """A markdown table: one row per part, wall s / CPU s / share of the trial per design."""
    header = ["part", *(name for p in profiles for name in (f"{p.design} wall s", "CPU s", "share"))]
    rows: list[list[str]] = []

    def row(label: str, cells: list[tuple[float, float, float | None]]) -> None:
        rows.append(
            [label, *(t for w, c, s in cells for t in (f"{w:.2f}", f"{c:.2f}", "" if s is None else f"{s:.0%}"))]
        )

    for part in TRAINING_PARTS:
        row(part, [(p.train.wall[part], p.train.cpu[part], p.train.wall[part] / p.trial.wall["default trial"])
                   for p in profiles])  # fmt: skip
    row("**default trial** (IR costs + training)", [(p.trial.wall["default trial"], p.trial.cpu["default trial"], 1.0)
                                                    for p in profiles])  # fmt: skip
    for part in [k for k in profiles[0].trial.wall if k != "default trial"]:
        row(part, [(p.trial.wall[part], p.trial.cpu[part], None) for p in profiles])
    return "\n".join(markdown.table(header, rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="fashion-mnist")
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--designs", nargs="+", default=["0,0,0", "1,1,1"], help="MSAs per stage of resnet-fmnist")
    parser.add_argument("--epochs", type=int, default=Fidelity().epochs)
    parser.add_argument("--subset", type=float, default=OTHER.search.subset, help="training and test subset")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-measures", action="store_true", help="the default trial only (no analysis measures)")
    parser.add_argument("--quick", action="store_true", help="synthetic data, 1 epoch, subset 0.06, 1 Hessian batch")
    args = parser.parse_args()
    fidelity_fields: dict[str, Any] = {"epochs": args.epochs, "subset": args.subset, "val_subset": args.subset}
    if args.quick:
        args.dataset = "synthetic:train=2900,test=500"  # 2,610 to train after the validation tenth: 2 steps
        fidelity_fields.update(epochs=1, subset=0.1, val_subset=0.1, hessian_batches=1, hessian_max_iter=5)
    if args.threads:
        torch.set_num_threads(args.threads)
    fidelity = Fidelity(**fidelity_fields)
    data = measures.load_data(args.dataset, args.data_root, seed=args.seed, val_subset=fidelity.val_subset)
    load = os.getloadavg()
    print(
        f"{args.dataset}: {fidelity.epochs} epochs on {fidelity.subset:g} of {len(data.train_set)} training images, "
        f"{len(data.validation)} validation images, recipe {fidelity.recipe}; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, {os.cpu_count()} cores; "
        f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
    )
    profiles = []
    with tempfile.TemporaryDirectory() as work:
        # A worker's first trial also pays the imports and the first calls of each kernel: one short
        # trial of the first design first, not in the table.
        start = time.perf_counter()
        small = min(fidelity.subset, 256 / len(data.train_set))  # two batches of 128
        warm_up = fidelity.model_copy(update={"epochs": 1, "subset": small})
        ks = tuple(int(k) for k in args.designs[0].split(","))
        profile_trial(ks, data, warm_up, seed=args.seed, with_measures=False, work=Path(work) / "warm-up")
        print(f"warm-up trial (1 epoch on {warm_up.subset:g}, not in the table): {time.perf_counter() - start:.1f} s")
        for text in args.designs:
            ks = tuple(int(k) for k in text.split(","))
            profiles.append(
                profile_trial(ks, data, fidelity, seed=args.seed, with_measures=not args.no_measures, work=Path(work))
            )
    print(table(profiles))
    for p in profiles:
        steps = sum(p.train.wall[part] for part in STEP_PARTS)
        print(
            f"{p.design}: default trial {p.trial.wall['default trial']:.1f} s wall, training steps {steps:.1f} s "
            f"({p.steps} steps): {p.trial.wall['default trial'] / steps:.2f}x"
        )
    load = os.getloadavg()
    print(f"load average after: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")


if __name__ == "__main__":
    main()
