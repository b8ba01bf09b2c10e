"""The search space: where the MSAs go in a base network, under the build-up rule.

A design is one number per stage, k_s in 0..max_msa(stage), placed as the paper places them (`archdsl.buildup.layout`),
and optionally each stage's heads, window and head width, and the design's `init`. Every choice set is fixed and valid
(the samplers, the grid above all, need that); rule 3 ("more heads in late stages") is kept by a deterministic repair,
so several parameter sets can name one design, which the search knows by `Arch.digest()` (docs/search.md, "The
space"). Parameters are named after the stages: `k_c3`, `heads_c3`, `window_c3`, `dim_head_c3`; and `init`.
"""

from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass, field
from typing import Any

from archdsl.buildup import Window
from archdsl.errors import UsageError, UserError
from archdsl.ir import INIT_SCHEMES, Arch, MSABlock, stage_shapes

GLOBAL = "global"
SEARCHABLE = ("k", "heads", "window", "dim_head", "init")
INIT = "init"  # the parameter of the init scheme
STAGE_KNOBS = ("heads", "window", "dim_head")  # searched per stage with room for an MSA, beside k
DIM_HEAD_CHOICES = (32, 64)

ParamValue = int | str


@dataclass(frozen=True)
class StageChoices:
    """The fixed choice sets of one stage; a single-element set means "not searched"."""

    name: str
    max_k: int
    heads: tuple[int, ...]
    windows: tuple[ParamValue, ...]  # ints that tile the map, or GLOBAL
    dim_heads: tuple[int, ...]
    default_heads: int
    default_window: ParamValue
    default_dim_head: int

    def options(self, knob: str) -> tuple[ParamValue, ...]:
        """The choice set of `knob` (k or one of STAGE_KNOBS) in this stage."""
        return {
            "k": tuple(range(self.max_k + 1)),
            "heads": self.heads,
            "window": self.windows,
            "dim_head": self.dim_heads,
        }[knob]

    def default(self, knob: str) -> ParamValue:
        """The value of `knob` (one of STAGE_KNOBS) where it is not searched, or no MSA holds it."""
        return {"heads": self.default_heads, "window": self.default_window, "dim_head": self.default_dim_head}[knob]


@dataclass(frozen=True)
class Endpoint:
    """A named corner of the space (the ResNet, the AlterNet, the Swin-like) and its parameters."""

    name: str  # "resnet", "alternet", "swin-like"
    params: dict[str, ParamValue] = field(hash=False)


