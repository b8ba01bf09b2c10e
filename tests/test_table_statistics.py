"""A search table's seed statistics (`archdsl.search.seed_stats`): what they say on a table
made from a known rule, and that the shipped table's stored statistics are its runs' own."""

from __future__ import annotations

import statistics

import _replay_support as support
import pytest

from archdsl.search.fidelity.replay import builtin_tables, load_replay
from archdsl.search.seed_stats import seed_statistics


def test_statistics_of_a_table_with_a_known_seed_shift():
    # Seed s adds 0.01 * s to every design: each design's seed std is 0.01 and every seed ranks alike.
    table = support.make_table(support.the_space(), noise=0.01)
    stats = seed_statistics(table.designs)
    assert stats is not None and stats.designs_with_every_seed == len(table.designs)
    assert stats.seed_std == pytest.approx(0.01) and stats.seed_std_max == pytest.approx(0.01)
    means = [support.quality(d.params) + 0.01 for d in table.designs]  # the mean over seeds 0, 1, 2
    assert stats.seed_std_ratio == pytest.approx(0.01 / statistics.stdev(means))
    assert min(stats.spearman_between_seeds) > 0.99 and len(stats.spearman_between_seeds) == 3
    assert stats.val_test_spearman == pytest.approx(1.0) and stats.best_on_val_test_regret == 0


def test_too_few_seeds_give_no_statistics():
    assert seed_statistics(support.make_table(support.the_space(), seeds=(0,)).designs) is None


@pytest.mark.parametrize("name", builtin_tables())
def test_a_shipped_tables_statistics_are_its_runs_own(name):
    table = load_replay(f"table:{name}").table
    assert table.statistics is not None
    assert seed_statistics(table.designs) == table.statistics
