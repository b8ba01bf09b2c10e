"""A checkpoint whose weights are finite but whose outputs are not (weights large enough to
overflow, a negative BatchNorm variance) is refused by eval and every analysis measure with one
message naming the file, instead of a traceback from ECE's `bincount` or Lanczos' `eigh`, and
leaves no empty --out behind."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _micro_arch import micro_arch

from archdsl.cli import main

DATASET = "synthetic:train=40,test=20"
MICRO = micro_arch("c1(width=4) { conv }", "c2(width=8, stride=2) { conv msa(heads=1, window=4, dim_head=4) }", stem=4)


def _stem_scaled(weights: dict[str, torch.Tensor]) -> None:
    (key,) = [k for k, v in weights.items() if k.startswith("stem") and v.ndim == 4]
    weights[key] = weights[key] * 1e37  # finite, but the convolution's sums overflow float32


def _negative_variance(weights: dict[str, torch.Tensor]) -> None:
    key = next(k for k in weights if k.endswith("running_var"))  # the first block's first BatchNorm
    weights[key] = -torch.ones_like(weights[key])  # sqrt(-1 + eps): NaN


@pytest.fixture(scope="module", params=[_stem_scaled, _negative_variance], ids=["stem x 1e37", "BN variance -1"])
def broken(request, tmp_path_factory) -> Path:
    from archdsl.lang.spec import parse_spec
    from archdsl.nn.build import build
    from archdsl.run.checkpoint import save_checkpoint

    arch = parse_spec(MICRO)
    model = build(arch, seed=0)
    weights = model.state_dict()
    request.param(weights)
    model.load_state_dict(weights)
    path = tmp_path_factory.mktemp("broken") / "micro.safetensors"
    save_checkpoint(path, model, arch, {"dataset": DATASET})
    return path


def _error(argv: list[str], capsys) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.splitlines()[0]


@pytest.mark.parametrize(
    "dataset, where",
    [(DATASET, "on 20 of 20 images"), ("synthetic-c:train=40,test=20", "of synthetic-c:test=20,train=40/")],
)
def test_eval_names_the_file_and_the_images(broken, capsys, dataset, where):
    argv = ["eval", str(broken), "--dataset", dataset, "--no-progress"]
    if dataset.startswith("synthetic-c"):
        argv += ["--corruptions", "fog", "--severities", "1"]
    first = _error(argv, capsys)
    assert first.startswith(f"archdsl: error: {broken}: the model's logits are not finite (NaN or infinite)"), first
    assert where in first


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize(
    "measure, flags, problem",
    [
        ("acc", [], "the model's logits are not finite (NaN or infinite) on 20 of 20 images"),
        ("robustness", ["--corruptions", "fog", "--severities", "1"], "the model's logits are not finite"),
        ("nll-train", ["--train-images", "8"], "the model's logits are not finite"),
        ("lesion", [], "the model's logits are not finite"),
        (
            "landscape",
            ["--landscape-points", "3", "--landscape-batches", "1", "--landscape-batch-size", "8"],
            "the model's loss is not finite (NaN or infinite) at its own weights, on 8 images",
        ),
        *(
            (
                "hessian",
                ["--batches", "1", "--hessian-batch-size", "4", "--k", "1", "--max-iter", "3", "--method", method],
                "the Hessian of the model's loss is not finite (NaN or infinite) on a batch of 4 images",
            )
            for method in ("lanczos", "power")
        ),
    ],
)
def test_analyze_refuses_and_leaves_no_empty_out(broken, tmp_path, capsys, measure, flags, problem):
    out = tmp_path / "new" / "analysis"
    first = _error(["analyze", str(broken), "--metrics", measure, "--out", str(out), "--no-progress", *flags], capsys)
    assert first == f"archdsl: error: {broken}: {problem}" or first.startswith(f"archdsl: error: {broken}: {problem}")
    assert not (tmp_path / "new").exists()
