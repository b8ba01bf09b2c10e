"""optimize_model computes the model's function: outputs and gradients agree with the eager model."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from archdsl.lang.spec import builtin_names
from archdsl.nn.build import create_model
from archdsl.run.optimize import (
    InferenceModel,
    applied_plan,
    can_compile,
    fold_batchnorms,
    micro_batch_size,
    optimize_model,
    plan_for,
)

# Specs whose float64 forward and backward take more than a second on two cores.
LARGE = {
    *("alter50", "alter50-base", "alter50-code", "resnet50", "swinlike50", "swin-ti", "vit-ti", "pit-ti"),
    *("alter18", "resnet18"),  # a few seconds each on two busy cores
    *("resnet50-imagenet", "resnet50-post-imagenet", "alter50-imagenet"),  # 224x224 inputs
}


def with_statistics(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Non-trivial BN statistics and affine parameters, so that folding them is tested."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-1, 1, generator=generator)
                module.running_var.uniform_(0.5, 2, generator=generator)
                module.weight.uniform_(0.5, 1.5, generator=generator)
                module.bias.uniform_(-0.5, 0.5, generator=generator)
    return model


def spec_params() -> list:
    return [pytest.param(name, marks=pytest.mark.slow) if name in LARGE else name for name in builtin_names()]


@pytest.mark.parametrize("name", spec_params())
def test_inference_copy_has_the_outputs_and_input_gradients_of_the_eager_model(name: str) -> None:
    model = with_statistics(create_model(name, seed=0).double()).eval()
    fast = optimize_model(model, training=False)
    assert isinstance(fast, InferenceModel) and fast.optimize_plan.channels_last
    shape = model.arch.input
    x = torch.randn(3, shape.channels, shape.height, shape.width, dtype=torch.float64, requires_grad=True)
    eager = model(x)
    (eager_grad,) = torch.autograd.grad(eager.square().sum(), x)
    optimized = fast(x)
    (optimized_grad,) = torch.autograd.grad(optimized.square().sum(), x)
    assert torch.allclose(optimized, eager, rtol=1e-10, atol=1e-10 * eager.abs().max().item())
    assert torch.allclose(optimized_grad, eager_grad, rtol=1e-9, atol=1e-9 * eager_grad.abs().max().item())


@pytest.mark.parametrize("name", ["tiny", "alter-small-base", pytest.param("swinlike50", marks=pytest.mark.slow)])
def test_training_version_is_the_same_module_with_the_same_loss_and_parameter_gradients(name: str) -> None:
    reference = create_model(name, seed=0).double().train()
    model = create_model(name, seed=0).double().train()
    keys = list(model.state_dict())
    params = list(model.parameters())
    fast = optimize_model(model, training=True)
    assert fast is model and list(fast.state_dict()) == keys  # what users save keeps its names
    plan = applied_plan(fast)
    assert plan is not None and plan.channels_last and not plan.fold_batchnorm
    assert applied_plan(reference) is None
    assert all(a is b for a, b in zip(fast.parameters(), params, strict=True))  # optimizers stay valid
    x = torch.randn(4, 3, 32, 32, dtype=torch.float64)
    y = torch.randint(0, model.num_classes, (4,))
    F.cross_entropy(reference(x), y).backward()
    loss = F.cross_entropy(fast(x), y)
    loss.backward()
    assert loss.item() == pytest.approx(F.cross_entropy(reference(x), y).item(), rel=1e-12)
    for (key, expected), actual in zip(reference.named_parameters(), fast.parameters(), strict=True):
        assert torch.allclose(actual.grad, expected.grad, rtol=1e-9, atol=1e-12), key


def test_inference_copy_leaves_the_model_as_it_was() -> None:
    model = create_model("tiny", seed=0).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fast = optimize_model(model, training=False)
    assert model.training and not fast.training
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(not p.requires_grad for p in fast.parameters())
    # The copy stands in for the model: attributes and submodules are the wrapped model's.
    assert fast.num_classes == model.num_classes and fast.arch == model.arch
    assert fast.get_submodule("stages.c3.1").kind == "msa"


def test_batchnorms_that_read_one_conv_fold_and_the_others_stay() -> None:
    model = create_model("tiny", seed=0).eval()
    # tiny: 4 bottlenecks (2 foldable BNs each) and 3 MSA blocks (1 each); the first BN of a
    # block reads the residual stream (which the shortcut reads too) and stays.
    assert fold_batchnorms(model) == 4 * 2 + 3
    kept = [n for n, m in model.named_modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert all(n.endswith("norm1") or n == "head.norm" for n in kept)


def test_micro_batches_give_every_image_the_result_of_one_whole_batch() -> None:
    model = with_statistics(create_model("tiny", seed=0)).eval()
    fast = optimize_model(model, training=False)
    x = torch.randn(70, 3, 32, 32)  # more than one micro-batch, the last one short
    with torch.inference_mode():
        whole = model(x)
        pieces = fast(x)
    assert fast.pieces is not None and fast.pieces < len(x)
    assert torch.allclose(pieces, whole, atol=1e-4)


def test_micro_batch_size_keeps_activations_near_the_budget() -> None:
    assert micro_batch_size(1) == 64  # tiny maps: the upper bound
    assert micro_batch_size(2**20) == 16  # 1 MiB per image: the lower bound
    assert micro_batch_size(2**18) == 64  # 256 KiB x 64 = 16 MiB


def test_compile_only_where_it_pays_and_never_by_default_for_short_runs() -> None:
    assert not plan_for("cpu", training=False, images=1000).compile
    assert not plan_for("cpu", training=False).compile  # unknown: few
    assert not plan_for("cpu", training=True, images=10**7).compile  # training on a CPU gains ~3 %
    assert plan_for("cpu", training=False, images=10**6).compile == can_compile(torch.device("cpu"))
    assert not plan_for("cpu", training=False, images=10**6, compile=False).compile
    assert plan_for("cpu", training=True, channels_last=False).channels_last is False


def test_hessian_vector_products_work_through_a_training_version() -> None:
    from archdsl.analysis.hessian import top_eigenvalues

    torch.manual_seed(0)
    x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    plain = top_eigenvalues(create_model("tiny", seed=0), x, y, k=2, tol=1e-6, max_iter=60)
    fast = optimize_model(create_model("tiny", seed=0), training=True)
    optimized = top_eigenvalues(fast, x, y, k=2, tol=1e-6, max_iter=60)
    assert optimized.eigenvalues == pytest.approx(plain.eigenvalues, rel=1e-4)


@pytest.mark.slow
@pytest.mark.skipif(not can_compile(torch.device("cpu")), reason="torch.compile needs a C++ compiler on the CPU")
def test_a_compiled_inference_copy_computes_the_same_for_full_and_short_batches() -> None:
    model = with_statistics(create_model("tiny-basic", seed=0)).eval()
    fast = optimize_model(model, training=False, compile=True)
    x = torch.randn(40, 3, 32, 32)
    with torch.inference_mode():
        reference = model(x)
        first = fast(x)
        again = fast(x[:7])  # a short batch is padded to the compiled shape
    assert torch.allclose(first, reference, atol=1e-4)
    assert torch.allclose(again, reference[:7], atol=1e-4)
