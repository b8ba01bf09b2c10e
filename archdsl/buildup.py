"""The AlterNet build-up rule as IR transforms: ResNet <-> AlterNet <-> Swin-like.

Placement (the paper's Sec. 4.1; docs/reference.md): a stage of n blocks with k MSAs reads `C * (n - 2k)` then
`[C M] * k` -- MSAs sit at the *end* of the stage, each after a conv. Since the stage's
first block is then always a conv, an MSA never has to downsample, and k <= n // 2.

Order of the build-up (`buildup_order`), one MSA at a time:
  1. fill the last stage to its maximum first (rule 1: replace convs from the end);
  2. then one more MSA per earlier stage, walking from the latest stage to the earliest
     (rule 2: "replace a conv at the end of an earlier stage instead");
  3. repeat step 2's sweep, skipping full stages, until every stage is full.
For the 50-layer base (3, 4, 6, 4), max k = (1, 2, 3, 2): the order is c4 c4 c3 c2 c1 c3 c2
c3, so 4 MSAs give k = (0, 1, 1, 2), the paper's Alter-ResNet-50, with the curve's steps
"+1 c4, +1 c4, +1 c3, +1 c2" on the way; all 8 give the Swin-like endpoint. Successive n nest.

Heads follow rule 3 ("more heads in late stages"): `max(1, 3 * width // 64)`, i.e.
3/6/12/24 for widths 64/128/256/512. The window defaults to 4 where a 4x4 window tiles the
stage's map and to global attention otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from archdsl.errors import UserError
from archdsl.ir import AnyBlock, Arch, ConvBlock, ExtBlock, MSABlock, Stage, stage_shapes

__all__ = [
    "DEFAULT_WINDOW",
    "PerStage",
    "Window",
    "buildup",
    "buildup_order",
    "default_heads",
    "ensure_alternet_base",
    "layout",
    "max_msa",
    "msa_counts",
    "ratio",
]

Window = int | Literal["global"] | None  # None: the default (4 where it tiles, else global)
PerStage = int | Sequence[int] | None

DEFAULT_WINDOW = 4


def ensure_alternet_base(base: Arch) -> None:
    """The build-up rule replaces conv blocks by AlterNet MSAs: it needs a base of `conv` and `msa` blocks
    (or of registered kinds that read feature maps, `archdsl.kinds`, which stand where a `conv` would).

    A transformer (`attn`, `mlp`, `merge`, `pool`) or a `smooth` block has no place in
    `C*(n-2k) [C M]*k`, so such bases are refused rather than rewritten into something else.
    """
    other = sorted({b.kind for stage in base.stages for b in stage.blocks if not _conv_like(b)} - {"msa"})
    if other:
        found = ", ".join(f"`{kind}`" for kind in other)
        raise UserError(
            f"the build-up rule applies to AlterNet bases of `conv` and `msa` blocks; {base.name} has {found}",
            hint="start from a conv base such as alter50-base or resnet18; transformer specs are edited by hand",
        )


def _conv_like(block: AnyBlock) -> bool:
    """A block that the build-up keeps in a conv's place: a `conv`, or a registered kind on feature maps."""
    return isinstance(block, ConvBlock) or (isinstance(block, ExtBlock) and block.layout == "map")


def max_msa(stage: Stage) -> int:
    """How many MSAs the placement pattern allows in this stage: n // 2."""
    return len(stage.blocks) // 2


