"""Checkpoints (safetensors + IR) and evaluation helpers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from archdsl.data.base import ImageSet
from archdsl.errors import UserError
from archdsl.lang.spec import load_spec
from archdsl.nn.build import build
from archdsl.run.checkpoint import TrainState, load_checkpoint, save_checkpoint
from archdsl.run.evaluate import evaluate, predict_logits


@pytest.fixture(scope="module")
def arch():
    return load_spec("tiny-basic")


def toy_set(n: int = 24, size: int = 16, classes: int = 10) -> ImageSet:
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8)
    return ImageSet("toy", images, np.arange(n, dtype=np.int64) % classes, classes, (0.5,) * 3, (0.25,) * 3)


def trained_a_little(arch):
    # A step of training moves the BN running statistics and weights away from their init,
    # so a round trip that forgot buffers or parameters would show.
    model = build(arch, seed=3)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(8, 3, 16, 16)
    model(x).logsumexp(1).mean().backward()
    optimizer.step()
    return model.eval(), optimizer


def test_round_trip_gives_the_same_logits(arch, tmp_path: Path) -> None:
    model, _ = trained_a_little(arch)
    path = save_checkpoint(tmp_path / "m.safetensors", model, arch, {"dataset": "toy", "epoch": 1})
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]  # no temporary file left behind
    loaded = load_checkpoint(path)
    assert loaded.arch == arch and loaded.meta == {"dataset": "toy", "epoch": 1}
    assert not loaded.model.training
    data = toy_set()
    assert torch.equal(predict_logits(model, data), predict_logits(loaded.model, data))


def test_optimizer_state_round_trips(arch, tmp_path: Path) -> None:
    model, optimizer = trained_a_little(arch)
    state = TrainState.pack({"optimizer": optimizer.state_dict()}, epoch=4)
    save_checkpoint(tmp_path / "last.safetensors", model, arch, {}, train_state=state)
    loaded = load_checkpoint(tmp_path / "last.safetensors", with_train_state=True)
    assert loaded.train_state is not None and loaded.train_state.info["epoch"] == 4
    assert loaded.train_state.has("optimizer") and not loaded.train_state.has("scheduler")
    fresh = torch.optim.AdamW(loaded.model.parameters(), lr=1.0)
    fresh.load_state_dict(loaded.train_state.unpack("optimizer"))
    before, after = optimizer.state_dict(), fresh.state_dict()
    assert after["param_groups"][0]["lr"] == before["param_groups"][0]["lr"]
    assert after["param_groups"][0]["betas"] == before["param_groups"][0]["betas"]
    for key, entry in before["state"].items():
        for name, value in entry.items():
            assert torch.equal(after["state"][key][name], value)
    # The train-state tensors are not mistaken for weights.
    assert load_checkpoint(tmp_path / "last.safetensors").train_state is None


def test_a_training_state_of_the_first_layout_still_resumes(arch, tmp_path: Path) -> None:
    # Before state dicts were encoded generally, only the optimizer was kept: its tensors as
    # `optimizer/<param id>/<name>`, the param groups (tuples turned into lists) and the plain
    # per-parameter values in the JSON. Run directories from then must still resume.
    model, optimizer = trained_a_little(arch)
    before = optimizer.state_dict()
    tensors = {}
    plain: dict = {}
    for param_id, entry in before["state"].items():
        for name, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optimizer/{param_id}/{name}"] = value
            else:
                plain.setdefault(str(param_id), {})[name] = value
    groups = json.loads(json.dumps(before["param_groups"]))  # betas become a list, as JSON made them
    old = TrainState(tensors=tensors, info={"param_groups": groups, "plain_state": plain, "epoch": 2})
    save_checkpoint(tmp_path / "last.safetensors", model, arch, {}, train_state=old)
    loaded = load_checkpoint(tmp_path / "last.safetensors", with_train_state=True).train_state
    assert loaded is not None and loaded.has("optimizer") and not loaded.has("scheduler")
    fresh = torch.optim.AdamW(model.parameters(), lr=1.0)
    fresh.load_state_dict(loaded.unpack("optimizer"))
    after = fresh.state_dict()
    assert after["param_groups"] == before["param_groups"]
    for key, entry in before["state"].items():
        for name, value in entry.items():
            assert torch.equal(after["state"][key][name], value)


def test_truncated_file_is_a_user_error(arch, tmp_path: Path) -> None:
    model, _ = trained_a_little(arch)
    path = save_checkpoint(tmp_path / "m.safetensors", model, arch)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="not a readable safetensors"):
        load_checkpoint(path)
    path.write_bytes(b"garbage, not a checkpoint")
    with pytest.raises(UserError):
        load_checkpoint(path)


def test_foreign_or_mismatched_files_are_user_errors(arch, tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.safetensors"
    save_file({"w": torch.zeros(2)}, str(foreign))
    with pytest.raises(UserError, match="not an archdsl checkpoint"):
        load_checkpoint(foreign)
    with pytest.raises(UserError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "missing.safetensors")
    # Weights that do not fit the stored design (here: the design of another spec).
    model, _ = trained_a_little(arch)
    other = load_spec("tiny")
    wrong = save_checkpoint(tmp_path / "wrong.safetensors", model, other)
    with pytest.raises(UserError, match="do not fit"):
        load_checkpoint(wrong)


def test_checkpoint_metadata_is_plain_json(arch, tmp_path: Path) -> None:
    from safetensors import safe_open

    model, _ = trained_a_little(arch)
    save_checkpoint(tmp_path / "m.safetensors", model, arch, {"test_acc": 0.5}, train_state=TrainState(info={"a": 1}))
    with safe_open(str(tmp_path / "m.safetensors"), "pt") as handle:
        metadata = handle.metadata()
    assert json.loads(metadata["archdsl.ir"])["stem"]["channels"] == arch.stem.channels
    assert json.loads(metadata["archdsl.meta"]) == {"test_acc": 0.5}
    assert json.loads(metadata["archdsl.train_state"]) == {"a": 1}


def test_evaluate_scores_the_logits(arch) -> None:
    model, _ = trained_a_little(arch)
    data = toy_set()
    logits = predict_logits(model, data, batch_size=5)
    assert logits.shape == (24, 10) and logits.dtype == torch.float32
    top1, nll = evaluate(model, data, batch_size=7)
    labels = torch.from_numpy(data.labels)
    assert top1 == pytest.approx((logits.argmax(1) == labels).float().mean().item())
    assert nll == pytest.approx(torch.nn.functional.cross_entropy(logits, labels).item(), rel=1e-5)
    assert model.training is False


# -- hostile checkpoints: the stored design is held to the rules of a spec, before any build --


def _with_design(tmp_path: Path, arch, ir: dict, meta: str = "{}", tensors=None) -> Path:
    """A checkpoint of `arch`'s weights whose stored design is `ir` (edited by a test)."""
    model, _ = trained_a_little(arch)
    path = tmp_path / "hostile.safetensors"
    weights = tensors if tensors is not None else {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(weights, str(path), metadata={"archdsl.format": "1", "archdsl.ir": json.dumps(ir), "archdsl.meta": meta})
    return path


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda ir: ir["stages"][0].update(width=10**9), "needs about .* more than the 16 GiB limit"),
        (lambda ir: ir["input"].update(height=10**30, width=10**30), "input.height is too large"),
        (lambda ir: ir.update(stages=[dict(ir["stages"][0], name=f"s{i}") for i in range(1000)]), "1000 stages"),
        (lambda ir: ir["stages"][0].update(name="../../etc"), "stage name '../../etc' is not a valid name"),
    ],
)
def test_a_stored_design_is_checked_like_a_spec_before_anything_is_built(arch, tmp_path, edit, message) -> None:
    ir = json.loads(arch.model_dump_json())
    edit(ir)
    with pytest.raises(UserError, match=message) as info:
        load_checkpoint(_with_design(tmp_path, arch, ir))
    assert "the checkpoint's design" in str(info.value)


