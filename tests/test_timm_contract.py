"""timm's model contract on archdsl's models: what timm's own `tests/test_models.py` checks
(run in CI by .ci/timm_contract.py), each piece tested here on small designs."""

from __future__ import annotations

import copy

import pytest
import timm
import torch
from _timm_support import KIND_SPECS, SMALL_SPECS, register_small
from timm.models import get_notrace_functions, get_notrace_modules
from torchvision.models.feature_extraction import create_feature_extractor

from archdsl.errors import UserError
from archdsl.lang.spec import builtin_names, load_spec
from archdsl.nn.build import create_model
from archdsl.nn.timm_cfg import pretrained_cfg
from archdsl.nn.timm_models import timm_name

SMALL = tuple(SMALL_SPECS)


@pytest.fixture(scope="module")
def small_models(tmp_path_factory) -> dict[str, str]:
    return register_small(tmp_path_factory.mktemp("specs"), SMALL, prefix="archdsl_contract")


@pytest.fixture(params=sorted(SMALL))
def small(request, small_models) -> str:
    return small_models[request.param]


def _input(model, batch: int = 2) -> torch.Tensor:
    return torch.randn(batch, *model.pretrained_cfg["input_size"], generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("name", builtin_names())
def test_pretrained_cfg_has_every_field_timm_reads(name: str) -> None:
    arch = load_spec(name)
    cfg = pretrained_cfg(arch)
    for key in ("pool_size", "first_conv", "classifier", "input_size", "crop_pct", "mean", "std", "license"):
        assert key in cfg, key
    assert cfg["num_classes"] == arch.classes and cfg["input_size"][0] == arch.input.channels


def test_pool_size_is_the_grid_forward_features_ends_in(small: str) -> None:
    model = timm.create_model(small).eval()
    with torch.no_grad():
        unpooled = timm.create_model(small, num_classes=0, global_pool="").eval()(_input(model))
    grid = unpooled.shape[2:] if unpooled.ndim == 4 else None
    if grid is None:  # tokens: the grid behind them, after the class token
        assert unpooled.shape[1] - model.arch.prefix_tokens == model.pretrained_cfg["pool_size"][0] ** 2
    else:
        assert tuple(grid) == model.pretrained_cfg["pool_size"]


def test_global_pool_has_timms_meanings(small: str) -> None:
    model = timm.create_model(small).eval()
    x = _input(model)
    with torch.no_grad():
        features = model.forward_features(x)
        pooled = model.forward_head(features, pre_logits=True)
        model.reset_classifier(0)
        assert torch.equal(model(x), pooled)  # no classifier: the pre-logits
        model.reset_classifier(0, "")
        unpooled = model(x)
        for pool in ("avg", "max", "avgmax"):
            model.reset_classifier(0, pool)
            assert model(x).shape == pooled.shape
        model.reset_classifier(0, "max")
        maxed = model(x)
    if unpooled.ndim == 4:  # a map: timm's global_pool='' returns it unpooled (after the head's BN-ReLU)
        assert unpooled.shape[1] == model.num_features and torch.allclose(maxed, unpooled.amax((2, 3)))
    else:  # tokens: every token, normed
        assert unpooled.shape[:2] == features.shape[:2]
        patches = unpooled[:, model.arch.prefix_tokens :]
        assert torch.allclose(maxed, patches.amax(1))
    if model.arch.class_token:
        model.reset_classifier(0, "token")
        with torch.no_grad():
            assert torch.allclose(model(x), pooled)  # the spec's pooling
    else:
        with pytest.raises(ValueError, match="global_pool must be one of"):
            model.reset_classifier(0, "token")
    with pytest.raises(ValueError, match="needs num_classes=0"):
        model.reset_classifier(3, "")
    assert model.num_classes == 0  # a refused reset changes nothing
    with pytest.raises(UserError, match="needs num_classes=0"):
        create_model(model.arch, global_pool="")


def test_create_model_global_pool_and_num_classes_zero_give_the_unpooled_output(small: str) -> None:
    model = timm.create_model(small, num_classes=0, global_pool="").eval()
    reference = timm.create_model(small).eval()
    reference.load_state_dict(model.state_dict(), strict=False)
    x = _input(model)
    with torch.no_grad():
        reference.reset_classifier(0, "")
        assert torch.equal(model(x), reference(x))
    maxed = timm.create_model(small, global_pool="max")
    assert maxed.head.global_pool == "max" and maxed.num_classes == 5


def test_grad_checkpointing_runs_timms_checkpoint_seq_with_equal_outputs_and_gradients(small: str, monkeypatch) -> None:
    model = timm.create_model(small, drop_rate=0.0).train()
    x = _input(model)
    model(x).square().sum().backward()
    expected = {n: p.grad.clone() for n, p in model.named_parameters()}
    with torch.no_grad():
        expected_out = model(x)
    model.zero_grad()
    calls = []
    original = torch.utils.checkpoint.checkpoint
    monkeypatch.setattr(torch.utils.checkpoint, "checkpoint", lambda *a, **k: calls.append(1) or original(*a, **k))
    model.set_grad_checkpointing(True)
    out = model(x)
    out.square().sum().backward()
    assert len(calls) == sum(len(stage) for stage in model.stages.values())  # one per block
    assert torch.allclose(out, expected_out, atol=1e-6)
    for name, parameter in model.named_parameters():
        assert torch.allclose(parameter.grad, expected[name], atol=1e-5), name


def test_a_one_stage_token_model_has_one_feature_per_block_as_timms_vit(small_models) -> None:
    model = timm.create_model(small_models["vit"], seed=0).eval()
    blocks = len(model.stages["s"])
    assert [info["module"] for info in model.feature_info] == [f"stages.s.{i}" for i in range(blocks)]
    x = _input(model)
    with torch.no_grad():
        final, maps = model.forward_intermediates(x)
        assert torch.equal(final, model.forward_features(x))
        assert len(maps) == blocks and all(m.shape == (2, 16, 8, 8) for m in maps)
        two = model.forward_intermediates(x, indices=[1], stop_early=True, intermediates_only=True)
        assert torch.equal(two[0], maps[1])
        pruned = copy.deepcopy(model)
        assert pruned.prune_intermediate_layers([1]) == [1]
        assert len(pruned.stages["s"]) == 2
        assert torch.equal(pruned.forward_intermediates(x, indices=[1], intermediates_only=True)[0], maps[1])
    extractor = timm.create_model(small_models["vit"], seed=0, features_only=True, out_indices=(-1,)).eval()
    with torch.no_grad():
        assert torch.allclose(extractor(x)[0], maps[-1])


def _fx(model: torch.nn.Module) -> torch.nn.Module:
    # What timm's tests/test_models.py traces with: torchvision's extractor, timm's leaf modules
    # and functions kept as single nodes.
    tracer = {"leaf_modules": get_notrace_modules(), "autowrap_functions": get_notrace_functions()}
    return create_feature_extractor(model, return_nodes={"head.fc": "out"}, tracer_kwargs=tracer)


def test_forward_and_backward_trace_with_torch_fx(small: str) -> None:
    model = timm.create_model(small).eval()
    x = _input(model)
    traced = _fx(model)
    with torch.no_grad():
        assert torch.allclose(traced(x)["out"], model(x), atol=1e-5)
    traced = _fx(model.train())
    traced(x)["out"].mean().backward()
    assert all(p.grad is not None for p in traced.parameters())


@pytest.fixture(scope="module")
def every_kind(tmp_path_factory, small_models) -> dict[str, str]:
    """SMALL_SPECS and KIND_SPECS: every block module of archdsl once or more."""
    return {**small_models, **register_small(tmp_path_factory.mktemp("kinds"), KIND_SPECS, prefix="archdsl_contract")}


def _scriptable(name: str, **kwargs) -> torch.nn.Module:
    # As timm's tests/test_models.py makes a model it scripts.
    with timm.set_scriptable(True):
        return timm.create_model(name, **kwargs).eval()


@pytest.mark.parametrize("kind", sorted([*SMALL_SPECS, *KIND_SPECS]))
def test_first_conv_names_the_first_convs_weights(kind: str, every_kind) -> None:
    # timm adapts that weight to another in_chans (before: `stem` for a conv-BN-ReLU stem, which has no weight).
    model = timm.create_model(every_kind[kind])
    first = model.get_submodule(model.pretrained_cfg["first_conv"])
    assert isinstance(first, torch.nn.Conv2d) and first.in_channels == 3


@pytest.mark.parametrize("kind", sorted([*SMALL_SPECS, *KIND_SPECS]))
def test_a_new_classifier_is_made_where_the_models_weights_are(kind: str, every_kind) -> None:
    # timm's default_cfgs test: reset to none, then to 2 classes, on the meta device in float64. A head
    # without norm has no weights of its own once its classifier is gone (`head mean(norm=false)`).
    model = timm.create_model(every_kind[kind]).to(device="meta", dtype=torch.float64)
    model.reset_classifier(0)
    model.reset_classifier(2)
    made = list(model.get_classifier().parameters())
    assert made and all(p.device.type == "meta" and p.dtype == torch.float64 for p in made)


@pytest.mark.parametrize("kind", sorted([*SMALL_SPECS, *KIND_SPECS]))
def test_torchscript_computes_what_eager_computes(kind: str, every_kind) -> None:
    model = _scriptable(every_kind[kind])
    scripted = torch.jit.script(model)
    x = _input(model)
    with torch.no_grad():
        assert torch.equal(scripted(x), model(x))
        assert torch.equal(
            scripted.forward_head(scripted.forward_features(x), True),
            model.forward_head(model.forward_features(x), True),
        )


@pytest.mark.parametrize("kind", sorted([*SMALL_SPECS, *KIND_SPECS]))
def test_the_fx_graph_scripts_too_and_computes_the_same(kind: str, every_kind) -> None:
    # timm's test_model_forward_fx_torchscript: trace with torch.fx, then script the graph.
    model = _scriptable(every_kind[kind])
    scripted = torch.jit.script(_fx(model))
    x = _input(model)
    with torch.no_grad():
        assert torch.equal(scripted(x)["out"], model(x))


IMAGENET_SPECS = [name for name in builtin_names() if load_spec(name).stem.kind == "conv7x7"]


@pytest.mark.parametrize("name", IMAGENET_SPECS)
def test_an_imagenet_spec_scripts_and_its_stem_computes_what_eager_computes(name: str) -> None:
    # timm's test_model_forward_torchscript on the ImageNet stems (7x7 conv, max-pool), with and
    # without BN (before: their forward called `super().forward`, which TorchScript cannot compile).
    # The stem's output only: a ResNet-50's forward at 224x224 takes seconds, and the blocks after
    # the stem are compared scripted and eager on the small designs above.
    model = _scriptable(timm_name(name))
    scripted = torch.jit.script(model)
    x = _input(model, batch=1)
    with torch.no_grad():
        assert torch.equal(scripted.stem(x), model.stem(x))


def test_a_model_without_its_classifier_and_pooling_scripts(every_kind) -> None:
    # What the head computes changes with reset_classifier: the scripted model follows.
    for kind in ("convs", "vit"):
        model = _scriptable(every_kind[kind], num_classes=0, global_pool="")
        x = _input(model)
        with torch.no_grad():
            assert torch.equal(torch.jit.script(model)(x), model(x))


EXPORTED = ["tiny", pytest.param("vit-ti", marks=pytest.mark.slow)]
EXPORTED += [pytest.param(n, marks=pytest.mark.slow) for n in builtin_names() if n not in ("tiny", "vit-ti")]


@pytest.mark.parametrize("name", EXPORTED)
def test_torch_export_of_a_builtin_spec_computes_the_same(name: str) -> None:
    model = create_model(name, seed=0).eval()
    x = torch.randn(2, *model.pretrained_cfg["input_size"])
    exported = torch.export.export(model, (x,))
    with torch.no_grad():
        assert torch.allclose(exported.module()(x), model(x), atol=1e-5)


def test_torch_export_of_small_designs_computes_the_same(small: str) -> None:
    model = timm.create_model(small).eval()
    x = _input(model)
    exported = torch.export.export(model, (x,))
    with torch.no_grad():
        assert torch.allclose(exported.module()(x), model(x), atol=1e-5)


def _onnx_runtime():
    reason = "needs the export extra (onnx, onnxscript, onnxruntime): pip install -e '.[export]'"
    pytest.importorskip("onnx", reason=reason)
    return pytest.importorskip("onnxruntime", reason=reason)


def _onnx_output(model: torch.nn.Module, x: torch.Tensor, path) -> torch.Tensor:
    """`model` exported as `archdsl compile --onnx` does (a dynamic batch), run by onnxruntime on `x`."""
    from archdsl.nn import export_onnx

    export_onnx(model, path, x[:1])
    session = _onnx_runtime().InferenceSession(str(path))
    (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    return torch.from_numpy(got)


@pytest.mark.extras
@pytest.mark.parametrize("kind", sorted([*SMALL_SPECS, *KIND_SPECS]))
def test_onnx_export_computes_the_same(kind: str, every_kind, tmp_path) -> None:
    _onnx_runtime()
    model = timm.create_model(every_kind[kind]).eval()
    x = _input(model, batch=3)  # exported with a batch of one: the batch axis is dynamic
    with torch.no_grad():
        assert torch.allclose(_onnx_output(model, x, tmp_path / "model.onnx"), model(x), atol=1e-5)


@pytest.mark.extras
@pytest.mark.parametrize("name", ["tiny", pytest.param("vit-ti", marks=pytest.mark.slow)])
def test_onnx_export_of_a_builtin_spec_computes_the_same(name: str, tmp_path) -> None:
    _onnx_runtime()
    model = create_model(name, seed=0).eval()
    x = torch.randn(2, *model.pretrained_cfg["input_size"])
    with torch.no_grad():
        assert torch.allclose(_onnx_output(model, x, tmp_path / "model.onnx"), model(x), atol=1e-4)


# -- .ci/timm_contract.py, the runner of timm's own tests (CI fetches timm's file; here a stand-in) --


def _runner():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parent.parent / ".ci" / "timm_contract.py"
    spec = importlib.util.spec_from_file_location("timm_contract", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _timm_stand_in(folder) -> None:
    """In `folder`, a stand-in for timm's tests/: the lines of theirs that the runner adds to."""
    timm_file = "import os\nNON_STD_FILTERS = ['vit_*']\nNUM_NON_STD = len(NON_STD_FILTERS)\n"
    timm_file += "FEAT_INTER_FILTERS = ['resnet']\n# transformer / hybrid models don't support x\n"
    (folder / "tests").mkdir()
    for name, text in {"__init__.py": "", "conftest.py": "import pytest\n", "test_models.py": timm_file}.items():
        (folder / "tests" / name).write_text(text)


def test_the_runner_adds_archdsls_models_to_timms_filters_and_nothing_else(tmp_path) -> None:
    runner = _runner()
    _timm_stand_in(tmp_path)
    tests = runner.prepare(tmp_path, ["archdsl_vit_ti"])
    scope: dict = {}
    exec((tests / "test_models.py").read_text(), scope)
    assert scope["NON_STD_FILTERS"] == ["vit_*", "archdsl_vit_ti"] and scope["NUM_NON_STD"] == 2
    assert scope["FEAT_INTER_FILTERS"] == ["resnet", "timm_models"]
    assert "import archdsl" in (tests / "conftest.py").read_text()
    (tmp_path / "tests" / "test_models.py").write_text("NUM_NON_STD = 0\n")  # another timm: refused clearly
    with pytest.raises(SystemExit, match="update .ci/timm_contract.py"):
        runner.prepare(tmp_path, [])


@pytest.mark.parametrize("worker", ["gw0", None])
def test_the_runners_conftest_gives_each_xdist_worker_one_torch_thread(worker, tmp_path, monkeypatch) -> None:
    _timm_stand_in(tmp_path)
    tests = _runner().prepare(tmp_path, [])
    threads: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", threads.append)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    if worker:
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    else:
        monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    exec((tests / "conftest.py").read_text(), {})
    import os

    assert threads == ([1] if worker else []) and os.environ.get("OMP_NUM_THREADS") == ("1" if worker else None)


def test_ci_runs_timms_tests_on_every_archdsl_model() -> None:
    # Before: .ci/run named five models, so three ImageNet specs failed timm's TorchScript test unseen.
    from pathlib import Path

    script = (Path(__file__).parent.parent / ".ci" / "run").read_text().replace("\\\n", " ")
    calls = [line for line in script.splitlines() if "timm_contract.py" in line and not line.lstrip().startswith("#")]
    assert calls and not any("--models" in call for call in calls)


def test_the_runner_tables_junit_results_per_model(tmp_path) -> None:
    runner = _runner()
    cases = {
        "test_model_forward[1-archdsl_tiny]": "",
        "test_model_forward_torchscript[1-archdsl_tiny]": "<failure message='x'/>",
        "test_model_forward[1-resnet18]": "",
        "test_model_default_cfgs[1-resnet18.a1_in1k]": "<skipped message='y'/>",
    }
    xml = "".join(f'<testcase classname="t" name="{name}">{body}</testcase>' for name, body in cases.items())
    (tmp_path / "junit.xml").write_text(f"<testsuites><testsuite>{xml}</testsuite></testsuites>")
    table = runner.results(tmp_path / "junit.xml")
    assert table["archdsl_tiny"] == {"test_model_forward": "pass", "test_model_forward_torchscript": "fail"}
    assert table["resnet18"]["test_model_default_cfgs"] == "skip"  # the tag is not part of the model
    text = runner.markdown(table, {"archdsl_tiny": "map"}, "1.0")
    assert "| `archdsl_tiny` | map | 1/2 | ok | FAIL | - |" in text
    assert "| `resnet18` | timm map | 1/1 | ok | - | 0/1 |" in text


@pytest.mark.parametrize("name", ["tiny", "vit-ti"])
def test_a_model_pruned_with_its_norm_still_runs_its_head_unnormalised(name: str) -> None:
    # timm's prune_intermediate_layers(prune_norm=True) drops the final norm, not the pooling: the
    # head then pools the last kept features as they are (before: the head was an Identity without
    # a layout, and forward_head raised AttributeError).
    model = create_model(load_spec(name)).eval()
    model.prune_intermediate_layers(indices=1, prune_norm=True, prune_head=True)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        features = model.forward_features(x)
        pooled = model.forward_head(features)
    assert pooled.shape == (2, model.num_features)
    expected = features[:, 0] if name == "vit-ti" else features.mean(dim=(2, 3))  # class token / average
    torch.testing.assert_close(pooled, expected)
