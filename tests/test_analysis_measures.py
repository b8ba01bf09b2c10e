"""Reference tests of the paper's other measures: CKA, loss landscape, lesion, NLL on augmented training data."""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _micro_arch import micro_arch
from torch import nn

from archdsl.analysis.cka import gram, hsic_biased, hsic_unbiased, linear_cka, minibatch_cka
from archdsl.analysis.landscape import filter_normalised_direction, grid, loss_landscape
from archdsl.analysis.lesion import lesion_study, residual_blocks, without_residual_branch
from archdsl.analysis.metrics import augmented_training_nll
from archdsl.data.base import ImageSet
from archdsl.lang.spec import parse_spec
from archdsl.nn.build import build
from archdsl.run.recipe import TrainConfig

MICRO = micro_arch(
    "c1(width=4) { conv }",
    "c2(width=8, stride=2) { conv msa(heads=1, window=4, dim_head=4) }",
    size=16,
    stem=4,
    classes=4,
)


def micro_model(seed: int = 0) -> nn.Module:
    return build(parse_spec(MICRO), seed=seed).eval()


def images(n: int, seed: int = 0, shape=(3, 16, 16)) -> torch.Tensor:
    return torch.randn(n, *shape, generator=torch.Generator().manual_seed(seed))


def image_set(n: int = 40, classes: int = 4, seed: int = 0, size: int = 16) -> ImageSet:
    rng = np.random.default_rng(seed)
    return ImageSet(
        name="toy",
        images=rng.integers(0, 256, size=(n, size, size, 3), dtype=np.uint8),
        labels=np.arange(n, dtype=np.int64) % classes,
        num_classes=classes,
        mean=(0.5, 0.5, 0.5),
        std=(0.25, 0.25, 0.25),
    )


# --------------------------------------------------------------------------- CKA


def hsic_u_statistic(k: torch.Tensor, l: torch.Tensor) -> float:  # noqa: E741
    """Song et al.'s unbiased HSIC as its defining U-statistic: the mean over ordered 4-tuples of
    distinct indices of h = 1/24 sum over their permutations (t,u,v,w) of k_tu l_tu + k_tu l_vw - 2 k_tu l_tv."""
    n = len(k)
    total, tuples = 0.0, 0
    for quad in itertools.permutations(range(n), 4):
        h = 0.0
        for t, u, v, w in itertools.permutations(quad):
            h += float(k[t, u] * l[t, u] + k[t, u] * l[v, w] - 2 * k[t, u] * l[t, v])
        total += h / 24
        tuples += 1
    return total / tuples


def test_unbiased_hsic_equals_its_u_statistic():
    x, y = torch.randn(6, 5, dtype=torch.float64), torch.randn(6, 3, dtype=torch.float64)
    k, l = gram(x), gram(y)  # noqa: E741
    assert hsic_unbiased(k, l) == pytest.approx(hsic_u_statistic(k, l), rel=1e-9)


def test_biased_cka_equals_the_closed_form_of_linear_cka():
    x, y = torch.randn(10, 7, dtype=torch.float64), torch.randn(10, 4, dtype=torch.float64)
    xc, yc = x - x.mean(0), y - y.mean(0)
    closed = (yc.T @ xc).norm() ** 2 / ((xc.T @ xc).norm() * (yc.T @ yc).norm())
    assert linear_cka(x, y, unbiased=False) == pytest.approx(float(closed), rel=1e-10)
    assert hsic_biased(gram(x), gram(y)) > 0


@pytest.mark.parametrize("unbiased", [True, False])
def test_cka_is_invariant_to_orthogonal_transforms_and_isotropic_scaling(unbiased):
    x, y = torch.randn(12, 6, dtype=torch.float64), torch.randn(12, 5, dtype=torch.float64)
    q, _ = torch.linalg.qr(torch.randn(6, 6, dtype=torch.float64))
    assert linear_cka(x, 3.7 * x @ q, unbiased=unbiased) == pytest.approx(1.0, abs=1e-10)
    r, _ = torch.linalg.qr(torch.randn(5, 5, dtype=torch.float64))
    assert linear_cka(x, 0.2 * y @ r, unbiased=unbiased) == pytest.approx(linear_cka(x, y, unbiased=unbiased), 1e-10)
    # ... but not to an arbitrary linear map: CKA measures something.
    a = torch.diag(torch.tensor([10.0, 1, 1, 1, 1, 0.1], dtype=torch.float64))
    assert abs(linear_cka(x, x @ a, unbiased=unbiased) - 1) > 1e-3


