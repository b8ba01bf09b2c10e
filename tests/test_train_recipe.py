"""Training configuration, data loaders and device selection."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from archdsl.data.base import ImageSet
from archdsl.errors import UserError
from archdsl.run.device import select_device
from archdsl.run.loader import derive_seed, make_loader
from archdsl.run.recipe import TrainConfig


def image_set(n: int = 40, size: int = 8, classes: int = 4) -> ImageSet:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8)
    labels = np.arange(n, dtype=np.int64) % classes
    return ImageSet("toy", images, labels, classes, (0.4, 0.5, 0.6), (0.2, 0.25, 0.3))


def test_deit_defaults_follow_the_paper_recipe() -> None:
    config = TrainConfig()
    assert (config.batch_size, config.optimizer, config.lr) == (96, "adamw", pytest.approx(1.25e-4))
    assert (config.weight_decay, config.clip_grad, config.warmup_epochs) == (0.05, 5.0, 5)
    assert (config.mixup, config.cutmix, config.mixup_prob, config.label_smoothing) == (1.0, 0.8, 1.0, 0.1)
    assert config.randaugment == "rand-m9-n2-mstd1.0" and config.drop_path == 0.1
    assert config.uses_mixup


def test_learning_rate_scales_with_the_batch_size_unless_given() -> None:
    assert TrainConfig(batch_size=192).lr == pytest.approx(2.5e-4)
    assert TrainConfig(recipe="weak", batch_size=64).lr == pytest.approx(0.05)
    assert TrainConfig(recipe="fast", batch_size=64, lr=0.3).lr == 0.3
    weak = TrainConfig(recipe="weak")
    assert (weak.optimizer, weak.batch_size, weak.weight_decay, weak.uses_mixup) == ("momentum", 128, 5e-4, False)
    fast = TrainConfig(recipe="fast")
    assert (fast.optimizer, fast.batch_size, fast.weight_decay, fast.uses_mixup) == ("sgd", 128, 5e-4, False)


def test_config_round_trips_through_json() -> None:
    for config in (TrainConfig(epochs=3), TrainConfig(recipe="weak", epochs=2, seed=5)):
        assert TrainConfig.model_validate_json(config.model_dump_json()) == config


def test_warmup_is_clamped_below_the_epoch_count() -> None:
    assert TrainConfig(epochs=3).effective_warmup() == 2
    assert TrainConfig(epochs=1).effective_warmup() == 0
    assert TrainConfig(epochs=50).effective_warmup() == 5


@pytest.mark.parametrize("bad", [{"epochs": 0}, {"epochs": -2}, {"recipe": "adam"}, {"subset": 1.5}, {"lr": -1.0}])
def test_bad_settings_are_rejected(bad: dict) -> None:
    with pytest.raises(ValidationError):
        TrainConfig(**bad)


def test_unaugmented_loader_keeps_order_and_normalises() -> None:
    data = image_set()
    batches = list(make_loader(data, 16, augment=False))
    images = torch.cat([b[0] for b in batches])
    labels = torch.cat([b[1] for b in batches])
    assert [len(b[1]) for b in batches] == [16, 16, 8]
    assert images.dtype == torch.float32 and images.shape == (40, 3, 8, 8)
    assert labels.dtype == torch.int64 and torch.equal(labels, torch.from_numpy(data.labels))
    expected = (data.images[3, 2, 5, 1] / 255 - 0.5) / 0.25
    assert images[3, 1, 2, 5].item() == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("recipe", ["deit", "weak", "fast"])
def test_augmented_loader_is_deterministic_per_seed(recipe: str) -> None:
    data = image_set()

    def first_batch(seed: int):
        torch.manual_seed(seed)  # the per-image transforms draw from the global generators
        np.random.seed(seed)
        import random

        random.seed(seed)
        return next(iter(make_loader(data, 16, augment=True, recipe=recipe, seed=seed)))

    a, b, c = first_batch(1), first_batch(1), first_batch(2)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])
    assert a[0].shape == (16, 3, 8, 8)
    # Augmented batches are full (Mixup needs them even): 40 images -> 2 batches of 16.
    assert len(make_loader(data, 16, augment=True, recipe=recipe)) == 2


def test_derived_seeds_differ_per_part() -> None:
    seeds = {derive_seed(0, epoch) for epoch in range(50)} | {derive_seed(1, 0), derive_seed(0, 0, 1)}
    assert len(seeds) == 52
    assert derive_seed(3, 4) == derive_seed(3, 4)
    assert all(0 <= s < 2**63 for s in seeds)


def test_device_selection() -> None:
    assert select_device("cpu") == torch.device("cpu")
    assert select_device("auto").type in {"cpu", "cuda", "mps"}
    for name in ("tpu", "cpu:1", "cuda:x"):  # what the --device flag refuses, refused here too
        with pytest.raises(UserError, match="unknown device"):
            select_device(name)
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="no CUDA"):
            select_device("cuda")


def test_resident_loader_crops_padded_windows_and_flips() -> None:
    from archdsl.run.loader import ResidentLoader

    data = image_set(n=32, size=8)
    loader = ResidentLoader(data, 8, device="cpu", padding=2, hflip=0.5, seed=5)
    batches = list(loader)
    assert len(loader) == 4 and [len(labels) for _, labels in batches] == [8] * 4
    labels = torch.cat([labels for _, labels in batches])
    assert sorted(labels.tolist()) == sorted(data.labels.tolist())  # a permutation of the set
    # Each augmented image is some 8x8 window of its zero-padded original, maybe mirrored.
    mean = torch.tensor(data.mean).view(3, 1, 1)
    std = torch.tensor(data.std).view(3, 1, 1)
    order = torch.randperm(32, generator=torch.Generator().manual_seed(5))
    images = torch.cat([images for images, _ in batches])
    for position in range(0, 32, 7):
        raw = torch.from_numpy(data.images[order[position]]).permute(2, 0, 1).float()
        padded = torch.nn.functional.pad(raw, (2, 2, 2, 2))
        pixels = (images[position] * std + mean) * 255
        windows = [padded[:, r : r + 8, c : c + 8] for r in range(5) for c in range(5)]
        assert any(
            torch.allclose(pixels, w, atol=1e-3) or torch.allclose(pixels, w.flip(-1), atol=1e-3) for w in windows
        )
    again = list(ResidentLoader(data, 8, device="cpu", padding=2, hflip=0.5, seed=5))
    assert all(torch.equal(a[0], b[0]) for a, b in zip(batches, again, strict=True))
    loader.reseed(6)
    assert not torch.equal(next(iter(loader))[0], batches[0][0])


def test_resident_data_refuses_randaugment() -> None:
    with pytest.raises(ValidationError, match="RandAugment"):
        TrainConfig(recipe="deit", resident=True)
    assert TrainConfig(recipe="fast", resident=True).resident


MICRO_VIT = """
arch micro-vit {
    input   3x16x16
    classes 10
    stem    patch(4, 16)
    head    class
    pos     absolute
    stage s1(width=16) { attn(2, global) mlp(2) }
}
"""
MICRO_SWIN = """
arch micro-swin {
    input   3x16x16
    classes 10
    stem    patch(2, 16, norm=true)
    pos     relative
    stage s1(width=16) { attn(2, 4) mlp(2) attn(2, 4, shift=2) mlp(2) }
}
"""
MICRO_ALTER = """
arch micro-alter {
    input   3x16x16
    classes 10
    stem    conv3x3(8)
    conv  = basic
    stage c1(width=8) { conv msa(2, 4, dim_head=4) }
}
"""


@pytest.mark.parametrize(
    "text, undecayed_matrices",
    [
        (MICRO_VIT, {"stem.pos_embed", "stem.cls_token"}),  # as timm's ViT and PiT
        (MICRO_SWIN, {"relative_position_bias_table"}),  # as timm's Swin (2-d tables)
        (MICRO_ALTER, set()),  # only 1-d parameters go without decay
    ],
)
def test_weight_decay_spares_what_timms_models_spare(text: str, undecayed_matrices: set[str]) -> None:
    from archdsl.lang.spec import parse_spec
    from archdsl.nn.build import build
    from archdsl.run.recipe import make_optimizer

    model = build(parse_spec(text), seed=0)
    optimizer = make_optimizer(model, TrainConfig(recipe="fast"))  # timm's groups
    spared = {id(p) for group in optimizer.param_groups if group["weight_decay"] == 0 for p in group["params"]}
    names = {name for name, p in model.named_parameters() if id(p) in spared and p.ndim > 1}
    shown = {name if name in undecayed_matrices else name.rsplit(".", 1)[-1] for name in names}
    assert shown == undecayed_matrices
    assert all(p.ndim <= 1 or name in names for name, p in model.named_parameters() if id(p) in spared)
    assert model.no_weight_decay() == names  # timm's create_optimizer_v2 reads this, in timm's train.py too


def test_the_paper_recipes_are_the_reference_configs() -> None:
    # configs/cifar100_vit.yaml: 5 warm-up + 300 cosine epochs (per epoch, to 0), AdamW on every parameter.
    deit = TrainConfig(recipe="deit")
    assert (deit.epochs, deit.warmup_epochs, deit.sched, deit.sched_on_updates) == (305, 5, "cosine", False)
    assert (deit.warmup_lr, deit.min_lr, deit.weight_decay_params, deit.hflip, deit.crop_padding) == (
        0.0, 0.0, "all", 0.5, 4,
    )  # fmt: skip
    # configs/cifar100_general.yaml: SGD (momentum 0.9, not Nesterov), 1 warm-up + 200 epochs, MultiStepLR.
    weak = TrainConfig(recipe="weak")
    assert (weak.optimizer, weak.momentum, weak.lr, weak.batch_size, weak.weight_decay) == (
        "momentum", 0.9, 0.1, 128, 5e-4,
    )  # fmt: skip
    assert (weak.epochs, weak.warmup_epochs, weak.sched, weak.decay_milestones, weak.decay_rate) == (
        201, 1, "multistep", (60, 120, 160), 0.2,
    )  # fmt: skip
    assert (weak.clip_grad, weak.label_smoothing, weak.uses_mixup, weak.randaugment, weak.drop_path) == (
        0.0, 0.0, False, None, 0.0,
    )  # fmt: skip


@pytest.mark.parametrize("recipe", ["deit", "weak"])
def test_the_reference_recipes_decay_every_parameter_in_one_group(recipe: str) -> None:
    from archdsl.lang.spec import parse_spec
    from archdsl.nn.build import build
    from archdsl.run.recipe import make_optimizer

    model = build(parse_spec(MICRO_ALTER), seed=0)
    optimizer = make_optimizer(model, TrainConfig(recipe=recipe))
    assert len(optimizer.param_groups) == 1
    group = optimizer.param_groups[0]
    assert group["weight_decay"] == TrainConfig(recipe=recipe).weight_decay
    assert [id(p) for p in group["params"]] == [id(p) for p in model.parameters()]
    expected = torch.optim.AdamW if recipe == "deit" else torch.optim.SGD
    assert type(optimizer) is expected and group.get("nesterov", False) is False


def test_docs_training_has_the_recipe_table() -> None:
    from pathlib import Path

    from archdsl.run.recipe import recipe_table

    page = (Path(__file__).resolve().parents[1] / "docs" / "training.md").read_text()
    assert recipe_table() in page, "regenerate docs/training.md's table: archdsl.run.recipe.recipe_table()"


def test_every_recipe_setting_is_a_flag_of_train_and_search_and_a_config_key(tmp_path) -> None:
    from archdsl.cli import build_parser
    from archdsl.run.recipe import RECIPE_FIELDS, recipe_flags

    flags = recipe_flags()
    assert set(RECIPE_FIELDS) <= set(flags)
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for command in ("train", "search"):
        known = set(commands[command]._option_string_actions)
        assert {flag for field, (flag, _) in flags.items() if field != "epochs"} <= known, command
    # Given on the command line or in a --config file, each reaches TrainConfig.
    args = commands["train"].parse_args(
        ["tiny", "--dataset", "synthetic", "--opt", "momentum", "--decay-milestones", "3,9", "--no-sched-on-updates",
         "--aa", "none", "--hflip", "0.25", "--clip-grad", "1"]
    )  # fmt: skip
    from archdsl.commands.recipe_flags import recipe_settings

    config = TrainConfig(recipe="deit", **recipe_settings(args))
    assert (config.optimizer, config.decay_milestones, config.sched_on_updates) == ("momentum", (3, 9), False)
    assert (config.randaugment, config.hflip, config.clip_grad) == (None, 0.25, 1.0)