@dataclass(frozen=True)
class Space:
    """The build-up space of a base design: per stage, the MSA count k and (optionally) heads, window and dim_head."""

    base: Arch
    stages: tuple[StageChoices, ...]
    searched: tuple[str, ...] = ("k",)

    # -- the Optuna side -------------------------------------------------------------
    def choices(self) -> dict[str, tuple[ParamValue, ...]]:
        """Every parameter and its choice set, in a fixed order (also the grid)."""
        out = {name: stage.options(knob) for name, knob, stage in self._stage_parameters()}
        if INIT in self.searched:
            out[INIT] = INIT_SCHEMES
        return out

    def _stage_parameters(self) -> list[tuple[str, str, StageChoices]]:
        """(parameter, knob, stage) for each per-stage parameter, in the space's fixed order: stage
        by stage, k and then the searched STAGE_KNOBS; a stage no MSA fits has none."""
        knobs = ("k", *(knob for knob in STAGE_KNOBS if knob in self.searched))
        return [(f"{knob}_{s.name}", knob, s) for s in self.stages if s.max_k > 0 for knob in knobs]

    def suggest(self, trial: Any) -> dict[str, ParamValue]:
        """Draw one point through an Optuna trial (every parameter, always: a static space)."""
        params: dict[str, ParamValue] = {}
        for name, values in self.choices().items():
            if name.startswith("k_"):
                params[name] = trial.suggest_int(name, 0, values[-1])
            else:
                params[name] = trial.suggest_categorical(name, list(values))
        return params

    def size(self) -> int:
        """Number of parameter combinations (the grid's size); distinct designs may be fewer."""
        return math.prod(len(v) for v in self.choices().values())

    def n_designs(self) -> int:
        """Number of distinct designs: parameter sets that differ only in a stage without MSAs,
        or in heads the repair lifts to the same value, name one design.

        Counted stage by stage with the running heads of the repair as the only state (a
        design is its per-stage rows of `stage_values`, and different rows give different IRs).
        """
        return self._designs_from(0, 0) * (len(INIT_SCHEMES) if INIT in self.searched else 1)

    def _designs_from(self, index: int, running_heads: int) -> int:
        """The distinct designs of stages `index`.. after stages with MSAs whose heads reached `running_heads`."""
        return _count_designs(self.stages, index, running_heads)

    def _rows(self, index: int, running_heads: int) -> list[tuple[int, int, int, ParamValue, int]]:
        """Stage `index`'s distinct rows after `running_heads`, each with the designs of the later stages it leads
        to: (designs, k, heads after the repair, window, dim_head); k = 0 is one row (nothing else matters there)."""
        s = self.stages[index]
        rows = [(self._designs_from(index + 1, running_heads), 0, running_heads, s.default_window, s.default_dim_head)]
        if s.max_k > 0:
            for heads in sorted({max(h, running_heads) for h in s.heads}):
                after = self._designs_from(index + 1, heads)
                rows += [(after, k, heads, w, d) for k in range(1, s.max_k + 1) for w in s.windows for d in s.dim_heads]
        return rows

    def random_params(self, rng: random.Random) -> dict[str, ParamValue]:
        """A uniformly random point of the space (uniform over the parameters: a design that many points name,
        as the ResNet whose windows do not matter, is drawn that many times more often than one point names)."""
        return {name: rng.choice(values) for name, values in self.choices().items()}

    def random_design(self, rng: random.Random) -> dict[str, ParamValue]:
        """The parameters of a design drawn uniformly over the distinct designs (`n_designs`: the designs are told
        apart as `Arch.digest()` tells them), stage by stage: each of a stage's rows weighed by the designs of the
        later stages it leads to. A parameter that does not change the design (a stage's window where it holds no
        MSA) takes its default, or its first choice."""
        params: dict[str, ParamValue] = {}
        choices = self.choices()
        running_heads = 0
        for index, s in enumerate(self.stages):
            rows = self._rows(index, running_heads)
            _, k, heads, window, dim_head = rng.choices(rows, weights=[r[0] for r in rows])[0]
            if k > 0:
                running_heads = heads
            values = {"k": k, "heads": heads, "window": window, "dim_head": dim_head}
            for name in (f"{knob}_{s.name}" for knob in ("k", *STAGE_KNOBS)):
                if name in choices:
                    knob = name.rsplit("_", 1)[0]
                    params[name] = _a_choice(values[knob], choices[name], k > 0 or knob == "k")
        if INIT in choices:
            params[INIT] = rng.choice(choices[INIT])
        return params

    # -- params <-> IR -----------------------------------------------------------------
    def stage_values(self, params: dict[str, ParamValue]) -> list[tuple[int, int, ParamValue, int]]:
        """Per stage: (k, heads, window, dim_head) after defaults and the heads repair."""
        rows = []
        running_heads = 0
        for s in self.stages:
            k = int(params.get(f"k_{s.name}", 0))
            if not 0 <= k <= s.max_k:
                raise UserError(f"k_{s.name}={k} is outside 0..{s.max_k}")
            heads = int(params.get(f"heads_{s.name}", s.default_heads))
            if k > 0:
                # Rule 3: heads never decrease from stage to stage (among stages with MSAs).
                heads = max(heads, running_heads)
                running_heads = heads
            window = params.get(f"window_{s.name}", s.default_window)
            dim_head = int(params.get(f"dim_head_{s.name}", s.default_dim_head))
            rows.append((k, heads, window, dim_head))
        return rows

    def arch_from_params(self, params: dict[str, ParamValue]) -> Arch:
        unknown = set(params) - set(self.choices())
        if unknown:
            raise UserError(f"parameter {sorted(unknown)[0]!r} is not in this search space")
        rows = self.stage_values(params)
        ks = [r[0] for r in rows]
        heads = [r[1] for r in rows]
        windows: list[Window] = ["global" if r[2] == GLOBAL else int(r[2]) for r in rows]
        arch = _layout(self.base, ks, heads, windows)
        arch = _with_dim_heads(arch, {s.name: r[3] for s, r in zip(self.stages, rows, strict=True)})
        init = params.get(INIT, self.base.init)
        if init not in INIT_SCHEMES:
            raise UserError(f"init={init!r} is not one of {', '.join(INIT_SCHEMES)}")
        arch = arch.model_copy(update={"init": init})
        from archdsl.lang.checks import ensure_valid

        ensure_valid(arch)
        return arch

    def params_from_arch(self, arch: Arch) -> dict[str, ParamValue]:
        """The canonical parameters of a design of this space (raises if it is not in it)."""
        msas: dict[str, list[MSABlock]] = {
            st.name: [b for b in st.blocks if isinstance(b, MSABlock)] for st in arch.stages
        }
        for s in self.stages:
            if s.name not in msas:
                raise UserError(f"design {arch.name!r} has no stage {s.name!r}: it is not in this search space")
        params: dict[str, ParamValue] = {}
        for name, knob, s in self._stage_parameters():
            found = msas[s.name]
            if knob == "k":
                params[name] = len(found)
            else:  # the first MSA's: the space gives all of a stage's the same (the digest check below tells)
                params[name] = _knob_of(found[0], knob) if found else s.default(knob)
        if INIT in self.searched:
            params[INIT] = arch.init
        choices = self.choices()
        bad = [n for n, v in params.items() if v not in choices[n]]
        if bad or self.arch_from_params(params).digest() != arch.digest():
            raise UserError(f"design {arch.name!r} is not in this search space (built-up from {self.base.name!r})")
        return params

    # -- landmarks -----------------------------------------------------------------------
    def endpoints(self) -> list[Endpoint]:
        """ResNet (no MSA), the paper's AlterNet (when the space holds it), Swin-like (all max)."""
        ks_max = {s.name: s.max_k for s in self.stages}
        out = [Endpoint("resnet", self._k_params({n: 0 for n in ks_max}))]
        if len(self.stages) == len(PAPER_K) and all(k <= s.max_k for k, s in zip(PAPER_K, self.stages, strict=True)):
            out.append(
                Endpoint("alternet", self._k_params({s.name: k for s, k in zip(self.stages, PAPER_K, strict=True)}))
            )
        out.append(Endpoint("swin-like", self._k_params(ks_max)))
        # Distinct designs only (a tiny base can make "alternet" equal "swin-like").
        unique: dict[str, Endpoint] = {}
        for e in out:
            unique.setdefault(self.arch_from_params(e.params).digest(), e)
        return list(unique.values())

    def _k_params(self, ks: dict[str, int]) -> dict[str, ParamValue]:
        params = {name: ks[s.name] if knob == "k" else s.default(knob) for name, knob, s in self._stage_parameters()}
        if INIT in self.searched:
            params[INIT] = self.base.init
        return params


