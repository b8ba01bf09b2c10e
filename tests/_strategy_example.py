"""`--strategy brute`: every point of the space once, in a random order (Optuna's BruteForceSampler)."""

from archdsl.search.walk.strategy import Strategy


class BruteForce(Strategy):
    name = "brute"
    help = "Optuna's BruteForceSampler: every point of the space once, in a random order"

    def sampler(self, plan):
        import optuna  # when the study starts: the registry lists the names without importing Optuna

        return optuna.samplers.BruteForceSampler(seed=plan.settings.seed)
