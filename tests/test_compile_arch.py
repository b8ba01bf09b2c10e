"""`archdsl.nn.compile_arch`, `export_onnx` and `archdsl.lang.with_classes`: `archdsl compile` from Python."""

from __future__ import annotations

import pytest
import torch

from archdsl.errors import UserError
from archdsl.lang import load_spec, with_classes
from archdsl.nn import compile_arch, export_onnx, summarize


def test_compile_arch_returns_a_model_that_agrees_with_its_summary():
    arch = load_spec("tiny")
    compiled = compile_arch(arch, seed=3)
    assert not compiled.model.training
    assert sum(p.numel() for p in compiled.model.parameters()) == compiled.summary.params == summarize(arch).params
    again = compile_arch(arch, seed=3).model.state_dict()
    assert all(torch.equal(again[k], v) for k, v in compiled.model.state_dict().items())  # the seed fixes the weights


def test_the_json_of_compile_adds_up():
    data = compile_arch(load_spec("tiny")).to_dict()
    assert data["name"] == "tiny" and data["digest"] == load_spec("tiny").digest()
    assert data["stem"]["params"] + sum(b["params"] for b in data["blocks"]) + data["head"]["params"] == data["params"]
    assert data["n_msa"] == sum(b["kind"] in ("msa", "attn") for b in data["blocks"])


def test_with_classes_changes_the_head_only_and_checks_the_result():
    arch = load_spec("tiny")
    assert with_classes(arch, None) is arch
    ten_more = with_classes(arch, arch.classes + 10)
    assert ten_more.classes == arch.classes + 10 and ten_more.stages == arch.stages
    for wrong in (0, -1, 2.5, True):
        with pytest.raises(UserError, match="classes must be a positive integer"):
            with_classes(arch, wrong)


def test_export_onnx_writes_a_graph_that_onnx_reads(tmp_path):
    onnx = pytest.importorskip("onnx", reason="needs the export extra: pip install -e '.[export]'")
    compiled = compile_arch(load_spec("tiny"))
    path = export_onnx(compiled.model, tmp_path / "tiny.onnx")
    graph = onnx.load(str(path)).graph
    assert [i.name for i in graph.input] == ["images"] and [o.name for o in graph.output] == ["logits"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.onnx"]  # no temporary file left


def test_export_onnx_of_another_module_asks_for_an_example(tmp_path):
    with pytest.raises(TypeError, match="a Linear has no .arch .* pass example="):
        export_onnx(torch.nn.Linear(3, 2), tmp_path / "linear.onnx")
    assert not (tmp_path / "linear.onnx").exists()