@functools.cache
def _count_designs(stages: tuple[StageChoices, ...], index: int, running_heads: int) -> int:
    """`Space.n_designs`'s count from stage `index` on (cached: a stage's count depends on the later ones only)."""
    if index == len(stages):
        return 1
    s = stages[index]
    total = _count_designs(stages, index + 1, running_heads)  # k = 0: heads, window and dim_head do not matter
    if s.max_k > 0:
        lifted = {max(h, running_heads) for h in s.heads}
        per_heads = s.max_k * len(s.windows) * len(s.dim_heads)
        total += per_heads * sum(_count_designs(stages, index + 1, h) for h in lifted)
    return total


def _a_choice(value: ParamValue, options: tuple[ParamValue, ...], matters: bool) -> ParamValue:
    """`value` as one of `options`: itself where it is one; else, for heads the repair lifted (`matters`), the
    choices it lifts (any names the design; the first), or where it does not matter the first choice."""
    if value in options:
        return value
    if matters and isinstance(value, int):
        return next(o for o in options if isinstance(o, int) and o <= value)
    return options[0]


def _knob_of(block: MSABlock, knob: str) -> ParamValue:
    """The value of `knob` (one of STAGE_KNOBS) that an MSA block of a design has."""
    if knob == "window":
        return GLOBAL if block.window is None else block.window
    return block.heads if knob == "heads" else block.dim_head


# The paper's Alter-ResNet-50 layout (Sec. 4.1): one MSA in c2 and c3, two in c4.
PAPER_K = (0, 1, 1, 2)


# The letters of a layout: a conv block and an MSA (the search's bases hold nothing else).
LAYOUT_LETTERS = {"conv": "C", "msa": "M"}