def test_minibatch_cka_of_a_model_accumulates_hsic_over_batches():
    model = micro_model()
    x = images(16)
    result = minibatch_cka(model, x, batch_size=8)
    names = [layer.name for layer in result.layers]
    assert names == ["stem", "stages.c1.0", "stages.c2.0", "stages.c2.1"]
    assert [layer.kind for layer in result.layers] == ["stem", "conv", "conv", "msa"]
    matrix = np.array(result.matrix)
    np.testing.assert_allclose(matrix, matrix.T)
    np.testing.assert_allclose(np.diag(matrix), 1.0)
    # By hand: outputs of two layers per batch, the unbiased HSIC terms summed, then the ratio.
    outputs = {}
    hooks = [
        model.get_submodule(n).register_forward_hook(lambda m, a, o, n=n: outputs.__setitem__(n, o)) for n in names
    ]
    terms = np.zeros(3)
    with torch.no_grad():
        for batch in (x[:8], x[8:]):
            model(batch)
            k, l = gram(outputs["stem"]), gram(outputs["stages.c2.1"])  # noqa: E741
            terms += [hsic_unbiased(k, l), hsic_unbiased(k, k), hsic_unbiased(l, l)]
    for hook in hooks:
        hook.remove()
    assert result.value("stem", "stages.c2.1") == pytest.approx(terms[0] / math.sqrt(terms[1] * terms[2]), rel=1e-9)
    assert (result.batches, result.images) == (2, 16)
    # A last, incomplete batch is left out: every batch weighs the same.
    assert minibatch_cka(model, torch.cat([x, images(5)]), batch_size=8).matrix == result.matrix
    with pytest.raises(ValueError, match="make no batch"):
        minibatch_cka(model, x[:7], batch_size=8)


def test_minibatch_cka_needs_batches_of_four():
    with pytest.raises(ValueError, match="at least 4"):
        minibatch_cka(micro_model(), images(8), batch_size=3)


# --------------------------------------------------------------------------- loss landscape


def test_filter_normalised_directions_have_the_weights_filter_norms_and_skip_1d_tensors():
    model = micro_model()
    params = list(model.parameters())
    direction = filter_normalised_direction(params, torch.Generator().manual_seed(0))
    assert any(p.ndim <= 1 for p in params)
    for p, d in zip(params, direction, strict=True):
        if p.ndim <= 1:  # BatchNorm scales and shifts, biases
            assert not d.any()
        else:
            torch.testing.assert_close(d.reshape(len(d), -1).norm(dim=1), p.reshape(len(p), -1).norm(dim=1))


