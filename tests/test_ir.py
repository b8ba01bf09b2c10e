"""The IR: validation of types, canonical identity, shape inference."""

import pydantic
import pytest

from archdsl.ir import Arch, ConvBlock, InputShape, MSABlock, Stage, Stem, block_shapes, feature_channels, stage_shapes


def small_arch(name: str = "small", window: int | None = 4) -> Arch:
    return Arch(
        name=name,
        input=InputShape(channels=3, height=32, width=32),
        classes=10,
        stem=Stem(channels=16),
        stages=(
            Stage(name="s1", width=16, stride=1, blocks=(ConvBlock(), ConvBlock())),
            Stage(name="s2", width=32, stride=2, blocks=(ConvBlock(), MSABlock(heads=2, window=window))),
        ),
    )


def test_digest_ignores_the_arch_name_but_not_the_design():
    assert small_arch("a").digest() == small_arch("b").digest()
    assert small_arch(window=4).digest() != small_arch(window=None).digest()
    assert len(small_arch().short_id) == 12


def test_ir_is_frozen_and_rejects_unknown_fields():
    arch = small_arch()
    with pytest.raises(pydantic.ValidationError):
        arch.classes = 3
    with pytest.raises(pydantic.ValidationError):
        MSABlock(heads=2, window=4, bias=True)
    with pytest.raises(pydantic.ValidationError):
        MSABlock(heads=0)


def test_blocks_round_trip_through_json_by_kind():
    arch = small_arch()
    again = Arch.model_validate_json(arch.model_dump_json())
    assert again == arch
    assert isinstance(again.stages[1].blocks[1], MSABlock)


def test_shape_inference_follows_strides_and_expansion():
    shapes = block_shapes(small_arch())
    assert [s.qualified_name for s in shapes] == ["stages.s1.0", "stages.s1.1", "stages.s2.0", "stages.s2.1"]
    assert shapes[0].in_channels == 16 and shapes[0].out_channels == 64
    assert shapes[2].stride == 2 and shapes[2].in_size == (32, 32) and shapes[2].out_size == (16, 16)
    # the MSA keeps the conv blocks' output width (width * expansion) and the map size
    assert shapes[3].in_channels == shapes[3].out_channels == 128 and shapes[3].out_size == (16, 16)
    stages = stage_shapes(small_arch())
    assert [(s.in_channels, s.out_channels, s.out_size) for s in stages] == [(16, 64, (32, 32)), (64, 128, (16, 16))]
    assert feature_channels(small_arch()) == 128
