"""timm models paired with archdsl specs, and the check that both compute the same function.

Shared by tests/test_compiler_transformers.py, tests/test_convert_timm.py, tests/test_timm_models.py
and tests/test_timm_contract.py.
"""

from __future__ import annotations

import torch
from timm.models.pit import PoolingVisionTransformer
from timm.models.swin_transformer import SwinTransformer
from timm.models.vision_transformer import VisionTransformer

from archdsl.nn.build import build
from archdsl.nn.convert.timm import timm_to_archdsl
from archdsl.nn.timm_models import register_timm

# Small designs of every layout: conv + AlterNet MSA, a class-token transformer, a windowed one
# (shifted windows, patch merging), PiT's pooling.
SMALL_SPECS = {
    "convs": "arch convs { input 3x16x16 classes 5 stem conv3x3(8) conv = basic "
    "stage a(width=8) { conv msa(2, 4) } stage b(width=16, stride=2) { conv msa(2, 4) } }",
    "vit": "arch vit { input 3x16x16 classes 5 stem patch(2, 16) head class pos absolute "
    "stage s(width=16) { [attn(2, global) mlp(2)]*2 } }",
    "swin": "arch swin { input 3x16x16 classes 5 stem patch(2, 16, norm=true) pos relative "
    "stage s1(width=16) { attn(2, 4) mlp(2) attn(2, 4, shift=2) mlp(2) } "
    "stage s2(width=32) { merge attn(2, 2) mlp(2) } }",
    "pit": "arch pit { input 3x16x16 classes 5 stem patch(2, 16) head class pos absolute(class=false) "
    "stage a(width=16) { attn(2, global) mlp(2) } stage b(width=32) { pool attn(2, global) mlp(2) } }",
}

# With SMALL_SPECS, every block module once: bottlenecks pre- and post-activation (with the
# conv-BN stem and the head without BN), smoothing, local attention, token blocks between conv
# blocks (both layouts in one stage), pooling without a class token.
KIND_SPECS = {
    "post": "arch post { input 3x16x16 classes 5 stem conv3x3(8, norm=true) "
    "conv = bottleneck(expansion=4, preact=false) head mean(norm=false) init torch "
    "stage a(width=4) { conv conv } stage b(width=8, stride=2) { conv } }",
    "bottleneck": "arch bottleneck { input 3x16x16 classes 5 stem conv3x3(8) conv = bottleneck "
    "stage a(width=4) { conv smooth msa(2, 4) } stage b(width=8, stride=2) { conv msa(2, global) } }",
    "hybrid": "arch hybrid { input 3x16x16 classes 4 stem conv3x3(8) conv = basic "
    "stage a(width=8) { conv attn(2, 4) mlp(2) smooth conv } "
    "stage b(width=16) { conv msa(2, global) attn(2, kernel=3) } stage c(width=32) { pool mlp(2) } }",
    "local": "arch local { input 3x16x16 classes 4 stem patch(2, 16) pos relative "
    "stage s(width=16) { attn(2, kernel=3) mlp(2) attn(4, kernel=5, dim_head=3) mlp(1) } }",
}


def register_small(folder, names, prefix: str) -> dict[str, str]:
    """Write the `names` of SMALL_SPECS or KIND_SPECS into `folder` and register each with timm as `{prefix}_{name}`
    (a prefix per test module: registrations live for the whole worker); name -> timm name."""
    registered = {}
    for name in names:
        (folder / f"{name}.arch").write_text({**SMALL_SPECS, **KIND_SPECS}[name])
        registered[name] = register_timm(folder / f"{name}.arch", name=f"{prefix}_{name}")
    return registered


