"""The IR: validation of types, canonical identity, shape inference."""

import pydantic
import pytest

from archdsl.ir import (
    BUILTIN_BLOCKS,
    Arch,
    AttnBlock,
    ConvBlock,
    InputShape,
    MSABlock,
    Stage,
    Stem,
    block_shapes,
    feature_channels,
    stage_shapes,
)


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


# The shape traits every block declares (`archdsl.ir._Block`).
TRAITS = ("layout", "downsamples", "channels", "attention", "follows_conv")


@pytest.mark.parametrize("cls", BUILTIN_BLOCKS, ids=lambda cls: cls.__name__)
def test_a_kinds_shape_rule_is_declared_on_its_class_and_never_stored(cls) -> None:
    """Class declarations, not fields: they stay out of the dump and the schema, so no digest moves."""
    assert set(TRAITS).isdisjoint(cls.model_fields)
    assert set(TRAITS).isdisjoint(cls.model_json_schema().get("properties", {}))
    assert cls.layout in ("map", "tokens") and cls.channels in ("width", "keep")


# One block of each built-in kind, with its required arguments.
SAMPLES = {
    cls: cls.model_validate({"heads": 2, "dim_head": 8} if cls in (MSABlock, AttnBlock) else {})
    for cls in BUILTIN_BLOCKS
}


@pytest.mark.parametrize("cls", BUILTIN_BLOCKS, ids=lambda cls: cls.__name__)
def test_a_blocks_output_channels_follow_the_stage_width_exactly_when_it_says_so(cls) -> None:
    block, arch = SAMPLES[cls], small_arch()
    narrow, wide = (Stage(name="s", width=width, stride=1, blocks=(block,)) for width in (8, 16))
    outs = {block.out_channels(arch, stage, in_channels) for stage in (narrow, wide) for in_channels in (12, 24)}
    if block.channels == "keep":
        assert [block.out_channels(arch, narrow, c) for c in (12, 24)] == [12, 24]
    else:
        assert block.out_channels(arch, narrow, 12) == block.out_channels(arch, narrow, 24)
        assert block.out_channels(arch, wide, 12) == 2 * block.out_channels(arch, narrow, 12)
    assert len(outs) == 2


@pytest.mark.parametrize("name", ["alter50", "swin-ti", "resnet50"])
def test_the_ir_and_the_summary_count_the_attention_blocks_of_either_kind(name: str) -> None:
    from archdsl.lang.spec import load_spec
    from archdsl.nn.summary import summarize

    arch = load_spec(name)
    attention = sum(isinstance(b, (MSABlock, AttnBlock)) for stage in arch.stages for b in stage.blocks)
    assert arch.n_msa == summarize(arch).n_msa == attention


# The digests of the built-in specs as they were before the language grew transformer words
# (patch stems, `attn`, `mlp`, merging, ...). A new IR field must stay out of the canonical
# JSON at its default, or every stored trial and checkpoint of these designs changes identity.
PINNED_DIGESTS = {
    "alter-small-base": "c201e49a7379d499b83134bff51c0dc6f158cf06e441223dca73de7437f09bcf",
    "alter18": "0dfa233b1520ee410cf1433c8df52c27e9c1d0bfb930a36552d0cfa57ff6d0e9",
    "alter50": "1b1ba21d0e5a7443828689e8ea1748c2a8aa7e309007b9960d6e04d7950b04ee",
    "alter50-base": "d835726db1d3955de3e0b3a0497fe585276ca725add8c18ea5a719a12e8d8a85",
    "alter50-code": "73d7edbfe895406d04f75f5d3600aaa7cffd497e26670207395a920e9390fa4d",
    "resnet18": "44191cb4b28e82ba21a84ab02c0abada023eba378243f17dbf634cfc822c99c0",
    "resnet50": "62a1585079af8fa13fab41a8def476df9bba6000e19f3df60bdd9ca9fa240905",
    "swinlike50": "09b0006de1474e68ba96ed271b4354683a110357901ff650975f518a51b88966",
    "tiny": "913c4b0e3b2d59e28a4a1a30cfd0fdaf00522c0e5d929e098b36a28ec191b932",
    "tiny-basic": "72cfd0bb87afd43fad4d25d99def415d8ea6749178303845d7556d2ed289eaf0",
}


@pytest.mark.parametrize("name", sorted(PINNED_DIGESTS))
def test_digests_of_the_existing_builtin_specs_never_change(name: str):
    from archdsl.lang.spec import load_spec

    assert load_spec(name).digest() == PINNED_DIGESTS[name]


def test_the_post_activation_fields_count_in_the_digest_once_set():
    from archdsl.lang.spec import load_spec

    base = load_spec("resnet18")
    stage = base.stages[1]
    first = stage.blocks[0].model_copy(update={"preact": False})
    post_block = stage.model_copy(update={"blocks": (first, *stage.blocks[1:])})
    variants = [
        base.model_copy(update={"stem": base.stem.model_copy(update={"norm": True})}),
        base.model_copy(update={"head_norm": False}),
        base.model_copy(update={"conv": base.conv.model_copy(update={"preact": False})}),
        base.model_copy(update={"stages": (base.stages[0], post_block, *base.stages[2:])}),
    ]
    digests = {arch.digest() for arch in variants}
    assert len(digests) == 4 and base.digest() not in digests
    assert '"preact"' not in base.canonical_json() and '"preact":false' in variants[3].canonical_json()