def test_checkpoint_metadata_must_be_an_object(arch, tmp_path: Path) -> None:
    path = _with_design(tmp_path, arch, json.loads(arch.model_dump_json()), meta="[1, 2]")
    with pytest.raises(UserError, match="metadata is a JSON list, not an object"):
        load_checkpoint(path)


def test_checkpoint_metadata_nested_too_deep_is_refused_with_its_depth(arch, tmp_path: Path) -> None:
    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    path = _with_design(tmp_path, arch, json.loads(arch.model_dump_json()), meta=deep)
    with pytest.raises(UserError, match=r"metadata is JSON nested 100,001 levels deep") as refused:
        load_checkpoint(path)
    assert str(path) in str(refused.value)


def test_nan_weights_are_refused_when_loaded(arch, tmp_path: Path, capsys) -> None:
    model, _ = trained_a_little(arch)
    weights = {k: v.contiguous().clone() for k, v in model.state_dict().items()}
    key = next(k for k, v in weights.items() if v.is_floating_point())
    weights[key][...] = float("nan")
    path = _with_design(tmp_path, arch, json.loads(arch.model_dump_json()), tensors=weights)
    with pytest.raises(UserError, match=f"1 weight tensor holds NaN or infinite values: {key}"):
        load_checkpoint(path)
    from archdsl.cli import main

    assert main(["eval", str(path), "--dataset", "synthetic:train=20,test=20", "--no-progress"]) == 1
    assert "NaN or infinite" in capsys.readouterr().err


