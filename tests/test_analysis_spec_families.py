"""Every measure of `archdsl analyze` on every family of built-in spec: ResNet, AlterNet, ViT, PiT, Swin.

Micro versions of each family (the same words as the built-in specs, a few channels) keep it quick.
"""

from __future__ import annotations

import copy

import pytest
import torch
from test_analysis_measures import image_set, zero_last_layer_of_branch

from archdsl.analysis import AnalysisData, AnalysisSettings, HessianSettings, analyze
from archdsl.analysis.lesion import residual_blocks, without_residual_branch
from archdsl.analysis.settings import CKASettings, LandscapeSettings
from archdsl.data.base import CorruptedSet
from archdsl.lang.spec import parse_spec
from archdsl.nn.build import build
from archdsl.run.recipe import TrainConfig

FAMILIES = {
    "resnet": """arch f { input 3x16x16 classes 4 stem conv3x3(4) conv = basic
        stage c1(width=4) { conv } stage c2(width=8, stride=2) { conv conv } }""",
    "alternet": """arch f { input 3x16x16 classes 4 stem conv3x3(4) conv = bottleneck(expansion=2)
        stage c1(width=4) { conv } stage c2(width=8, stride=2) { conv msa(heads=2, window=4, dim_head=4) } }""",
    "vit": """arch f { input 3x16x16 classes 4 stem patch(2, 16) head class pos absolute
        stage s1(width=16) { [attn(2, global, qkv_bias=false) mlp(2)]*2 } }""",
    "pit": """arch f { input 3x16x16 classes 4 stem patch(2, 8, stride=1) head class pos absolute(class=false)
        stage s1(width=8) { attn(2, global) mlp(2) } stage s2(width=16) { pool attn(4, global) mlp(2) } }""",
    "swin": """arch f { input 3x16x16 classes 4 stem patch(1, 8, norm=true) pos relative norm = layernorm(eps=1e-5)
        stage s1(width=8) { attn(2, 4) mlp(2) attn(2, 4, shift=2) mlp(2) }
        stage s2(width=16) { merge attn(4, 4) mlp(2) } }""",
}
ALL = ("acc", "robustness", "hessian", "fourier", "variance", "nll-train", "landscape", "cka", "lesion")


def data() -> AnalysisData:
    test = image_set(16, seed=1)
    return AnalysisData(
        name="toy",
        train=image_set(32),
        scored=test,
        corrupted=[CorruptedSet("fog", 1, test), CorruptedSet("snow", 2, test)],
    )


SETTINGS = AnalysisSettings(
    recipe=TrainConfig(recipe="fast"),
    batch_size=8,
    hessian=HessianSettings(batches=1, batch_size=4, k=2, max_iter=4, method="lanczos"),
    images=8,
    train_images=16,
    landscape=LandscapeSettings(dims=2, points=3, batches=1, batch_size=8),
    cka=CKASettings(images=8, batch_size=4),
)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_measure_runs_on_every_family(family, one_thread):
    model = build(parse_spec(FAMILIES[family]), seed=0)
    report = analyze(model, data(), ALL, SETTINGS)
    kinds = {layer.kind for layer in report.cka.layers}
    assert len(report.cka.layers) == len(report.feature_maps.variance.layers)
    assert {b.kind for b in report.lesion.blocks} <= {"conv", "msa", "attn", "mlp"}
    if family in ("vit", "pit", "swin"):
        assert {"attn", "mlp"} <= kinds and {b.kind for b in report.lesion.blocks} == {"attn", "mlp"}
    assert report.landscape.center == report.landscape.losses[1][1]
    assert len(report.hessian.eigenvalues) == 2 and report.settings == SETTINGS
    assert 0 <= report.training_nll.top1 <= 1 and report.robustness.mean >= 0


@pytest.mark.parametrize("family", ["vit", "pit", "swin"])
def test_a_lesion_of_a_transformer_block_equals_zeroing_its_branch(family):
    model = build(parse_spec(FAMILIES[family]), seed=0).eval()
    x = torch.randn(2, 3, 16, 16)
    blocks = residual_blocks(model)
    assert blocks and all(b.kind in ("attn", "mlp") for *_, b in blocks)
    for name, *_ in blocks:
        copied = copy.deepcopy(model)
        zero_last_layer_of_branch(copied.get_submodule(name))
        with torch.no_grad(), without_residual_branch(model.get_submodule(name)):
            lesioned = model(x)
        torch.testing.assert_close(lesioned, copied(x).detach(), rtol=0, atol=1e-5)