def layout_text(arch: Arch) -> str:
    """Where a design's MSAs are, stage by stage: `c1:CC c2:CM c3:CCCM` (C: conv block, M: MSA)."""
    return " ".join(
        f"{stage.name}:" + "".join(LAYOUT_LETTERS.get(b.kind, b.kind[0].upper()) for b in stage.blocks)
        for stage in arch.stages
    )


def msa_per_stage(layout: str) -> dict[str, int]:
    """`"c1:CC c2:CM"` -> `{"c1": 0, "c2": 1}`: the MSAs of each stage of a `layout_text`."""
    stages = (part.partition(":") for part in layout.split())
    return {name: blocks.count(LAYOUT_LETTERS["msa"]) for name, _, blocks in stages}


def parse_searched(text: str) -> tuple[str, ...]:
    """The knobs of `--search` (comma-separated from k, heads, window, dim_head, init); a UsageError for others."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in SEARCHABLE]
    if unknown:
        raise UsageError(f"cannot search {unknown[0]!r}", hint=f"choose from {', '.join(SEARCHABLE)}")
    if "k" not in names:
        names = ("k",) + names  # where the MSAs go is always searched
    return names


def make_space(base: Arch, searched: tuple[str, ...] = ("k",)) -> Space:
    """The build-up space of `base`, with the defaults that `layout` gives each stage."""
    from archdsl.buildup import max_msa

    maxes = [max_msa(s) for s in base.stages]
    # The most-MSA design carries layout's default heads/window/dim_head for every stage.
    full = _layout(base, maxes, None, None)
    sizes = {sh.name: sh.out_size for sh in stage_shapes(full)}
    stages = []
    for stage, full_stage, max_k in zip(base.stages, full.stages, maxes, strict=True):
        msa = next((b for b in full_stage.blocks if isinstance(b, MSABlock)), None)
        d_heads = msa.heads if msa else 1
        d_window: ParamValue = (GLOBAL if msa.window is None else msa.window) if msa else GLOBAL
        d_dim = msa.dim_head if msa else 64
        heads = tuple(sorted({h for h in (d_heads // 2, d_heads, d_heads * 2) if h >= 1}))
        windows = _tiling_windows(sizes[stage.name])
        if isinstance(d_window, int) and d_window >= max(sizes[stage.name]):
            # The layout's window holds the whole map: global attention under the layout's name (which the
            # shipped tables' designs carry), offered once, not again as `global`.
            windows = (*windows[:-1], d_window)
        elif d_window not in windows:
            windows = tuple(sorted(set(windows) - {GLOBAL}) + [d_window] + [GLOBAL] * (d_window != GLOBAL))
        stages.append(
            StageChoices(
                name=stage.name,
                max_k=max_k,
                heads=heads if "heads" in searched else (d_heads,),
                windows=windows if "window" in searched else (d_window,),
                dim_heads=tuple(sorted(set(DIM_HEAD_CHOICES) | {d_dim})) if "dim_head" in searched else (d_dim,),
                default_heads=d_heads,
                default_window=d_window,
                default_dim_head=d_dim,
            )
        )
    return Space(base=base, stages=tuple(stages), searched=searched)


def _tiling_windows(size: tuple[int, int]) -> tuple[ParamValue, ...]:
    """Window sizes that tile an (h, w) map exactly (at least 2, smaller than the map), then global."""
    h, w = size
    local = [d for d in range(2, min(h, w)) if h % d == 0 and w % d == 0]
    return tuple(local) + (GLOBAL,)


def _with_dim_heads(arch: Arch, dim_heads: dict[str, int]) -> Arch:
    stages = []
    for stage in arch.stages:
        blocks = tuple(
            b.model_copy(update={"dim_head": dim_heads[stage.name]}) if isinstance(b, MSABlock) else b
            for b in stage.blocks
        )
        stages.append(stage.model_copy(update={"blocks": blocks}))
    return arch.model_copy(update={"stages": tuple(stages)})


def _layout(base: Arch, ks: list[int], heads: list[int] | None, windows: list[Window] | None) -> Arch:
    """The one call into `archdsl.buildup.layout` (per-stage sequences in stage order; a window
    is an int or "global", None leaves layout's default)."""
    from archdsl.buildup import layout

    return layout(base, ks, heads=heads, window=windows)
