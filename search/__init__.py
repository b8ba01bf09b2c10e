"""Search where the MSAs go (imported as `archdsl.search`).

- `space`: the build-up space of a base network (k MSAs per stage, heads, windows);
- `objectives`: what can be optimised, with its direction and cost;
- `strategies`: Optuna samplers and the paper's build-up walk;
- `trial`: one trial, measured in stages, deduplicated by design digest;
- `objective`: the one place that calls training, analysis and data;
- `storage`: journal file or RDB (PostgreSQL) storage, heartbeats, retries;
- `runner`: a whole search on one worker; `report`: what a study found;
- `distributed`: a torchrun group as one worker (rank 0 samples, every rank trains).
"""

# Kept here (not in `strategies`) so that the CLI can list them without importing Optuna.
STRATEGIES = ("buildup", "tpe", "nsga2", "grid", "random")