def default_heads(width: int) -> int:
    """Rule 3: 3 heads per 64 channels of stage width, at least one."""
    return max(1, 3 * width // 64)


def _per_stage(value: object, n_stages: int, what: str) -> list[Any]:
    if value is None or isinstance(value, (int, str)):
        return [value] * n_stages
    values: list[Any] = list(value)  # type: ignore[call-overload]
    if len(values) != n_stages:
        raise UserError(
            f"{what} has {len(values)} values but the arch has {n_stages} stages",
            hint=f"give one {what} per stage, or a single value for all",
        )
    return values


def _window_for(window: Window, map_size: tuple[int, int]) -> int | None:
    if window == "global":
        return None
    if window is None:
        fits = all(side % DEFAULT_WINDOW == 0 for side in map_size)
        return DEFAULT_WINDOW if fits else None
    if not isinstance(window, int) or window < 1:
        raise UserError(f"bad window {window!r}", hint="a positive integer or `global`")
    return window


def layout(
    base: Arch,
    k_per_stage: Sequence[int],
    heads: PerStage = None,
    window: Window | Sequence[Window] = None,
    *,
    name: str | None = None,
) -> Arch:
    """Place k MSAs at the end of each stage of `base` (`C*(n-2k) [C M]*k`).

    The base's MSAs (if any) are replaced: k is the whole count per stage, not an addition.
    Conv blocks keep the base's block at each position (or the arch's plain `conv` where
    the base had an MSA). Raises `UserError` for a k out of range, `SpecError` if the result
    is invalid (e.g. an explicit window that does not tile a map).
    """
    from archdsl.lang.checks import ensure_valid

    ensure_alternet_base(base)
    ks = [int(k) for k in k_per_stage]
    if len(ks) != len(base.stages):
        raise UserError(
            f"layout has {len(ks)} values but {base.name} has {len(base.stages)} stages",
            hint=f"give one MSA count per stage ({', '.join(s.name for s in base.stages)})",
        )
    head_list = _per_stage(heads, len(ks), "heads")
    window_list = _per_stage(window, len(ks), "window")
    stages = []
    for stage, shape, k, h, w in zip(base.stages, stage_shapes(base), ks, head_list, window_list, strict=True):
        limit = max_msa(stage)
        if not 0 <= k <= limit:
            raise UserError(
                f"stage {stage.name} has {len(stage.blocks)} blocks: it takes 0 to {limit} MSAs, not {k}",
                hint="MSAs go at the end of a stage, each after a conv: C*(n-2k) [C M]*k",
            )
        if h is not None and (not isinstance(h, int) or h < 1):
            raise UserError(f"bad heads {h!r} for stage {stage.name}", hint="a positive integer")
        msa = MSABlock(heads=h or default_heads(stage.width), window=_window_for(w, shape.out_size))
        n = len(stage.blocks)
        blocks = []
        for i, old in enumerate(stage.blocks):
            is_msa = i >= n - 2 * k and (i - (n - 2 * k)) % 2 == 1
            blocks.append(msa if is_msa else old if _conv_like(old) else base.conv)
        stages.append(stage.model_copy(update={"blocks": tuple(blocks)}))
    suffix = "-k" + "_".join(map(str, ks))
    return ensure_valid(base.model_copy(update={"stages": tuple(stages), "name": name or base.name + suffix}))


def msa_counts(arch: Arch) -> tuple[int, ...]:
    """MSAs per stage."""
    return tuple(sum(isinstance(b, MSABlock) for b in stage.blocks) for stage in arch.stages)


def buildup_order(base: Arch) -> list[str]:
    """Stage names in the order the build-up adds MSAs (see the module docstring)."""
    ensure_alternet_base(base)
    remaining = [max_msa(stage) for stage in base.stages]
    order: list[str] = []
    if not remaining:
        return order
    last = len(remaining) - 1
    order += [base.stages[last].name] * remaining[last]
    remaining[last] = 0
    while any(remaining):
        for i in range(last - 1, -1, -1):
            if remaining[i]:
                order.append(base.stages[i].name)
                remaining[i] -= 1
    return order


def _counts_after(base: Arch, n_msa: int) -> list[int]:
    order = buildup_order(base)
    if not 0 <= n_msa <= len(order):
        raise UserError(
            f"{base.name} takes 0 to {len(order)} MSAs under the build-up rule, not {n_msa}",
            hint="each stage of n blocks takes at most n // 2 MSAs",
        )
    index = {stage.name: i for i, stage in enumerate(base.stages)}
    counts = [0] * len(base.stages)
    for stage_name in order[:n_msa]:
        counts[index[stage_name]] += 1
    return counts


def buildup(
    base: Arch, n_msa: int, heads: PerStage = None, window: Window | Sequence[Window] = None, *, name: str | None = None
) -> Arch:
    """The design after adding `n_msa` MSAs to `base` in build-up order."""
    counts = _counts_after(base, n_msa)
    return layout(base, counts, heads, window, name=name or f"{base.name}-msa{n_msa}")


def ratio(
    base: Arch, r: float, heads: PerStage = None, window: Window | Sequence[Window] = None, *, name: str | None = None
) -> Arch:
    """Between the base (r=0) and the Swin-like endpoint (r=1, every stage at its maximum).

    r picks round(r * max) MSAs in build-up order, so ratios nest like the build-up does.
    """
    if not 0.0 <= r <= 1.0:
        raise UserError(
            f"ratio must be between 0 and 1, not {r}", hint="0 is the base (no MSA), 1 the Swin-like endpoint"
        )
    total = len(buildup_order(base))
    n = round(r * total)
    return buildup(base, n, heads, window, name=name or f"{base.name}-r{round(r * 100)}")
