"""A study's settings besides its fidelity (`SearchSettings`, each field `archdsl search`'s flag) and what they
resolve to (the default base, the pruner `auto` runs). The command line that runs a study again, spelled from the
same fields' flags, is the plan's (`plan.reproduce_command`): it reads what the plan worked out from them.

Light at import (pydantic): the command line lists STRATEGIES and PRUNERS, and builds its flags from
these fields, without importing Optuna.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import (
    AfterValidator,
    ConfigDict,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    field_validator,
)

from archdsl.common_settings import (
    MAX_SEEDS,
    MAX_WAIT_S,
    DataSettings,
    DeviceSettings,
    DistSettings,
    ProgressSettings,
    flag_field,
)
from archdsl.data.cards import DEFAULT_DATASET
from archdsl.outputs import RUNS_DIR
from archdsl.search.objectives import OBJECTIVES
from archdsl.search.walk.keep_rules import DEFAULT_KEEP, DEFAULT_KNOBS, KEEPS, KNOBS, Keep, Knobs
from archdsl.search.walk.registry import REGISTRY, STRATEGIES, strategy_named
from archdsl.search.walk.strategy import PRUNERS

if TYPE_CHECKING:
    from archdsl.data import DatasetInfo

# The bounds of the study's own sizes (--help states each; the fidelity's are measures.Fidelity's).
MAX_TRIALS = 100_000
MAX_TIMEOUT_S = 30 * 86_400.0  # a month

SMALL_BASE = "alter-small-base"  # the default base on the built-in data, and on CIFAR without an accelerator
GREY_BASE = "resnet-fmnist"  # the default base on 28x28 grey images (Fashion-MNIST, MNIST)
PAPER_BASE = "alter50-base"  # the default base on CIFAR with a GPU: the paper's Alter-ResNet-50 (hours per
# candidate on a CPU)


# The --help sections of `archdsl search` (commands/search.py lays them out in this order).
DATA, CHOICE, FIDELITY, STORE = "data and base", "strategy and objectives", "fidelity", "storage and output"
FIDELITY_HINT = "train, or table:PATH (table:NAME for a built-in)"  # what --fidelity takes


def check_fidelity_source(value: str) -> str:
    """`train` or `table:...` (the table itself is checked when it loads); a ValueError otherwise."""
    from archdsl.search.fidelity.replay import is_replay

    if value != "train" and not is_replay(value):
        raise ValueError(f"unknown --fidelity {value!r}; give {FIDELITY_HINT}")
    return value


class SearchSettings(DataSettings, DeviceSettings, ProgressSettings, DistSettings):
    """A study besides its fidelity (`archdsl.search.fidelity.measures.Fidelity`): the data and base, the strategy and
    objectives, the storage and output (and the settings shared with other commands: where the data
    lives, the device, progress bars, the torchrun timeout). Each field is `archdsl search`'s flag."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dataset: str = flag_field(
        "--dataset", "dataset name", group=DATA, metavar="NAME", default_text=f"{DEFAULT_DATASET}, built in",
        default=DEFAULT_DATASET,
    )  # fmt: skip
    base: str | None = flag_field(
        "--base", "base network, a spec path or built-in name", group=DATA, metavar="SPEC",
        default_text=f"one that fits the data and the machine: {SMALL_BASE} on built-in data, {GREY_BASE} on 28x28 "
        f"grey sets, {PAPER_BASE} on CIFAR with a GPU, {SMALL_BASE} on CIFAR without one; fitted to the data's input "
        "shape and classes (default_base)",
        default=None,
    )  # fmt: skip
    search: str = flag_field(
        "--search", "what to search, comma-separated from k,heads,window,dim_head,init", group=DATA, metavar="KNOBS",
        default="k", comma_list=True,
    )  # fmt: skip
    strategy: str = flag_field(
        "--strategy", "how the designs are chosen (random: uniform over the distinct designs)", group=CHOICE,
        default_text="buildup, the paper's rule",
        default="buildup", choices=STRATEGIES,
    )  # fmt: skip
    pruner: str = flag_field(
        "--pruner",
        "stop poor candidates early on their per-epoch validation accuracy (accuracy-only studies): median, "
        "successive halving, Hyperband, or none",
        group=CHOICE,
        default_text="auto, which is none for buildup (its verdicts read every seed at the end of training) and "
        "hyperband for the samplers (median below 3 epochs, where Hyperband is successive halving), as the replayed "
        "efficiency study found best: docs/results-search.md",
        default="auto", choices=("auto", *PRUNERS),
    )  # fmt: skip
    fidelity_source: Annotated[str, AfterValidator(check_fidelity_source)] = flag_field(
        "--fidelity",
        "train each candidate, or answer it from a fully measured table (a path, or a built-in: "
        "table:fashion-mnist-k) in seconds, with simulated time (docs/replay.md)",
        group=FIDELITY, metavar="train|table:TABLE", default="train", dest="fidelity_source",
    )  # fmt: skip
    objectives: str = flag_field(
        "--objectives", f"comma-separated from {', '.join(OBJECTIVES)}; several give a Pareto front",
        group=CHOICE, metavar="LIST", default="accuracy", comma_list=True,
    )  # fmt: skip
    n_trials: PositiveInt = flag_field(
        "--n-trials", "distinct designs the study should measure, a total over all workers and runs",
        group=CHOICE, metavar="N", default=8, le=MAX_TRIALS,
    )  # fmt: skip
    timeout: PositiveFloat | None = flag_field(
        "--timeout",
        "stop starting trials after this many seconds",
        group=CHOICE,
        metavar="SECONDS",
        default=None,
        le=MAX_TIMEOUT_S,
    )
    seed_endpoints: bool = flag_field(
        "--seed-endpoints", "measure the ResNet, AlterNet and Swin-like ends of the space first",
        group=CHOICE, default=False,
    )  # fmt: skip
    max_params: PositiveFloat | None = flag_field(
        "--max-params", "skip designs with more parameters (before training)", group=CHOICE, metavar="N", default=None
    )
    max_flops: PositiveFloat | None = flag_field(
        "--max-flops", "skip designs with more FLOPs per image", group=CHOICE, metavar="N", default=None
    )
    seed: int = flag_field("--seed", "sampler and training seed", group=CHOICE, metavar="N", default=0)
    max_seeds: PositiveInt | None = flag_field(
        "--max-seeds", "racing: where the build-up walk's paired test cannot tell a candidate from the incumbent, "
        "measure both on one more seed, up to this many (and the samplers re-measure their leading designs up to it)",
        group=CHOICE, metavar="M", default_text="--seeds (no racing)", default=None, le=MAX_SEEDS,
    )  # fmt: skip
    keep: Keep | None = flag_field(
        "--keep", "how the build-up walk keeps an MSA: where its mean over the paired seeds is higher (mean: the "
        "paper's own rule), or where the paired seeds' one-sided t-test calls it better (beyond-noise); a seed on "
        "which a design fails to learn is replaced by a fresh one either way",
        group=CHOICE, default_text=f"{DEFAULT_KEEP}, for --strategy buildup", default=None, choices=KEEPS,
    )  # fmt: skip
    knobs: Knobs | None = flag_field(
        "--knobs", "where --search takes heads, window or dim_head beside k, what the build-up walk gives a new MSA: "
        "the base's (base), or, when a stage takes its first MSA, each searched knob's best value on the paired "
        "seeds' mean (choose; one design per other value, at the verdict's budget)",
        group=CHOICE, default_text=f"{DEFAULT_KNOBS}, for --strategy buildup", default=None, choices=KNOBS,
    )  # fmt: skip
    study_name: str | None = flag_field(
        "--study-name", "the study's name", group=STORE, metavar="NAME",
        default_text="BASE-DATASET-STRATEGY, and -replay after it for --fidelity table:...", default=None,
    )  # fmt: skip
    storage: str | None = flag_field(
        "--storage", "sqlite:///PATH, postgresql://USER:PASS@HOST/DB, journal:PATH, or grpc://HOST:PORT (a proxy "
        "started by `archdsl study serve`)", group=STORE, metavar="URL",
        default_text="the journal file OUT/STUDY/study.journal", default=None,
    )  # fmt: skip
    heartbeat: PositiveInt = flag_field(
        "--heartbeat", "worker heartbeat interval", group=STORE, metavar="SECONDS", default=30, le=int(MAX_WAIT_S)
    )
    grace_period: PositiveInt | None = flag_field(
        "--grace-period", "a worker silent this long is dead; its trial is failed and retried",
        group=STORE, metavar="SECONDS", default_text="3 x heartbeat", default=None, le=int(MAX_WAIT_S),
    )  # fmt: skip
    max_retry: NonNegativeInt = flag_field(
        "--max-retry", "retries of a trial whose worker died", group=STORE, metavar="N", default=2, le=100
    )
    out: str = flag_field("--out", "runs folder", group=STORE, metavar="DIR", default=RUNS_DIR)

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, value: str) -> str:
        if value not in REGISTRY:
            raise ValueError(f"unknown strategy {value!r}; choose from {', '.join(REGISTRY)}")
        return value

    @field_validator("pruner")
    @classmethod
    def _known_pruner(cls, value: str) -> str:
        if value != "auto" and value not in PRUNERS:
            raise ValueError(f"unknown pruner {value!r}; choose from auto, {', '.join(PRUNERS)}")
        return value

    def chosen_pruner(self, epochs: int, raised: bool = False) -> str:
        """The pruner the study runs with at a fidelity of `epochs` (`raised`: on a ladder of budgets): `auto`
        resolved by the strategy, the epochs and the ladder (`default_pruner`)."""
        return chosen_pruner(self.pruner, self.strategy, epochs, raised)


