"""A torchrun group as one search worker: rank 0 samples and reports, every rank trains the design.

Rank 0 alone talks to the study; when a trial comes to training it sends the design's canonical text, the budget
it trains at (epochs, subset) and whether it scores every epoch to the other ranks (`measures.train_candidate`),
which build and train it so (`follow_leader`); their digests are kept on the trial (`rank_digests`).
docs/storage.md, "Distributed candidates", shows how to start one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from archdsl.run import distributed
from archdsl.search.fidelity import measures as measure

_STOP = None  # the message that ends the followers' loop


def follow_leader(data: measure.DataContext, fidelity: measure.Fidelity, *, device: str, seed: int) -> list[str]:
    """Ranks after the first: train each design rank 0 sends, until it says stop; their digests."""
    from archdsl.lang.spec import parse_spec

    trained = []
    while (message := distributed.from_leader(_STOP)) is not _STOP:
        sent = json.loads(message)
        arch = parse_spec(sent["spec"])
        budget = fidelity.model_copy(update={"epochs": sent["epochs"], "subset": sent["subset"]})
        # A divergence is the group's (the losses are summed over the ranks): rank 0 records it.
        with suppress(measure.Diverged):
            measure.train_candidate(
                arch, data, budget, device=device, seed=seed, run_dir=None, on_epoch=_ignore, progress=False,
                curve=sent["curve"],
            )  # fmt: skip
        trained.append(arch.digest())
    return trained


@contextmanager
def leading(ranks: distributed.Ranks | None) -> Iterator[None]:
    """Rank 0's search: when it ends, the other ranks are told to stop. (When it fails, they are not:
    torchrun stops them as rank 0 exits, or they fail after the group's timeout.)"""
    yield
    if ranks is not None and ranks.leader:
        distributed.from_leader(_STOP)


def _ignore(epoch: int, accuracy: float) -> None:
    """A follower's `on_epoch`: rank 0 reports and decides on pruning for the group."""
