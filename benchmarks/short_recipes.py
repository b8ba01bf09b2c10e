"""Which recipe ranks designs best in a search's short runs: validation top-1 after a few epochs
with `fast`, `weak` and `deit` (docs/results.md quotes the table).

Each recipe trains each spec with every seed at the search's default fidelity (synthetic data,
the validation tenth held out, subset 0.4 of the rest and of the validation images, 2 epochs,
the recipe's batch and learning rate), through the same `archdsl.search.fidelity.measures.train_candidate`
a search trial calls, and is scored, as a trial is, on the validation images.

    python benchmarks/short_recipes.py                              # tiny + alter-small-base, seeds 0 1
    python benchmarks/short_recipes.py --specs tiny --seeds 0 --epochs 3
"""

from __future__ import annotations

import argparse
import statistics
import time

from archdsl.lang.spec import load_spec
from archdsl.run.recipe import RECIPES
from archdsl.search.fidelity import measures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--specs", nargs="+", default=["tiny", "alter-small-base"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--epochs", type=int, default=measures.Fidelity().epochs)
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--subset", type=float, default=0.4)
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=RECIPES)
    args = parser.parse_args()

    print(f"{args.dataset}, subset {args.subset:g}, {args.epochs} epochs; validation top-1 % per seed")
    print(f"{'spec':<18}{'recipe':<8}{'per seed':<24}{'mean':>7}{'s/run':>8}")
    for spec in args.specs:
        for recipe in args.recipes:
            accuracies, seconds = [], []
            for seed in args.seeds:
                data = measures.load_data(args.dataset, None, seed=seed, val_subset=args.subset)
                arch = measures.fit_to_data(load_spec(spec), data.train_set.image_shape, data.train_set.num_classes)
                fidelity = measures.Fidelity(epochs=args.epochs, subset=args.subset, recipe=recipe)
                start = time.perf_counter()
                trained = measures.train_candidate(
                    arch, data, fidelity, device="cpu", seed=seed, run_dir=None, on_epoch=lambda *_: None,
                    progress=False,
                )  # fmt: skip
                seconds.append(time.perf_counter() - start)
                accuracies.append(100 * trained.accuracy)
            shown = " ".join(f"{a:5.1f}" for a in accuracies)
            print(f"{spec:<18}{recipe:<8}{shown:<24}{statistics.mean(accuracies):7.1f}{statistics.mean(seconds):8.0f}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
