"""The built-in relational dataset `odd-one-out`: labelled by the colour of the odd object, every object
whole in the frame; its options, its place in the registry, and its training default (no random crop).
That it is deterministic and balanced is tested with synthetic's (tests/test_data_synthetic.py)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from _micro_arch import micro_arch
from scipy import ndimage
from scipy.optimize import linprog

from archdsl.data import (
    corrupted_name,
    count_images,
    dataset_descriptions,
    describe,
    is_corrupted,
    load_corrupted,
    load_split,
    training_defaults,
)
from archdsl.data.odd_one_out import OBJECTS, TRAINING_DEFAULTS, OddOneOutConfig, generate
from archdsl.data.registry import GENERATED
from archdsl.errors import UserError

NAME = "odd-one-out:train=240,test=60"
MICRO = micro_arch("c1(width=8) { conv }", size=16, classes=6)


def _objects(image: np.ndarray, classes: int) -> tuple[list[int], np.ndarray]:
    """The colour index of each object found in `image` (connected pixels of a saturated, bright colour;
    the backgrounds are dark and greyish), and the mask of those pixels."""
    rgb = image.astype(np.float64) / 255
    value, low = rgb.max(axis=-1), rgb.min(axis=-1)
    saturation = (value - low) / np.maximum(value, 1e-9)
    mask = (saturation > 0.6) & (value > 0.5)  # 0 errors in 2,700 images of 3, 6 and 12 colours
    parts, count = ndimage.label(mask, structure=np.ones((3, 3)))
    red, green, blue = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    hue = np.arctan2(np.sqrt(3) * (green - blue), 2 * red - green - blue) / (2 * np.pi) % 1.0
    colours = []
    for k in range(1, count + 1):
        angle = np.angle(np.exp(2j * np.pi * hue[parts == k]).mean()) / (2 * np.pi) % 1.0  # circular mean
        colours.append(int(np.rint(angle * classes)) % classes)
    return colours, mask


@pytest.mark.parametrize("classes", [6, 3, 12])
def test_the_label_is_the_colour_seen_once_among_three_whole_objects(classes):
    images, labels = generate(OddOneOutConfig(classes=classes, train=80, test=1, seed=2), "train")
    for image, label in zip(images, labels, strict=True):
        colours, mask = _objects(image, classes)
        assert len(colours) == OBJECTS  # three objects, apart from each other
        counts = {colour: colours.count(colour) for colour in colours}
        assert sorted(counts.values()) == [1, 2]  # two of one colour, one of another
        assert [colour for colour, seen in counts.items() if seen == 1] == [label]
        border = np.ones_like(mask)
        border[1:-1, 1:-1] = False
        assert not (mask & border).any()  # every object whole in the frame


@pytest.mark.parametrize(
    "name, message",
    [
        ("odd-one-out:classes=2", "classes must be between 3 and 12, got 2"),
        ("odd-one-out:classes=13", "classes must be between 3 and 12, got 13"),
        ("odd-one-out:train=0", "train must be between 1 and 100000, got 0"),
        ("odd-one-out:test=10001", "test must be between 1 and 10000"),
        ("odd-one-out:seed=-1", "seed must be between 0 and 4294967295, got -1"),
        ("odd-one-out:seed=one", "must be an integer"),
        ("odd-one-out:colours=4", "unknown parameter 'colours' for dataset odd-one-out"),
        ("odd-one-out-c:classes=2,corruption=fog,severity=1", "classes must be between 3 and 12"),
    ],
)
def test_every_option_has_limits_and_a_clear_error(name, message):
    with pytest.raises(UserError, match=message):
        load_split(name, "test")
    with pytest.raises(UserError, match=message):
        describe(name)


def test_a_misspelt_option_is_named():
    with pytest.raises(UserError) as refused:
        describe("odd-one-out:clases=4")
    assert "did you mean `classes`" in str(refused.value)


def test_the_registry_describes_counts_and_loads_it_as_it_does_synthetic():
    assert "odd-one-out" in dataset_descriptions() and "odd-one-out-c" in dataset_descriptions()
    info = describe("odd-one-out")
    assert (info.num_classes, info.image_shape, info.split_sizes) == (12, (3, 16, 16), {"train": 2000, "test": 1000})
    assert info.available and info.source == "generated in memory" and info.corruptions == ()
    assert describe("odd-one-out:classes=5,test=30").num_classes == 5
    assert count_images(NAME) == {"train": 240, "test": 60}
    test = load_split(NAME, "test")
    assert test.name == "odd-one-out:test=60,train=240-test"
    assert test.class_names[::2] == ("red", "yellow", "green", "cyan", "blue", "magenta")  # 12 hues 30 degrees apart
    assert load_split("odd-one-out:classes=6,train=8,test=6", "test").class_names == test.class_names[::2]
    assert load_split("odd-one-out:classes=4,train=8,test=4", "train").class_names == ("hue0", "hue1", "hue2", "hue3")
    train = load_split(NAME, "train")
    assert test.mean == train.mean and test.std == train.std  # normalised by the training split


def test_its_corrupted_variant_is_generated_from_its_test_split():
    assert corrupted_name(NAME) == "odd-one-out-c:test=60,train=240" and is_corrupted("odd-one-out-c")
    info = describe("odd-one-out-c:test=60")
    assert info.split_sizes == {"test": 60} and len(info.corruptions) == 15 and info.image_shape == (3, 16, 16)
    assert count_images("odd-one-out-c:test=60") == {"test": 60}
    sets = load_corrupted(NAME, corruptions=["fog", "pixelate"], severities=[3])
    clean = load_split(NAME, "test")
    assert [(s.corruption, s.severity) for s in sets] == [("fog", 3), ("pixelate", 3)]
    for picked in sets:
        assert picked.images.name == f"odd-one-out-c:test=60,train=240/{picked.corruption}/3"
        assert picked.images.images.shape == clean.images.shape
        assert np.array_equal(picked.images.labels, clean.labels)
        assert not np.array_equal(picked.images.images, clean.images)
    one = load_split("odd-one-out-c:test=60,train=240,corruption=fog,severity=3", "test")
    assert np.array_equal(one.images, sets[0].images.images)
    with pytest.raises(UserError, match="odd-one-out-c has no train split"):
        load_split("odd-one-out-c:test=60,corruption=fog,severity=3", "train")


def test_generated_datasets_are_one_entry_each():
    for name, generated in GENERATED.items():
        info = describe(name)
        assert info.image_shape == generated.image_shape and info.description == generated.description
        assert describe(f"{name}-c").description == generated.corrupted_description
        assert set(info.parameters) <= set(generated.config.options())


def test_training_on_it_leaves_out_random_crops_unless_told(tmp_path: Path):
    from archdsl.run.recipe import RECIPE_DEFAULTS, TrainConfig
    from archdsl.run.session import TrainSettings, plan_training

    defaults = training_defaults("odd-one-out:classes=4")
    assert defaults == dict(TRAINING_DEFAULTS) and defaults["crop_padding"] == 0 and defaults["optimizer"] == "adamw"
    assert training_defaults("synthetic") == {} and training_defaults("folder:odd-one-out") == {}
    spec = tmp_path / "micro.arch"
    spec.write_text(MICRO)
    recipe = {"recipe": "fast", "epochs": 1, "device": "cpu", "batch_size": 8}

    def crop(dataset: str, run: str, **given: int) -> int | None:
        settings = TrainSettings(dataset=dataset, out=str(tmp_path / run), progress=False)
        return plan_training(spec, settings, {**recipe, **given}).config.crop_padding

    assert crop("odd-one-out:classes=6,train=24,test=12", "a") == 0
    assert crop("odd-one-out:classes=6,train=24,test=12", "b", crop_padding=2) == 2
    assert RECIPE_DEFAULTS["fast"]["crop_padding"] == 4  # what the default replaces
    (tmp_path / "c.arch").write_text(micro_arch("c1(width=8) { conv }"))
    settings = TrainSettings(dataset="synthetic:train=20,test=10", out=str(tmp_path / "c"), progress=False)
    assert plan_training(tmp_path / "c.arch", settings, recipe).config.crop_padding == 4
    # --help says where the default differs from the recipe's
    description = TrainConfig.model_fields["crop_padding"].description or ""
    from archdsl.data.cards import CARDS

    assert all(name in description for name, card in CARDS.items() if "crop_padding" in card.training)


def test_the_search_trains_it_without_random_crops_unless_told():
    from archdsl.search.planning import fidelity_for
    from archdsl.search.settings import SearchSettings

    odd = SearchSettings(dataset="odd-one-out")
    assert dict(fidelity_for(odd).train_settings) == dict(TRAINING_DEFAULTS)
    given = fidelity_for(odd, {"train_settings": {"crop_padding": 2, "hflip": 0.0}})
    assert dict(given.train_settings) == {**TRAINING_DEFAULTS, "crop_padding": 2, "hflip": 0.0}
    assert fidelity_for(SearchSettings(dataset="synthetic")).train_settings == ()


def test_the_search_trains_each_dataset_at_its_own_fidelity_unless_told():
    from archdsl.data.cards import OTHER, card_for
    from archdsl.search.planning import fidelity_for
    from archdsl.search.settings import SearchSettings

    def fields(dataset: str, **given: object) -> tuple[object, ...]:
        f = fidelity_for(SearchSettings(dataset=dataset), given)
        return f.subset, f.val_subset, f.epochs, f.val_split

    # odd-one-out at its card's measured budget (8 epochs: docs/results.md) on all its images
    odd = card_for("odd-one-out").search
    assert odd.epochs != OTHER.search.epochs and odd.budget_steps == 0
    assert fields("odd-one-out") == fields("odd-one-out:classes=6") == (1.0, 1.0, odd.epochs, "500")
    assert fields("odd-one-out", epochs=3, val_split="0.2", subset=0.5) == (0.5, 0.5, 3, "0.2")
    assert fields("synthetic:train=100") == (0.4, 0.4, 2, None)
    assert fields("fashion-mnist") == (OTHER.search.subset, OTHER.search.subset, 2, None)
    assert SearchSettings().dataset == "odd-one-out"  # the main job's


def _linear_margin(colours: int) -> float:
    """The largest margin by which a linear classifier with biases (weights in [-1, 1]) of the colour
    counts (2 of the pair's colour, 1 of the odd one's) puts the odd colour above every other, in every
    image: positive where one names the odd colour of every image, 0 where none does."""
    size = colours * colours + colours + 1  # weights, biases, the margin
    rows = []
    for pair, odd in itertools.permutations(range(colours), 2):
        counts = 2 * np.eye(colours)[pair] + np.eye(colours)[odd]
        for other in set(range(colours)) - {odd}:  # score(other) - score(odd) + margin <= 0
            row = np.zeros(size)
            row[other * colours : (other + 1) * colours] += counts
            row[odd * colours : (odd + 1) * colours] -= counts
            row[colours * colours + other] += 1
            row[colours * colours + odd] -= 1
            row[-1] = 1
            rows.append(row)
    objective = np.zeros(size)
    objective[-1] = -1
    found = linprog(objective, A_ub=np.array(rows), b_ub=np.zeros(len(rows)), bounds=[(-1, 1)] * size)
    assert found.status == 0
    return float(-found.fun)


def test_no_linear_classifier_of_colour_counts_names_the_odd_colour():
    # The generator's docstring argues it for 3 colours or more; with 2 the odd one is the colour seen less.
    assert _linear_margin(2) > 0.5
    for colours in (3, 6):
        assert _linear_margin(colours) < 1e-9


def test_a_search_on_a_set_smaller_than_its_default_validation_images_ends_in_one_line(tmp_path: Path, capsys):
    from archdsl.cli import main

    # odd-one-out's search holds out 500 validation images unless told: 300 training images leave none to train on
    out = tmp_path / "runs"
    assert main(["search", "--dataset", "odd-one-out:train=300,test=60", "--out", str(out), "--no-progress"]) != 0
    err = capsys.readouterr().err
    assert "--val-split 500 leaves no training images" in err and "Traceback" not in err
    assert not any(out.rglob("*.journal"))  # refused before a study was made