def test_weights_that_do_not_fit_name_the_keys(arch, tmp_path: Path) -> None:
    model, _ = trained_a_little(arch)
    weights = {k: v.contiguous() for k, v in model.state_dict().items()}
    missing = sorted(weights)[0]
    del weights[missing]
    weights["stages.extra.weight"] = torch.zeros(3)
    shaped = next(k for k, v in sorted(weights.items()) if v.ndim == 4)
    weights[shaped] = torch.zeros(1, 1, 1, 1)
    path = _with_design(tmp_path, arch, json.loads(arch.model_dump_json()), tensors=weights)
    with pytest.raises(UserError, match="do not fit") as info:
        load_checkpoint(path)
    hint = info.value.hint
    assert f"1 missing: {missing}" in hint and "1 unexpected: stages.extra.weight" in hint
    assert f"1 of the wrong shape: {shaped} 1x1x1x1 (expected" in hint


def test_a_stored_design_edited_to_another_of_the_same_shapes_is_refused(tmp_path: Path) -> None:
    # 2 heads of 64 made 1 head of 128: every weight keeps its shape, the network is another one.
    from safetensors import safe_open

    arch = load_spec("tiny")
    model = build(arch, seed=0).eval()
    path = save_checkpoint(tmp_path / "m.safetensors", model, arch, {"epoch": 1})
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata()
        weights = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118
    ir = json.loads(metadata["archdsl.ir"])
    msa = next(b for stage in ir["stages"] for b in stage["blocks"] if b.get("heads") == 2)
    assert msa["dim_head"] == 64
    msa.update(heads=1, dim_head=128)
    edited = tmp_path / "edited.safetensors"
    save_file(weights, str(edited), metadata={**metadata, "archdsl.ir": json.dumps(ir)})
    with pytest.raises(UserError, match="design was changed after it was saved"):  # before: loaded, and evaluated
        load_checkpoint(edited)

    # A checkpoint written before the digest was recorded loads as before.
    old = tmp_path / "old.safetensors"
    save_file(weights, str(old), metadata={k: v for k, v in metadata.items() if k != "archdsl.ir_digest"})
    assert load_checkpoint(old).arch == arch
