"""`--strategy tpe`, `nsga2`, `grid` and `random`: Optuna's samplers (and, for random, one uniform over the distinct
designs) as `Strategy`s, each trial's random draws seeded by (seed, trial number) (`samplers.PerTrialSeed`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archdsl.search.walk.strategy import PlanView, Strategy

if TYPE_CHECKING:
    import optuna


GRID_LIMIT = 4096  # a grid larger than this is a mistake, not a search


class TPE(Strategy):
    name = "tpe"
    help = "Optuna's TPESampler (multivariate)"

    def sampler(self, plan: PlanView) -> optuna.samplers.BaseSampler:
        import optuna

        from archdsl.search.walk.samplers import PerTrialSeed

        # multivariate: the k's of different stages interact (a budget of MSAs).
        return PerTrialSeed(
            lambda s: optuna.samplers.TPESampler(seed=s, multivariate=True, n_startup_trials=4), plan.settings.seed
        )


class NSGAII(Strategy):
    name = "nsga2"
    help = "Optuna's NSGAIISampler, for several objectives"

    def sampler(self, plan: PlanView) -> optuna.samplers.BaseSampler:
        import optuna

        from archdsl.search.walk.samplers import PerTrialSeed

        size = max(4, min(16, plan.space.size()))
        return PerTrialSeed(lambda s: optuna.samplers.NSGAIISampler(seed=s, population_size=size), plan.settings.seed)


class Grid(Strategy):
    name = "grid"
    help = f"Optuna's GridSampler over every point (refused above {GRID_LIMIT:,} points)"

    def sampler(self, plan: PlanView) -> optuna.samplers.BaseSampler:
        """Not per trial: GridSampler's shuffle of the grid must be the same on every worker (a trial stores only
        its grid index), and it hands trial n the n-th grid point."""
        from archdsl.errors import UsageError
        from archdsl.search.walk.samplers import NonStoppingGridSampler

        space = plan.space
        if space.size() > GRID_LIMIT:
            raise UsageError(
                f"the grid has {space.size()} points (more than {GRID_LIMIT})",
                hint="search fewer knobs (--search k), or use --strategy tpe",
            )
        return NonStoppingGridSampler({n: list(v) for n, v in space.choices().items()}, seed=plan.settings.seed)


class Random(Strategy):
    name = "random"
    help = "uniform over the distinct designs (not over the parameters, which favours designs without MSAs)"

    def sampler(self, plan: PlanView) -> optuna.samplers.BaseSampler:
        from archdsl.search.walk.samplers import PerTrialSeed, UniformDesignSampler

        return PerTrialSeed(lambda s: UniformDesignSampler(plan.space, s), plan.settings.seed)