def default_base(info: DatasetInfo, accelerator: bool) -> tuple[str, str]:
    """The base a search takes when none is given, and why: one that trains a candidate in
    minutes on the data and the machine at hand (the paper's base only on CIFAR with a GPU)."""
    if info.generated:
        return SMALL_BASE, "default on built-in data"
    if info.image_shape == (1, 28, 28):
        return GREY_BASE, "default for 28x28 grey images"
    if accelerator:
        return PAPER_BASE, "default with a GPU: the paper's Alter-ResNet-50"
    return SMALL_BASE, f"default without a GPU; --base {PAPER_BASE} for the paper's, hours per candidate on a CPU"


# `--pruner auto`, from the replayed efficiency study (docs/results-search.md, "Is the search worth running?"):
# chosen on the earlier fashion-mnist-k-init table (6 epochs), where Hyperband saved 48% of a TPE or random
# search's simulated time at the unpruned regret and the median pruner 27% of the build-up walk's. On
# today's fashion-mnist-k table (the default fidelity) the pruners end at the unpruned regret too, saving
# 21-33% (median, halving, Hyperband) of TPE's and random search's time with one seed, 26-47% with two, and
# 0-1% of the walk's; on the 32-design k x heads table 53-54% of a sampler's for 0.17-0.33 points of regret.
AUTO_PRUNER = "auto"


def default_pruner(strategy: str, epochs: int, raised: bool = False) -> str:
    """The pruner `--pruner auto` takes for `strategy` at a fidelity of `epochs`: the strategy's
    (`walk.strategy.Strategy.auto_pruner`: none for the build-up walk, Hyperband for the samplers from 3 epochs,
    median below)."""
    return strategy_named(strategy).auto_pruner(epochs, raised)


def chosen_pruner(kind: str, strategy: str, epochs: int, raised: bool = False) -> str:
    """The pruner a study runs with: `kind`, or `default_pruner(strategy, epochs, raised)` for `auto`."""
    return default_pruner(strategy, epochs, raised) if kind == AUTO_PRUNER else kind


def flag_number(value: float) -> str:
    """A number as a flag takes it back exactly: `323000`, `0.4`, `1e-05`."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))
