"""What the final test adds to the main job: one paired seed's training at `archdsl search`'s default fidelity
against scoring the trained model once on the test split (the figure each completed trial seals for the final
test; `archdsl.search.fidelity.measures.test_accuracy`), as a ratio. The final test itself opens the seals and trains
nothing, so this ratio is its whole share of the search's time.

    python benchmarks/final_test_share.py            # the main job's dataset, one MSA ending c3
    python benchmarks/final_test_share.py --dataset synthetic
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=None, help="the dataset (default: the search's)")
    parser.add_argument("--repeats", type=int, default=3, help="test passes timed (the fastest is reported)")
    args = parser.parse_args()

    import torch

    from archdsl.data import describe
    from archdsl.search.fidelity import measures
    from archdsl.search.planning import fidelity_for
    from archdsl.search.settings import SMALL_BASE, SearchSettings
    from archdsl.search.space import make_space

    settings = SearchSettings(**({"dataset": args.dataset} if args.dataset else {}))
    fidelity = fidelity_for(settings, {"seeds": 1})
    info = describe(settings.dataset)
    base = measures.fit_to_data(measures.load_base(SMALL_BASE), info.image_shape, info.num_classes)
    arch = make_space(base).arch_from_params({"k_c1": 0, "k_c2": 0, "k_c3": 1})
    data = measures.load_data(
        settings.dataset, None, seed=0, val_subset=fidelity.val_subset, val_split=fidelity.val_split
    )
    start = time.perf_counter()
    trained = measures.train_candidate(
        arch, data, fidelity, device="cpu", seed=0, run_dir=None, on_epoch=lambda epoch, value: None, progress=False
    )
    train_s = time.perf_counter() - start
    test_s = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        measures.test_accuracy(trained.model, data, fidelity, device="cpu")
        test_s.append(time.perf_counter() - start)
    assert data.test is not None
    print(
        f"{settings.dataset}, {torch.get_num_threads()} threads: training {train_s:.2f} s, test pass "
        f"{min(test_s):.3f} s ({len(data.test):,} images): the final test adds {min(test_s) / train_s:.2%} "
        "of each trained seed's time"
    )


if __name__ == "__main__":
    main()
