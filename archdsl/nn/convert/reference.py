"""The reference implementation's layout: its ResNets (pre- and post-activation) and AlterNets.

The reference is github.com/xxxnell/how-do-vits-work (branch `transformer`). Its training
code saves `{"name": ..., "state_dict": ...}` as `.pth.tar`; the state dict's names come from
its modules (see docs/import.md for the table):

- stem: `layer0.0` (models/preresnet.py, models/resnet.py) or `layer0.layer0.0` (models/alternet.py,
  whose `StemB` holds its own `layer0`); a stem with BN (models/resnet.py, `StemA`) has it at
  `layer0.1` / `layer0.layer0.1`;
- stage k (1-based) is `layer<k>`, its blocks `layer<k>.<i>`;
- a pre-activation conv block (models/preresnet_dnn_block.py) is `shortcut.0` (the projection,
  listed first), `bn` + `conv1`, then `conv<n>.0` (BN) + `conv<n>.2` (conv) for n >= 2;
- a post-activation conv block (models/resnet_dnn_block.py) is `shortcut.0` (conv) + `shortcut.1`
  (BN), then `conv<n>.0` (conv) + `conv<n>.1` (BN) for n >= 1;
- an MSA block (`AttentionBlockB`, models/alternet.py) is `shortcut.0`, `norm1`, `conv`, `norm2`,
  `attn.attn.to_q`, `attn.attn.to_kv`, `attn.attn.to_out.0` (models/attentions.py) and
  `attn.pos_embedding`, a (2w-1) x (2w-1) table indexed by (row offset, column offset) of key
  minus query, where archdsl keeps the same table flattened row-major;
- the head (models/classifier_block.py) is `classifier.0.bn` + `classifier.0.dense` (`BNGAPBlock`,
  the pre-activation nets) or `classifier.0.dense` alone (`GAPBlock`, the post-activation ResNets).

The layers compute the same functions in the same order (pre- or post-activation as the spec's
`conv` says, the pre-activation projection shortcut reading the activated input, tokens in
row-major window order, heads split `(h d)`, k before v in `to_kv`, scale dim_head^-0.5), so the
conversion is renaming plus the table's reshape.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import torch

from archdsl.errors import UserError
from archdsl.ir import Arch, ConvBlock, MSABlock, block_shapes
from archdsl.nn.convert import SourceFormat, StateDict
from archdsl.nn.weights import Shape, compare_weights, expected_shapes

PREACT_STEM = "layer0.0.weight"  # models/preresnet.py, models/resnet.py
ALTERNET_STEM = "layer0.layer0.0.weight"  # models/alternet.py (StemB inside AlterNet.layer0)
_STEM_PREFIXES = ("layer0.", "layer0.layer0.")  # the ResNets', the AlterNet's
_STEM_PARTS = {"stem.weight": "0.weight", "stem.conv.": "0.", "stem.norm.": "1."}  # conv, BN (stem norm=true)
_HEAD = {"head.norm.": "classifier.0.bn.", "head.fc.": "classifier.0.dense."}
_MSA_PARTS = {
    "attn.q.": "attn.attn.to_q.",
    "attn.kv.": "attn.attn.to_kv.",
    "attn.proj.": "attn.attn.to_out.0.",
    "attn.rel_pos_bias": "attn.pos_embedding",
    "shortcut.": "shortcut.0.",
}
_TABLE = "attn.rel_pos_bias"


def _conv_part(rest: str) -> str:
    """A pre-activation conv block's archdsl name -> the reference's (models/preresnet_dnn_block.py)."""
    if rest.startswith("shortcut."):
        return "shortcut.0." + rest[len("shortcut.") :]
    if rest.startswith("norm1."):
        return "bn." + rest[len("norm1.") :]
    if rest.startswith("conv1."):
        return rest
    found = re.fullmatch(r"(norm|conv)(\d+)\.(.+)", rest)
    if found is None:
        raise ValueError(f"no reference name for conv-block parameter {rest!r}")  # a bug: archdsl added a layer
    kind, unit, tail = found.groups()
    return f"conv{unit}.{0 if kind == 'norm' else 2}.{tail}"


def _post_conv_part(rest: str) -> str:
    """A post-activation conv block's archdsl name -> the reference's (models/resnet_dnn_block.py)."""
    found = re.fullmatch(r"(shortcut_norm|shortcut|norm|conv)(\d*)\.(.+)", rest)
    if found is None:
        raise ValueError(f"no reference name for conv-block parameter {rest!r}")  # a bug: archdsl added a layer
    kind, unit, tail = found.groups()
    if kind.startswith("shortcut"):
        return f"shortcut.{1 if kind == 'shortcut_norm' else 0}.{tail}"
    return f"conv{unit}.{1 if kind == 'norm' else 0}.{tail}"


def _stem_part(key: str, prefix: str) -> str:
    part = next(p for p in _STEM_PARTS if key == p or (p.endswith(".") and key.startswith(p)))
    return prefix + _STEM_PARTS[part] + key[len(part) :]


def _msa_part(rest: str) -> str:
    for ours, theirs in _MSA_PARTS.items():
        if rest.startswith(ours):
            return theirs + rest[len(ours) :]
    return rest  # norm1, conv, norm2 keep their names


def _table_shape(window: tuple[int, int]) -> Shape:
    return (2 * window[0] - 1, 2 * window[1] - 1)


def _check_expressible(arch: Arch) -> None:
    stem_kind = getattr(arch.stem, "kind", "conv3x3")
    if stem_kind not in ("conv3x3", "conv7x7"):
        raise UserError(
            f"{arch.name}: the reference's ResNets and AlterNets have a conv3x3 or conv7x7 stem, not {stem_kind}"
        )
    for shape in block_shapes(arch):
        if not isinstance(shape.block, (ConvBlock, MSABlock)):
            raise UserError(
                f"{arch.name}: block {shape.qualified_name} ({shape.block.kind}) has no counterpart in the "
                "reference's ResNets and AlterNets",
                hint="the reference layout covers conv and AlterNet msa blocks only",
            )


@dataclass(frozen=True)
class Counterpart:
    """Where a reference weight goes in archdsl: its key there, and both shapes (they differ for the table)."""

    key: str
    shape: Shape
    reference_shape: Shape


def reference_layout(arch: Arch) -> dict[str, Counterpart]:
    """Every key of the reference's state dict for `arch`, with its archdsl counterpart.

    The stem is named as in an AlterNet when the design has an MSA block, else as in a
    ResNet (`convert` accepts either name).
    """
    _check_expressible(arch)
    ours = expected_shapes(arch)
    blocks = {shape.qualified_name: shape for shape in block_shapes(arch)}
    stage_numbers = {stage.name: number for number, stage in enumerate(arch.stages, start=1)}
    has_msa = any(isinstance(shape.block, MSABlock) for shape in blocks.values())
    layout: dict[str, Counterpart] = {}
    for key, shape in ours.items():
        reference_shape = shape
        if key.startswith("stem."):
            theirs = _stem_part(key, _STEM_PREFIXES[1] if has_msa else _STEM_PREFIXES[0])
        elif key.startswith("head."):
            prefix = next(p for p in _HEAD if key.startswith(p))
            theirs = _HEAD[prefix] + key[len(prefix) :]
        else:
            _, stage, index, rest = key.split(".", 3)
            block = blocks[f"stages.{stage}.{index}"]
            prefix = f"layer{stage_numbers[stage]}.{index}."
            if isinstance(block.block, MSABlock):
                theirs = prefix + _msa_part(rest)
                if rest == _TABLE:
                    window = (block.block.window,) * 2 if block.block.window is not None else block.out_size
                    reference_shape = _table_shape(window)
            elif isinstance(block.block, ConvBlock) and not block.block.preact:
                theirs = prefix + _post_conv_part(rest)
            else:
                theirs = prefix + _conv_part(rest)
        layout[theirs] = Counterpart(key, shape, reference_shape)
    return layout


def is_post_activation(keys: Collection[str]) -> bool:
    """A post-activation ResNet of the reference (models/resnet.py): conv-BN units, `conv1.0` a conv."""
    return any(key.endswith(".conv1.0.weight") for key in keys)


def has_post_activation_blocks(arch: Arch) -> bool:
    return any(isinstance(b, ConvBlock) and not b.preact for stage in arch.stages for b in stage.blocks)


def recognises(keys: Collection[str]) -> bool:
    return "classifier.0.dense.weight" in keys and any(key.startswith("layer1.") for key in keys)


def _stem_side(state: Mapping[str, torch.Tensor]) -> int | None:
    """The stem conv's kernel side in a reference file: 3 (CIFAR, `stem=False`), 7 (ImageNet, `stem=True`)."""
    weight = state.get(ALTERNET_STEM, state.get(PREACT_STEM))
    return int(weight.shape[-1]) if isinstance(weight, torch.Tensor) and weight.dim() == 4 else None


