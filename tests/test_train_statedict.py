"""Any torch optimizer's and scheduler's state survives tensors + JSON (no pickle): after a
round trip through a safetensors file the restored object carries on exactly as the original."""

from __future__ import annotations

import collections
import inspect
import json
import math

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn
from torch.optim import lr_scheduler

from archdsl.run.statedict import decode, encode

OPTIMIZERS = sorted(
    name
    for name, value in vars(torch.optim).items()
    if inspect.isclass(value) and issubclass(value, torch.optim.Optimizer) and value is not torch.optim.Optimizer
)


def _through_a_file(state, tmp_path):
    """encode -> safetensors file + JSON text -> decode, as a checkpoint stores it."""
    structure, tensors = encode(state, prefix="state/")
    path = tmp_path / "state.safetensors"
    save_file({k: v.detach().clone().contiguous() for k, v in tensors.items()}, str(path))
    # Cloned, as TrainState.unpack does: file tensors sit unaligned, and reductions over them round differently.
    return decode(json.loads(json.dumps(structure)), {k: v.clone() for k, v in load_file(str(path)).items()})


def _assert_same(original, restored, where="state"):
    assert type(restored) is type(original), f"{where}: {type(original).__name__} came back as {type(restored)}"
    if isinstance(original, torch.Tensor):
        assert restored.dtype == original.dtype and restored.shape == original.shape, where
        assert torch.equal(restored, original), where
    elif isinstance(original, dict):
        assert list(restored) == list(original), where
        for key in original:
            _assert_same(original[key], restored[key], f"{where}/{key}")
    elif isinstance(original, (list, tuple)):
        assert len(restored) == len(original), where
        for index, (a, b) in enumerate(zip(original, restored, strict=True)):
            _assert_same(a, b, f"{where}/{index}")
    elif isinstance(original, float) and math.isnan(original):
        assert math.isnan(restored), where
    else:
        assert restored == original, where


def _model_and_groups(name: str):
    """A small model and the parameter groups `name` accepts (two groups where it allows them)."""
    torch.manual_seed(0)
    if name == "SparseAdam":
        model = nn.Embedding(10, 4, sparse=True)
        return model, [{"params": model.parameters()}], lambda: model(torch.arange(6)).square().sum()
    if name == "Muon":  # 2-D parameters only
        model = nn.Sequential(nn.Linear(4, 4, bias=False), nn.Linear(4, 2, bias=False))
    else:
        model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    x = torch.randn(5, 4)
    loss = lambda: model(x).square().mean()  # noqa: E731
    if name == "LBFGS":  # no per-group options
        return model, [{"params": model.parameters()}], loss
    return model, [{"params": model[0].parameters(), "lr": 0.01}, {"params": model[-1].parameters()}], loss


def _step(optimizer, loss):
    def closure():
        optimizer.zero_grad()
        value = loss()
        value.backward()
        return value

    optimizer.step(closure)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_every_torch_optimizer_resumes_exactly(name, tmp_path):
    model, groups, loss = _model_and_groups(name)
    optimizer = getattr(torch.optim, name)(groups, lr=0.05)
    for _ in range(3):
        _step(optimizer, loss)
    state = optimizer.state_dict()
    restored = _through_a_file(state, tmp_path)
    _assert_same(state, restored)

    twin_model, twin_groups, _ = _model_and_groups(name)
    twin_model.load_state_dict(model.state_dict())
    twin = getattr(torch.optim, name)(twin_groups, lr=123.0)  # every value must come from the state
    twin.load_state_dict(restored)
    _step(optimizer, lambda: _loss_of(model, name))
    _step(twin, lambda: _loss_of(twin_model, name))
    for a, b in zip(model.parameters(), twin_model.parameters(), strict=True):
        assert torch.equal(a, b), f"{name} did not carry on identically after the round trip"


def _loss_of(model, name):
    torch.manual_seed(1)
    if name == "SparseAdam":
        return model(torch.arange(6)).square().sum()
    return model(torch.randn(5, 4)).square().mean()


def _schedulers(optimizer):
    yield "StepLR", lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    yield "MultiStepLR", lr_scheduler.MultiStepLR(optimizer, milestones=[2, 4, 4], gamma=0.5)  # a Counter
    yield "ExponentialLR", lr_scheduler.ExponentialLR(optimizer, gamma=0.9)
    yield "CosineAnnealingWarmRestarts", lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=3)
    yield "OneCycleLR", lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=20)
    yield "CyclicLR", lr_scheduler.CyclicLR(optimizer, base_lr=0.01, max_lr=0.1, step_size_up=3)
    yield "ReduceLROnPlateau", lr_scheduler.ReduceLROnPlateau(optimizer, patience=1)  # best = inf
    yield (
        "SequentialLR",
        lr_scheduler.SequentialLR(
            optimizer,
            [lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=3), lr_scheduler.PolynomialLR(optimizer)],
            milestones=[3],
        ),
    )


SCHEDULERS = [name for name, _ in _schedulers(torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1, momentum=0.9))]


def _run(scheduler, steps: int) -> list[float]:
    lrs = []
    for step in range(steps):
        scheduler.optimizer.step()
        if isinstance(scheduler, lr_scheduler.ReduceLROnPlateau):
            scheduler.step(1.0 + (step % 2))  # no improvement: the plateau rule fires
        else:
            scheduler.step()
        lrs.append(scheduler.optimizer.param_groups[0]["lr"])
    return lrs


@pytest.mark.parametrize("name", SCHEDULERS)
def test_every_kind_of_torch_scheduler_resumes_exactly(name, tmp_path):
    def make():
        optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1, momentum=0.9)
        return dict(_schedulers(optimizer))[name]

    original = make()
    _run(original, 4)
    state = original.state_dict()
    restored_state = _through_a_file(state, tmp_path)
    _assert_same(state, restored_state)
    twin = make()
    twin.optimizer.load_state_dict(original.optimizer.state_dict())
    twin.load_state_dict(restored_state)
    assert _run(twin, 6) == _run(original, 6)


def test_values_json_cannot_hold_come_back_as_they_were(tmp_path):
    state = {
        "betas": (0.9, 0.999),
        "best": math.inf,
        "worst": -math.inf,
        "undefined": math.nan,
        "by_id": {0: torch.ones(2), 1: {"step": torch.tensor(3.0)}},
        "milestones": collections.Counter({2: 1, 4: 2}),
        "$tensor": "a key that looks like a tag",
        "nested": [[torch.zeros(1, 2)], (None, True, "text", 7)],
    }
    _assert_same(state, _through_a_file(state, tmp_path))


def test_a_value_that_needs_pickle_is_refused_with_its_path():
    with pytest.raises(TypeError, match="cannot store a function at param_groups/0/rule"):
        encode({"param_groups": [{"rule": lambda epoch: 1.0}]})
