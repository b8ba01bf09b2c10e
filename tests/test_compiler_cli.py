"""`archdsl compile` and `archdsl morph` end to end through the CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archdsl.cli import main
from archdsl.lang.diagnostics import SpecError
from archdsl.lang.spec import load_spec, parse_spec, resolve_spec


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as stop:  # argparse's own usage errors
        code = int(stop.code)
    out, err = capsys.readouterr()
    return code, out, err


def test_compile_prints_one_row_per_block_and_totals(capsys) -> None:
    code, out, _ = run_cli(capsys, "compile", "alter18")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["stage", "index", "kind", "output", "params", "MFLOPs"]
    block_rows = [line.split() for line in lines if line.startswith("c")]
    assert len(block_rows) == load_spec("alter18").n_blocks
    assert block_rows[-1][:4] == ["c4", "1", "msa", "512x4x4"]
    assert "9,499,063 params" in out and "0.996 GFLOPs" in out


def test_compile_json_and_classes_override(capsys) -> None:
    code, out, _ = run_cli(capsys, "compile", "alter18", "--json", "--classes", "10")
    data = json.loads(out)
    assert code == 0
    assert data["params"] == 9_499_063 - 90 * 512 - 90  # 90 fewer classifier rows and biases
    assert sum(b["params"] for b in data["blocks"]) + data["stem"]["params"] + data["head"]["params"] == data["params"]
    assert [b["kind"] for b in data["blocks"]].count("msa") == 3


def test_compile_export_writes_a_loadable_checkpoint(capsys, tmp_path: Path) -> None:
    import torch

    from archdsl.run.checkpoint import load_checkpoint

    path = tmp_path / "tiny.safetensors"
    code, out, _ = run_cli(capsys, "compile", "tiny", "--export", str(path), "--seed", "3")
    assert code == 0 and f"wrote weights to {path}" in out
    checkpoint = load_checkpoint(path)
    assert checkpoint.arch == load_spec("tiny")
    from archdsl.nn.build import build

    fresh = build(load_spec("tiny"), seed=3).state_dict()
    assert all(torch.equal(fresh[k], v) for k, v in checkpoint.model.state_dict().items())


def test_compile_reports_spec_errors_like_the_front_end(capsys, tmp_path: Path) -> None:
    bad = tmp_path / "bad.arch"
    text = resolve_spec("alter50").read_text().replace("msa(heads=12, window=4)", "msa(heads=12, window=3)")
    bad.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(str(bad))
    code, out, err = run_cli(capsys, "compile", str(bad))
    assert code == 1 and out == ""
    assert err.strip() == str(info.value).strip()
    assert "window 3 does not tile the 8x8 map of stage c3" in err


def test_morph_prints_a_spec_that_reads_back_to_the_same_design(capsys) -> None:
    code, out, _ = run_cli(capsys, "morph", "alter50-base", "--layout", "0,1,1,2", "--name", "alter50")
    assert code == 0
    assert parse_spec(out).digest() == load_spec("alter50").digest()
    code, out, _ = run_cli(capsys, "morph", "alter50-base", "--ratio", "1")
    assert parse_spec(out).digest() == load_spec("swinlike50").digest()
    code, out, _ = run_cli(capsys, "morph", "alter50-base", "--msa", "2", "--heads", "8", "--window", "global")
    arch = parse_spec(out)
    assert [(b.heads, b.window) for b in arch.stages[3].blocks if b.kind == "msa"] == [(8, None), (8, None)]


def test_morph_writes_a_file(capsys, tmp_path: Path) -> None:
    target = tmp_path / "out" / "a.arch"
    code, out, _ = run_cli(capsys, "morph", "resnet18", "--layout", "0,1,1,1", "-o", str(target))
    assert code == 0 and str(target) in out
    assert load_spec(str(target)).digest() == load_spec("alter18").digest()


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--layout", "0,1,x,2"], 2, "comma-separated integers"),
        (["--layout", "0,1,1,9"], 1, "c4 has 4 blocks: it takes 0 to 2 MSAs, not 9"),
        (["--ratio", "2"], 2, "between 0 and 1"),
        (["--msa", "2", "--window", "wide"], 2, "integers or `global`"),
    ],
)
def test_morph_rejects_bad_requests(capsys, argv: list[str], code: int, message: str) -> None:
    got, _, err = run_cli(capsys, "morph", "alter50-base", *argv)
    assert got == code and message in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--msa", "-1"], "integer >= 0"),
        (["--ratio", "nan"], "between 0 and 1"),
        (["--msa", "2", "--heads", "0"], "--heads takes integers >= 1"),
        (["--msa", "2", "--window", "0"], "--window takes positive integers"),
    ],
)
def test_morph_flag_values_out_of_range_are_usage_errors(capsys, argv: list[str], message: str) -> None:
    got, _, err = run_cli(capsys, "morph", "alter50-base", *argv)
    assert got == 2 and message in err


def test_morph_never_overwrites_a_spec_without_force(capsys, tmp_path: Path) -> None:
    target = tmp_path / "mine.arch"
    target.write_text("# hand-written\n")
    code, _, err = run_cli(capsys, "morph", "resnet18", "--msa", "1", "-o", str(target))
    assert code == 1 and "already exists" in err and "--force" in err
    assert target.read_text() == "# hand-written\n"
    code, _, _ = run_cli(capsys, "morph", "resnet18", "--msa", "1", "-o", str(target), "--force")
    assert code == 0 and load_spec(str(target)).n_msa == 1


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("existing", "already exists"),
        ("folder", "is a folder"),
        ("under-a-file", "is a file"),
    ],
)
def test_compile_export_refuses_paths_it_cannot_or_should_not_write(
    capsys, tmp_path: Path, where: str, message: str
) -> None:
    existing = tmp_path / "trained.safetensors"
    existing.write_bytes(b"weights")
    path = {"existing": existing, "folder": tmp_path, "under-a-file": existing / "x.safetensors"}[where]
    code, _, err = run_cli(capsys, "compile", "tiny", "--export", str(path))
    assert code == 1 and message in err and "Traceback" not in err
    assert existing.read_bytes() == b"weights"


@pytest.mark.parametrize("flags", [["--classes", "0"], ["--classes", "x"]])
def test_a_bad_flag_is_refused_before_any_output_folder_is_made(capsys, tmp_path: Path, flags: list[str]) -> None:
    code, _, err = run_cli(capsys, "compile", "tiny", "--export", str(tmp_path / "new" / "w.safetensors"), *flags)
    assert code == 2 and "--classes" in err and "Traceback" not in err
    assert not (tmp_path / "new").exists()


def test_morph_refuses_a_transformer_base(capsys) -> None:
    got, _, err = run_cli(capsys, "morph", "swin-ti", "--msa", "1")
    assert got == 1 and "swin-ti has `attn`, `merge`, `mlp`" in err and "Traceback" not in err