class Quadratic(nn.Module):
    """A linear map: with a squared error, the loss is a quadratic polynomial of the weights."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(2, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight.T


def squared_error(model, x, y):
    return ((model(x) - y) ** 2).mean()


@pytest.mark.parametrize("dims", [1, 2])
def test_the_landscape_of_a_quadratic_model_is_its_polynomial(dims):
    model = Quadratic()
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(8, 3, dtype=torch.float64, generator=g), torch.randn(8, 2, dtype=torch.float64, generator=g)
    wd = 0.1
    result = loss_landscape(model, [(x, y)], dims=dims, points=5, span=2.0, weight_decay=wd, loss_fn=squared_error)
    w = model.weight.detach()
    generator = torch.Generator().manual_seed(0)
    d = filter_normalised_direction([w], generator)[0]
    e = filter_normalised_direction([w], generator)[0] if dims == 2 else torch.zeros_like(w)

    def analytic(a: float, b: float) -> float:
        # r + a X d^T + b X e^T, squared and averaged; plus wd/2 ||w + a d + b e||^2, expanded by hand.
        r, p, q = x @ w.T - y, x @ d.T, x @ e.T
        data = (r**2).mean() + 2 * a * (r * p).mean() + 2 * b * (r * q).mean()
        data += a * a * (p**2).mean() + b * b * (q**2).mean() + 2 * a * b * (p * q).mean()
        norm = (w * w).sum() + 2 * a * (w * d).sum() + 2 * b * (w * e).sum()
        norm += a * a * (d * d).sum() + b * b * (e * e).sum() + 2 * a * b * (d * e).sum()
        return float(data + 0.5 * wd * norm)

    assert result.coordinates == (-2.0, -1.0, 0.0, 1.0, 2.0)
    if dims == 1:
        expected = [analytic(a, 0.0) for a in result.coordinates]
        np.testing.assert_allclose(result.losses, expected, rtol=1e-10)
    else:
        expected = [[analytic(a, b) for b in result.coordinates] for a in result.coordinates]
        np.testing.assert_allclose(np.array(result.losses), expected, rtol=1e-10)
    assert result.center == pytest.approx(analytic(0.0, 0.0), rel=1e-12)
    torch.testing.assert_close(model.weight.detach(), w)  # put back


def test_the_landscape_centre_is_the_models_loss_at_its_weights_and_the_weights_come_back():
    model = micro_model()
    before = copy.deepcopy(model.state_dict())
    x, y = images(8), torch.arange(8) % 4
    result = loss_landscape(model, [(x, y)], points=3, weight_decay=0.05)
    with torch.no_grad():
        expected = F.cross_entropy(model(x), y).item()
    expected += 0.5 * 0.05 * sum(float(p.detach().double().pow(2).sum()) for p in model.parameters())
    assert result.center == pytest.approx(expected, rel=1e-6)
    assert result.losses[1] == result.center
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_a_landscape_grid_holds_zero():
    assert grid(1.0, 5) == [-1.0, -0.5, 0.0, 0.5, 1.0]
    with pytest.raises(ValueError, match="odd"):
        grid(1.0, 4)


# --------------------------------------------------------------------------- lesion


def zero_last_layer_of_branch(block: nn.Module) -> None:
    """The residual branch's output is zero when its last layer's weights (and bias) are."""
    last = {
        "conv": lambda b: getattr(b, f"conv{b.n_units}"),
        "msa": lambda b: b.attn.proj,
        "attn": lambda b: b.attn.proj,
        "mlp": lambda b: b.mlp.fc2,
    }[block.kind](block)
    with torch.no_grad():
        last.weight.zero_()
        if last.bias is not None:
            last.bias.zero_()


def test_a_lesion_equals_zeroing_the_residual_branchs_output():
    model = micro_model()
    x = images(4)
    for name, *_ in residual_blocks(model):
        copied = copy.deepcopy(model)
        zero_last_layer_of_branch(copied.get_submodule(name))
        with torch.no_grad(), without_residual_branch(model.get_submodule(name)):
            lesioned = model(x)
        torch.testing.assert_close(lesioned, copied(x).detach(), rtol=0, atol=1e-6)
    with torch.no_grad():
        assert not torch.allclose(model(x), lesioned)  # the hook is gone


def test_without_its_branch_an_identity_block_passes_its_input_on():
    model = micro_model()
    block = model.get_submodule("stages.c2.1")  # an MSA block with an identity shortcut
    x = torch.randn(2, 8, 8, 8)
    with torch.no_grad(), without_residual_branch(block):
        torch.testing.assert_close(block(x), x)


def test_lesion_study_scores_every_residual_block():
    model = micro_model()
    test_set = image_set(24)
    result = lesion_study(model, test_set, batch_size=8)
    assert [b.name for b in result.blocks] == ["stages.c1.0", "stages.c2.0", "stages.c2.1"]
    assert [b.depth for b in result.blocks] == [1, 2, 3]
    from archdsl.run.evaluate import evaluate

    # In the study's batches: the CPU's conv kernels round differently at another batch size.
    with without_residual_branch(model.get_submodule("stages.c2.0")):
        top1, nll = evaluate(model, test_set, batch_size=8)
    assert (result.blocks[1].top1, result.blocks[1].nll) == (top1, nll)
    assert result.top1 == evaluate(model, test_set, batch_size=8).top1


# --------------------------------------------------------------------------- NLL on augmented training data


class ConstantLogits(nn.Module):
    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = nn.Parameter(logits)
        self.seen: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(x.detach().clone())
        return self.logits.expand(len(x), -1)


def test_training_nll_of_known_logits():
    logits = torch.tensor([2.0, 0.5, -1.0, 0.0])
    train_set = image_set(40)
    result = augmented_training_nll(ConstantLogits(logits), train_set, TrainConfig(recipe="fast"), batch_size=16)
    log_p = torch.log_softmax(logits.double(), dim=0)
    expected = -float(np.mean([log_p[label] for label in train_set.labels]))
    assert result.nll == pytest.approx(expected, rel=1e-12)
    assert result.top1 == pytest.approx(0.25)  # always class 0; 10 of 40 images
    assert result.images == 40 and "random crop with padding 4" in result.augmentation


def test_training_nll_sees_augmented_images_the_same_for_one_seed_and_leaves_the_global_generators_alone():
    train_set = image_set(16)
    model = ConstantLogits(torch.zeros(4))
    state = torch.get_rng_state()
    augmented_training_nll(model, train_set, TrainConfig(recipe="fast"), images=16, batch_size=16, seed=3)
    assert torch.equal(torch.get_rng_state(), state)
    first = model.seen[-1]
    augmented_training_nll(model, train_set, TrainConfig(recipe="fast"), images=16, batch_size=16, seed=3)
    assert torch.equal(model.seen[-1], first)
    from archdsl.run.loader import make_loader

    plain = torch.cat([x for x, _ in make_loader(train_set, 16, augment=False, shuffle=False)])
    # Some image differs from every plain image: crops and flips moved pixels.
    distances = torch.cdist(first.flatten(1), plain.flatten(1)).min(dim=1).values
    assert (distances > 1e-3).any()