# The authors' CIFAR-100 models (the reference repository's README), params measured with timm 1.0.31.
PAPER = {
    "vit-ti": (
        VisionTransformer,
        dict(num_classes=100, img_size=32, patch_size=2, embed_dim=192, depth=12, num_heads=3, qkv_bias=False),
        5_403_172,
    ),
    "pit-ti": (
        PoolingVisionTransformer,
        dict(
            num_classes=100,
            img_size=32,
            patch_size=2,
            stride=1,
            base_dims=[32, 32, 32],
            depth=[2, 6, 4],
            heads=[2, 4, 8],
            mlp_ratio=4,
        ),
        4_582_436,
    ),
    "swin-ti": (
        SwinTransformer,
        dict(
            num_classes=100,
            img_size=32,
            patch_size=1,
            window_size=4,
            embed_dim=96,
            depths=(2, 2, 6, 2),
            num_heads=(3, 6, 12, 24),
            qkv_bias=False,
        ),
        27_562_126,
    ),
}

# Small designs each paired with the timm model that computes the same function.
SMALL = {
    "vit-mean": (
        """arch vit-mean { input 3x16x16 classes 7 stem patch(4, 24)
           pos absolute stage s(width=24) { [attn(2, global) mlp(2)]*2 } }""",
        VisionTransformer,
        dict(
            num_classes=7,
            img_size=16,
            patch_size=4,
            embed_dim=24,
            depth=2,
            num_heads=2,
            mlp_ratio=2,
            class_token=False,
            global_pool="avg",
            fc_norm=False,
        ),
    ),
    "vit-class-unplaced": (
        """arch vit-class-unplaced { input 3x16x16 classes 5 stem patch(2, 16) head class
           pos absolute(class=false) stage s(width=16) { attn(4, global, qkv_bias=false) mlp(4) } }""",
        VisionTransformer,
        dict(
            num_classes=5,
            img_size=16,
            patch_size=2,
            embed_dim=16,
            depth=1,
            num_heads=4,
            qkv_bias=False,
            no_embed_class=True,
        ),
    ),
    "pit-small": (
        """arch pit-small { input 3x15x15 classes 6 stem patch(3, 16, stride=2) head class pos absolute(class=false)
           stage a(width=16) { attn(2, global) mlp(4) }
           stage b(width=32) { pool [attn(4, global) mlp(4)]*2 } }""",
        PoolingVisionTransformer,
        dict(num_classes=6, img_size=15, patch_size=3, stride=2, base_dims=[8, 8], depth=[1, 2], heads=[2, 4]),
    ),
    "swin-small": (
        """arch swin-small { input 3x16x16 classes 9 stem patch(1, 16, norm=true) pos relative
           norm = layernorm(eps=1e-5)
           stage a(width=16) { attn(2, 4, qkv_bias=false) mlp(4) attn(2, 4, shift=2, qkv_bias=false) mlp(4) }
           stage b(width=32) { merge attn(4, 4, qkv_bias=false) mlp(4) attn(4, 4, shift=2, qkv_bias=false) mlp(4) }
           stage c(width=64) { merge [attn(8, 4, qkv_bias=false) mlp(4)]*2 } }""",
        SwinTransformer,
        dict(
            num_classes=9,
            img_size=16,
            patch_size=1,
            window_size=4,
            embed_dim=16,
            depths=(2, 2, 2),
            num_heads=(2, 4, 8),
            qkv_bias=False,
        ),
    ),
}


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def randomize(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Every parameter random, norms and biases too, so that no term can hide behind a zero or a one."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)
    return model.eval()


def assert_same_function(reference: torch.nn.Module, arch, images: torch.Tensor) -> None:
    model = build(arch, seed=1)
    model.load_state_dict(timm_to_archdsl(arch, reference.state_dict()), strict=True)
    model.eval()
    for dtype, tolerance in ((torch.float64, 1e-10), (torch.float32, 1e-5)):
        with torch.no_grad():
            want = reference.to(dtype)(images.to(dtype))
            got = model.to(dtype)(images.to(dtype))
        assert got.shape == want.shape
        scale = max(1.0, want.abs().max().item())
        assert (got - want).abs().max().item() <= tolerance * scale, dtype