def _built_in_for(state: Mapping[str, torch.Tensor]) -> str:
    """The built-in spec a reference ResNet-50 or AlterNet-50 file of this kind imports as."""
    if is_post_activation(state):
        name = "resnet50-post"
    elif any(".attn." in key for key in state):
        name = "alter50-code"
    else:
        name = "resnet50"
    if _stem_side(state) == 7:
        return "alter50-imagenet" if name == "alter50-code" else f"{name}-imagenet"
    return name


def _check_stem(arch: Arch, state: Mapping[str, torch.Tensor]) -> None:
    """An ImageNet file (7x7 stem) for a CIFAR spec, or the other way round: name the stem and the spec to use."""
    side, want = _stem_side(state), 7 if getattr(arch.stem, "kind", None) == "conv7x7" else 3
    if side not in (3, 7) or side == want:
        return
    stems = {3: "the CIFAR stem (one 3x3 conv, stem=False)", 7: "the ImageNet stem (7x7 conv and max-pool, stem=True)"}
    raise UserError(
        f"these are the weights of a reference model with {stems[side]}, and {arch.name} has {stems[want]}",
        hint=f"a ResNet-50 or AlterNet-50 of this kind imports with --spec {_built_in_for(state)}; for other designs "
        f"write `stem conv{side}x{side}(64)` (docs/language.md)",
    )


