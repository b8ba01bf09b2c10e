"""timm state dicts -> archdsl: the registered format, old timm key names, specs that do not fit."""

from __future__ import annotations

import re

import pytest
import torch
from _timm_support import SMALL, assert_same_function, randomize

from archdsl.errors import UserError
from archdsl.lang.spec import load_spec, parse_spec
from archdsl.nn.convert import convert_state_dict, detect_format
from archdsl.nn.convert.timm import timm_to_archdsl
from archdsl.nn.weights import compare_weights, expected_shapes


def small(name: str):
    text, cls, kwargs = SMALL[name]
    return parse_spec(text), randomize(cls(**kwargs), seed=5)


@pytest.mark.parametrize("name", ["vit-mean", "pit-small", "swin-small"])
def test_timm_state_dicts_are_detected_and_fill_every_weight(name: str) -> None:
    arch, reference = small(name)
    assert detect_format(reference.state_dict()).name == "timm"
    fmt, converted = convert_state_dict(arch, reference.state_dict())
    assert fmt.name == "timm"
    assert not compare_weights(expected_shapes(arch), converted)


def old_swin_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """timm < 0.6's Swin layout: merging at the end of the previous stage, a bare `head`, saved buffers."""
    old = {}
    for key, tensor in state.items():
        key = re.sub(r"layers\.(\d+)\.downsample", lambda m: f"layers.{int(m[1]) - 1}.downsample", key)
        old[key.replace("head.fc.", "head.")] = tensor
    old["layers.0.blocks.1.attn_mask"] = torch.zeros(4, 16, 16)
    old["layers.0.blocks.0.attn.relative_position_index"] = torch.zeros(16, 16, dtype=torch.long)
    return old


def old_pit_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """timm < 0.9's PiT layout: the pooling layers apart, as `pools.j`."""
    return {re.sub(r"transformers\.(\d+)\.pool\.", lambda m: f"pools.{int(m[1]) - 1}.", k): v for k, v in state.items()}


def old_vit_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Older ViT checkpoints carried a (since dropped) representation layer."""
    return {**state, "pre_logits.fc.weight": torch.zeros(2, 2), "pre_logits.fc.bias": torch.zeros(2)}


@pytest.mark.parametrize(
    ("name", "rename"),
    [("swin-small", old_swin_keys), ("pit-small", old_pit_keys), ("vit-mean", old_vit_keys)],
    ids=["swin", "pit", "vit"],
)
def test_old_timm_key_names_convert_through_timms_own_filters(name: str, rename) -> None:
    arch, reference = small(name)
    old = rename(dict(reference.state_dict()))
    assert old.keys() != reference.state_dict().keys()
    assert timm_to_archdsl(arch, old).keys() == timm_to_archdsl(arch, reference.state_dict()).keys()

    class Old(torch.nn.Module):  # the reference's function, with the old names' weights
        def __init__(self) -> None:
            super().__init__()
            self.reference = reference

        def state_dict(self, *args, **kwargs):
            return old

        def forward(self, x):
            return self.reference(x)

    assert_same_function(Old(), arch, torch.randn(2, 3, arch.input.height, arch.input.width))


@pytest.mark.parametrize(
    ("spec", "weights", "message"),
    [
        ("vit-ti", "swin-small", "vit-ti is not a timm swin: Swin's patch stem is LayerNorm-ed"),
        ("swin-ti", "pit-small", "swin-ti is not a timm pit: PiT has a class token"),
        ("tiny", "vit-mean", "tiny is not a timm vit: it has no patch stem"),
    ],
)
def test_weights_of_another_model_are_refused_with_the_reason(spec: str, weights: str, message: str) -> None:
    _, reference = small(weights)
    with pytest.raises(UserError, match=re.escape(message)):
        timm_to_archdsl(load_spec(spec), reference.state_dict())


def test_a_state_dict_of_no_timm_family_is_refused() -> None:
    with pytest.raises(UserError, match="not a timm ViT, PiT or Swin state dict"):
        timm_to_archdsl(load_spec("vit-ti"), {"features.0.weight": torch.zeros(1)})
