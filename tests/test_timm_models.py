"""archdsl's specs as timm models: the registry, timm's keywords, heads, features and fine-tuning."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import timm
import torch
import torch.nn.functional as F
from _timm_support import SMALL_SPECS, register_small

import archdsl
from archdsl.errors import UserError
from archdsl.lang.spec import builtin_names, load_spec
from archdsl.nn.build import ArchNet, create_model
from archdsl.nn.timm_models import register_timm, timm_name
from archdsl.run.checkpoint import save_checkpoint

SMALL = ("convs", "vit", "swin")


@pytest.fixture(scope="module")
def small_models(tmp_path_factory) -> dict[str, str]:
    return register_small(tmp_path_factory.mktemp("specs"), SMALL, prefix="archdsl")


@pytest.fixture(params=sorted(SMALL))
def small(request, small_models) -> str:
    return small_models[request.param]


# The paper's models at full size take seconds each on a CPU: two of them in the quick suite.
PAPER_MODELS = [
    "alter50",
    "vit-ti",
    pytest.param("pit-ti", marks=pytest.mark.slow),
    pytest.param("swin-ti", marks=pytest.mark.slow),
]


def test_every_builtin_spec_is_a_timm_model_with_the_prefix() -> None:
    listed = timm.list_models("archdsl_*")
    # Every built-in, each once; other tests in this process may have registered specs of their own.
    builtins = [timm_name(name) for name in builtin_names()]
    assert len(set(builtins)) == len(builtins) and set(builtins) <= set(listed)
    assert "archdsl_alter50" in listed and "archdsl_vit_ti" in listed  # `-` is written `_`
    assert "resnet50" in timm.list_models("resnet50")  # timm's own, untouched by archdsl_resnet50


@pytest.mark.parametrize("name", PAPER_MODELS)
def test_timm_create_model_builds_the_spec_with_another_head(name: str) -> None:
    model = timm.create_model(timm_name(name), num_classes=10)
    arch = load_spec(name)
    assert isinstance(model, ArchNet)
    assert model.arch == arch.model_copy(update={"classes": 10})
    assert model.num_classes == 10 and model.get_classifier().out_features == 10
    assert model.pretrained_cfg["architecture"] == timm_name(name)
    assert model.pretrained_cfg["input_size"] == (3, 32, 32)
    with torch.no_grad():
        assert model.eval()(torch.randn(1, 3, 32, 32)).shape == (1, 10)


def test_in_chans_drop_path_rate_and_drop_rate_work_as_in_timm(small: str) -> None:
    model = timm.create_model(small, in_chans=1, drop_path_rate=0.2, drop_rate=0.3)
    assert model.in_chans == 1 and model.arch.input.channels == 1
    rates = [getattr(getattr(block, "drop_path", None), "drop_prob", 0.0) for _, block in model.named_blocks()]
    assert rates[0] == 0.0 and rates[-1] == pytest.approx(0.2)
    assert model.head.drop.p == 0.3
    with torch.no_grad():
        assert model.eval()(torch.randn(2, 1, 16, 16)).shape == (2, 5)


def test_forward_is_forward_head_of_forward_features(small: str) -> None:
    model = timm.create_model(small).eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        logits = model(x)
        features = model.forward_features(x)
        assert torch.allclose(model.forward_head(features), logits)
        pooled = model.forward_head(features, pre_logits=True)
    assert pooled.shape == (2, model.num_features)
    assert torch.allclose(model.get_classifier()(pooled), logits, atol=1e-6)


def test_reset_classifier_for_fine_tuning_and_for_features(small: str) -> None:
    model = timm.create_model(small).eval()
    body = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith("head.fc")}
    assert model.get_classifier(name_only=True) == "head.fc"
    model.reset_classifier(3)
    assert model.num_classes == 3 and model.arch.classes == 3
    assert all(torch.equal(model.state_dict()[k], v) for k, v in body.items())  # only the classifier is new
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert model(x).shape == (2, 3)
        model.reset_classifier(0)  # no classifier: the pooled features
        assert model(x).shape == (2, model.num_features)
    with pytest.raises(ValueError, match="global_pool must be one of"):
        model.reset_classifier(3, global_pool="median")


def test_num_classes_zero_gives_pooled_features() -> None:
    model = timm.create_model("archdsl_tiny", num_classes=0).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, 32, 32)).shape == (1, model.num_features)


@pytest.mark.parametrize("name", ["alter18", *SMALL, pytest.param("pit-ti", marks=pytest.mark.slow)])
def test_features_only_returns_the_stem_and_stage_maps_or_block_maps(name: str, small_models) -> None:
    model_name = small_models.get(name) or timm_name(name)
    extractor = timm.create_model(model_name, features_only=True).eval()
    arch = extractor.model.arch
    side = arch.input.height
    with torch.no_grad():
        maps = extractor(torch.randn(2, 3, side, side))
    info = extractor.feature_info
    # The stem and each stage; every block in a model of one stage (as timm's ViT).
    one_stage = len(arch.stages) == 1
    assert len(maps) == (len(arch.stages[0].blocks) if one_stage else 1 + len(arch.stages))
    for fmap, channels, reduction in zip(maps, info.channels(), info.reduction(), strict=True):
        assert fmap.ndim == 4 and fmap.shape[:2] == (2, channels)
        assert fmap.shape[2] in (side // reduction, side - 1)  # PiT's stride-1 2x2 patch stem loses a row


def test_features_only_with_out_indices_prunes_the_later_stages() -> None:
    extractor = timm.create_model("archdsl_alter18", features_only=True, out_indices=(1, 2)).eval()
    with torch.no_grad():
        maps = extractor(torch.randn(1, 3, 32, 32))
    assert [tuple(m.shape[1:]) for m in maps] == [(64, 32, 32), (128, 16, 16)]
    assert list(extractor.model.stages) == ["c1", "c2"]  # c3, c4 are not run


def test_token_stages_become_maps_without_the_class_token(small: str) -> None:
    model = timm.create_model(small).eval()
    x = torch.randn(1, 3, 16, 16)
    with torch.no_grad():
        final, maps = model.forward_intermediates(x)
        nhwc = model.forward_intermediates(x, indices=1, output_fmt="NHWC", intermediates_only=True)
        features = model.forward_features(x)
    assert torch.equal(final, features)
    assert torch.equal(nhwc[0], maps[-1].permute(0, 2, 3, 1))
    last = model.feature_info[-1]
    assert maps[-1].shape == (1, last["num_chs"], 16 // last["reduction"], 16 // last["reduction"])


def test_fine_tuning_from_an_archdsl_checkpoint_the_timm_way(tmp_path: Path) -> None:
    trained = create_model("tiny", seed=3)
    path = tmp_path / "final.safetensors"
    save_checkpoint(path, trained, trained.arch, {})
    # timm's own route: a weights file as the pretrained source; a new head for 5 classes.
    model = timm.create_model(
        "archdsl_tiny", pretrained=True, pretrained_cfg_overlay={"file": str(path)}, num_classes=5
    )
    assert torch.equal(model.stem.weight, trained.stem.weight)
    assert model.get_classifier().out_features == 5
    same = timm.create_model("archdsl_tiny", checkpoint_path=str(path))
    trained_state = trained.state_dict()
    assert all(torch.equal(value, trained_state[key]) for key, value in same.state_dict().items())


def test_a_reference_checkpoint_loads_the_timm_way_through_the_importer(tmp_path: Path) -> None:
    from archdsl.nn.convert.reference import reference_layout

    trained = create_model("tiny", seed=3)
    ours = trained.state_dict()
    theirs = {key: ours[part.key].reshape(part.reference_shape) for key, part in reference_layout(trained.arch).items()}
    path = tmp_path / "alternet_tiny.pth.tar"  # as the reference implementation saves its models
    torch.save({"name": "alternet_tiny", "state_dict": theirs}, path)
    model = timm.create_model("archdsl_tiny", pretrained=True, pretrained_cfg_overlay={"file": str(path)})
    assert all(torch.equal(value, ours[key]) for key, value in model.state_dict().items())
    fine_tune = timm.create_model(
        "archdsl_tiny", pretrained=True, pretrained_cfg_overlay={"file": str(path)}, num_classes=5
    )
    assert torch.equal(fine_tune.stem.weight, trained.stem.weight) and fine_tune.num_classes == 5
    torch.save({"state_dict": {"conv.weight": torch.zeros(1)}}, tmp_path / "other.pth.tar")
    with pytest.raises(UserError, match="no known layout"):
        timm.create_model(
            "archdsl_tiny", pretrained=True, pretrained_cfg_overlay={"file": str(tmp_path / "other.pth.tar")}
        )


def test_what_timm_train_script_does_works() -> None:
    from timm.data import Mixup, resolve_data_config
    from timm.loss import SoftTargetCrossEntropy
    from timm.optim import create_optimizer_v2

    # timm's train.py: create_model with its flags (None values are dropped by timm), then the data config.
    model = timm.create_model(
        "archdsl_tiny",
        pretrained=False,
        in_chans=None,
        num_classes=10,
        drop_rate=0.0,
        drop_path_rate=0.1,
        drop_block_rate=None,
        global_pool=None,
        bn_momentum=None,
        bn_eps=None,
        scriptable=False,
        checkpoint_path=None,
    )
    config = resolve_data_config({}, model=model)
    assert config["input_size"] == (3, 32, 32) and config["crop_pct"] == 1.0
    optimizer = create_optimizer_v2(model, opt="adamw", lr=1e-3, weight_decay=0.05)
    mixup = Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, num_classes=model.num_classes)
    images, labels = mixup(torch.randn(4, *config["input_size"]), torch.arange(4))
    loss = SoftTargetCrossEntropy()(model.train()(images), labels)
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss)


def test_register_timm_takes_a_users_spec(tmp_path: Path) -> None:
    path = tmp_path / "mine.arch"
    path.write_text(SMALL_SPECS["convs"].replace("arch convs", "arch my-net"))
    assert archdsl.register_timm(str(path)) == "archdsl_my_net"
    assert "archdsl_my_net" in timm.list_models("archdsl_my*")
    assert timm.create_model("archdsl_my_net").arch.name == "my-net"
    assert register_timm(load_spec("tiny"), name="tiny_for_me") == "tiny_for_me"
    assert timm.create_model("tiny_for_me").arch == load_spec("tiny")
    with pytest.raises(UserError, match="bad timm model name"):
        register_timm("tiny", name="tiny.v2")


def test_archdsl_create_model_takes_timms_keywords() -> None:
    model = archdsl.create_model("tiny", num_classes=3, in_chans=1, drop_path_rate=0.1, drop_rate=0.1, seed=0)
    assert (model.arch.classes, model.arch.input.channels, model.num_classes) == (3, 1, 3)
    assert model.arch.digest() != load_spec("tiny").digest()  # another design: another id
    loss = F.cross_entropy(model.train()(torch.randn(2, 1, 32, 32)), torch.tensor([0, 2]))
    assert torch.isfinite(loss)
    for bad in ({"num_classes": -1}, {"in_chans": 0}, {"img_size": (32, 32, 3)}, {"drop_path_rate": 1.5}):
        with pytest.raises(UserError):
            archdsl.create_model("tiny", **bad)


def test_dir_of_archdsl_is_the_curated_api() -> None:
    assert dir(archdsl) == sorted(archdsl.__all__)
    assert "register_timm" in dir(archdsl) and "nn" not in dir(archdsl) and "importlib" not in dir(archdsl)


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


def test_import_archdsl_stays_light_until_timm_is_used() -> None:
    done = _run(
        """
        import sys
        import archdsl
        archdsl.load_spec("alter50")
        print(sorted(m for m in ("torch", "timm", "optuna", "matplotlib") if m in sys.modules))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_import_archdsl_registers_the_specs_where_timm_is_imported() -> None:
    # timm's convention: the module that defines the models registers them as it is imported, here by
    # `import archdsl` because timm is already loaded; no import hook is left behind.
    done = _run(
        """
        import sys
        import timm
        import archdsl
        assert "archdsl.nn.timm_models" in sys.modules
        assert type(timm.__loader__).__name__ == "SourceFileLoader"  # timm keeps its own loader
        print(timm.create_model("archdsl_alter50", num_classes=10).num_classes)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "10"


@pytest.mark.slow
def test_importing_the_timm_module_registers_the_specs_after_archdsl() -> None:
    done = _run(
        """
        import sys
        import archdsl
        assert "timm" not in sys.modules
        import archdsl.nn.timm_models
        import timm
        assert not any("archdsl" in type(finder).__module__ for finder in sys.meta_path)
        print(timm.create_model("archdsl_alter50", num_classes=10).num_classes)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "10"
