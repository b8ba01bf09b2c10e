"""A small search table for the replay tests, made from the space itself (not copied from a real table).

Every design of `resnet-fmnist`'s k x init space on Fashion-MNIST gets runs whose values follow
a known rule (`quality`), so that a test can work out what a search must find from the same rule:
an MSA at the end of c3 or c2 helps, one in c1 hurts, and the `timm` init helps a little. Each
seed adds `noise * seed` to every accuracy; the curve rises towards the final accuracy. The
test top-1 is the validation one plus `test_gain(params)` (none unless a test says otherwise).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

from archdsl.search.fidelity.replay import TABLE_SCHEMA, CurvePoint, Table, TableDesign, TableRun

DATASET = "fashion-mnist"
BASE = "resnet-fmnist"
SEARCHED = ("k", "init")
EPOCHS = 4
SEEDS = (0, 1, 2)
# What one more MSA in a stage, or an init scheme, adds to the accuracy.
STAGE_GAIN = {"c1": -0.02, "c2": 0.01, "c3": 0.03}
INIT_GAIN = {"timm": 0.004}


def the_space(searched: tuple[str, ...] = SEARCHED):
    from archdsl.data import describe
    from archdsl.search.fidelity.measures import fit_to_data, load_base
    from archdsl.search.space import make_space

    info = describe(DATASET)
    return make_space(fit_to_data(load_base(BASE), info.image_shape, info.num_classes), searched)


def quality(params: dict) -> float:
    """The final accuracy of a design (seed 0) under the fixture's rule."""
    value = 0.80 + sum(gain * int(params.get(f"k_{stage}", 0)) for stage, gain in STAGE_GAIN.items())
    return value + INIT_GAIN.get(str(params.get("init")), 0.0)


def make_table(
    space,
    *,
    noise: float = 0.0,
    seeds=SEEDS,
    epochs: int = EPOCHS,
    dataset: str = DATASET,
    test_gain: Callable[[dict], float] = lambda params: 0.0,
) -> Table:
    from archdsl.lang.printer import format_arch
    from archdsl.search.fidelity.measures import static_costs
    from archdsl.search.space import layout_text

    choices = space.choices()
    designs: dict[str, TableDesign] = {}
    for values in itertools.product(*choices.values()):
        params = dict(zip(choices, values, strict=True))
        arch = space.arch_from_params(params)
        if arch.digest() in designs:
            continue
        costs = static_costs(arch)
        runs = []
        for seed in seeds:
            final = quality(params) + noise * seed
            test = final + test_gain(params)
            # Epoch e: the final accuracy less a gap that halves every epoch (the ranking holds at every epoch).
            gaps = [0.2 * 0.5 ** (e - 1) * (e < epochs) for e in range(1, epochs + 1)]
            curve = [
                CurvePoint(epoch=e, val_acc=final - gap, test_acc=test - gap, seconds=10.0 + arch.n_msa)
                for e, gap in enumerate(gaps, start=1)
            ]
            runs.append(
                TableRun(
                    seed=seed,
                    val_acc=final,
                    val_nll=1 - final,
                    test_acc=test,
                    test_nll=1 - test,
                    robustness=final - 0.1 - 0.01 * arch.n_msa,
                    nep=0.1,
                    ape=10.0,
                    latency=1.0 + arch.n_msa,
                    curve=curve,
                    train_seconds=sum(p.seconds for p in curve) + 2.0,
                    measure_seconds=5.0,
                )
            )
        designs[arch.digest()] = TableDesign(
            digest=arch.digest(),
            layout=layout_text(arch),
            n_msa=arch.n_msa,
            params=params,
            n_params=int(costs["params"]),
            flops=costs["flops"],
            runs=runs,
        )
    return Table(
        schema_=TABLE_SCHEMA,
        dataset=dataset,
        base=format_arch(space.base),
        searched=list(space.searched),
        seeds=list(seeds),
        designs=list(designs.values()),
    )


def write_table(path: Path, table: Table) -> Path:
    path.write_text(table.model_dump_json(by_alias=True, indent=1))
    return path