def _check_activation_order(arch: Arch, state: Mapping[str, torch.Tensor]) -> None:
    """A pre-activation file for a post-activation spec, or the other way round: say so, not just which keys differ."""
    post = is_post_activation(state)
    if post == has_post_activation_blocks(arch):
        return
    if post:
        raise UserError(
            f"these are the weights of a post-activation ResNet of the reference implementation (models/resnet.py: "
            f"BN after every conv, ReLU after the residual sum, a BN in the stem), and {arch.name}'s conv blocks are "
            "pre-activation",
            hint=f"a ResNet-50 of this kind (the released resnet_50 file too) imports with --spec "
            f"{_built_in_for(state)}; for other depths write a spec with `conv = bottleneck(expansion=4, "
            "preact=false)`, a stem with `norm=true` and `head mean(norm=false)`",
        )
    raise UserError(
        f"these are the weights of a pre-activation ResNet or AlterNet of the reference implementation "
        f"(models/preresnet.py, models/alternet.py), and {arch.name}'s conv blocks are post-activation",
        hint=f"use a pre-activation spec such as {_built_in_for(state)}; see docs/import.md",
    )


def _rename_stem(state: dict[str, torch.Tensor], layout: Collection[str]) -> None:
    """Accept the stem under either reference name (`layer0.` or the AlterNet's `layer0.layer0.`), in place."""
    alternet = any(key.startswith(_STEM_PREFIXES[1]) for key in state)
    want_alternet = any(key.startswith(_STEM_PREFIXES[1]) for key in layout)
    if alternet == want_alternet:
        return
    have, want = (_STEM_PREFIXES[1], _STEM_PREFIXES[0]) if alternet else _STEM_PREFIXES
    for key in [k for k in state if k.startswith(have)]:
        state[want + key[len(have) :]] = state.pop(key)


def convert(arch: Arch, state: Mapping[str, torch.Tensor]) -> StateDict:
    layout = reference_layout(arch)
    _check_stem(arch, state)
    _check_activation_order(arch, state)
    state = dict(state)
    _rename_stem(state, layout)
    mismatch = compare_weights({key: part.reference_shape for key, part in layout.items()}, state)
    if mismatch:
        raise UserError(
            f"the weights do not fit {arch.name} in the reference layout:\n{mismatch.describe()}",
            hint="is --spec the design the file was trained as? (its blocks, widths, heads, windows and classes)",
        )
    return {part.key: state[theirs].reshape(part.shape) for theirs, part in layout.items()}


FORMATS = (
    SourceFormat(
        name="reference",
        description=(
            "the reference implementation's ResNets (pre- and post-activation) and AlterNets "
            "(xxxnell/how-do-vits-work: layer0..layer4, classifier.0)"
        ),
        recognises=recognises,
        convert=convert,
    ),
)
