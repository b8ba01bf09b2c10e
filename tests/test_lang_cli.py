"""`archdsl check` and `archdsl fmt` through the CLI entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from archdsl.cli import main
from archdsl.lang.spec import load_spec, resolve_spec

BAD = "arch bad {\n    input 3x8x8\n    classes 10\n    stem conv3x3(4)\n    stage c1(width=4) { conv msa(2, 16) }\n}\n"


def test_check_ok_line_per_file(capsys):
    assert main(["check", "tiny", str(resolve_spec("tiny-basic"))]) == 0
    out = capsys.readouterr().out.splitlines()
    tiny = load_spec("tiny")
    assert out[0] == f"tiny: ok (tiny, {tiny.n_blocks} blocks, {tiny.n_msa} MSA, init torch, id {tiny.short_id})"
    assert out[1].startswith(f"{resolve_spec('tiny-basic')}: ok (tiny-basic, ")


def test_check_reports_errors_and_goes_on(tmp_path, capsys):
    bad = tmp_path / "bad.arch"
    bad.write_text(BAD)
    assert main(["check", str(bad), "tiny", str(tmp_path / "missing.arch")]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("tiny: ok")
    assert f"{bad}:5:37: error: window 16 does not fit the 8x8 map of stage c1" in captured.err
    lines = captured.err.splitlines()
    at = next(i for i, line in enumerate(lines) if "error: window 16" in line)
    assert lines[at + 2].index("^~") == lines[at + 1].index("16)")
    assert "archdsl: error: spec file" in captured.err and "Traceback" not in captured.err


def test_check_without_files_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["check"])
    assert info.value.code == 2


def test_check_does_not_import_torch():
    code = (
        "import sys\n"
        "from archdsl.cli import main\n"
        "assert main(['check', 'tiny', 'vit-ti', 'pit-ti', 'swin-ti']) == 0\n"
        "assert 'torch' not in sys.modules, 'archdsl check imported torch'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def _messy(tmp_path: Path) -> Path:
    path = tmp_path / "messy.arch"
    path.write_text(
        "# keep me\narch messy{input 3x16x16 classes 10 stem conv3x3(8)\n"
        "stage a(width=8){conv,conv,conv msa(heads=2,window=4)} # and me\n}\n"
    )
    return path


def test_fmt_check_lists_files_that_would_change_and_writes_nothing(tmp_path, capsys):
    path = _messy(tmp_path)
    before = path.read_text()
    assert main(["fmt", "--check", str(path)]) == 1
    assert f"would reformat {path}" in capsys.readouterr().out
    assert path.read_text() == before


def test_fmt_rewrites_in_place_keeping_meaning_and_comments(tmp_path, capsys):
    path = _messy(tmp_path)
    arch = load_spec(path)
    assert main(["fmt", str(path)]) == 0
    text = path.read_text()
    assert load_spec(path) == arch
    assert "# keep me" in text and "# and me" in text and "{ conv*3 msa(2, 4) }" in text
    assert main(["fmt", "--check", str(path)]) == 0  # now canonical
    assert "reformatted" in capsys.readouterr().out


def test_fmt_diff_prints_a_unified_diff(tmp_path, capsys):
    path = _messy(tmp_path)
    assert main(["fmt", "--diff", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"--- {path}\n+++ {path} (formatted)\n")
    assert "+    stage a(width=8) { conv*3 msa(2, 4) }  # and me" in out


def test_fmt_bad_spec_and_missing_file(tmp_path, capsys):
    bad = tmp_path / "bad.arch"
    bad.write_text(BAD)
    assert main(["fmt", str(bad)]) == 1
    assert "window 16 does not fit" in capsys.readouterr().err
    assert bad.read_text() == BAD
    messy = _messy(tmp_path)
    before = messy.read_text()
    assert main(["fmt", str(messy), str(tmp_path / "nope.arch")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert messy.read_text() == before  # nothing written when one path is wrong


def test_a_bare_name_that_is_a_local_path_is_read_as_that_path(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "run.safetensors").write_bytes(b"\x80\xff" * 8)
    assert main(["check", "folder"]) == 1
    assert "'folder' is a directory, not a spec file" in capsys.readouterr().err
    assert main(["check", "run.safetensors"]) == 1  # a checkpoint given as a spec
    err = capsys.readouterr().err
    assert "not UTF-8" in err and "that is a checkpoint" in err and "no built-in spec" not in err


def test_fmt_of_a_folder_says_so(tmp_path, capsys):
    assert main(["fmt", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_an_os_error_on_a_file_is_a_message_not_a_traceback(monkeypatch, capsys):
    import archdsl.commands.check as check

    def disk_full(args):
        raise OSError(28, "No space left on device", "runs/x/metrics.csv")

    monkeypatch.setattr(check, "run", disk_full)
    assert main(["check", "tiny"]) == 1
    assert "archdsl: error: No space left on device: runs/x/metrics.csv" in capsys.readouterr().err


def _commands() -> tuple[str, ...]:
    from archdsl.cli import COMMAND_MODULES

    return COMMAND_MODULES


@pytest.mark.parametrize("command", _commands())
def test_every_command_help_ends_with_examples_that_parse(command, capsys):
    import importlib
    import shlex

    from archdsl.cli import build_parser, command_module

    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: archdsl {command}") and f"\nexamples:\n  archdsl {command}" in out
    parser = build_parser()
    for line in importlib.import_module(command_module(command)).EXAMPLES:
        words = shlex.split(line, comments=True)
        words = words[: next((i for i, w in enumerate(words) if w in (">", ">>", "|")), len(words))]  # shell's
        args = parser.parse_args(words[1:])  # a renamed flag exits 2 here
        assert args.command == command


def test_a_byte_order_mark_is_not_a_syntax_error(tmp_path, capsys):
    path = tmp_path / "bom.arch"
    path.write_bytes(b"\xef\xbb\xbf" + resolve_spec("tiny").read_bytes())
    assert main(["check", str(path)]) == 0
    assert load_spec(path) == load_spec("tiny")


def test_a_device_file_is_not_called_missing(capsys):
    assert main(["check", "/dev/null"]) == 1
    assert "is not a regular file" in capsys.readouterr().err


def test_fmt_keeps_the_specs_mode_and_formats_a_symlinks_target(tmp_path, capsys):
    import os
    import stat

    path = _messy(tmp_path)
    path.chmod(0o664)
    link = tmp_path / "link.arch"
    os.symlink(path.name, link)  # a relative link, as `ln -s messy.arch link.arch` makes
    assert main(["fmt", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == "messy.arch"
    assert "{ conv*3 msa(2, 4) }" in path.read_text()  # the target was formatted
    assert stat.S_IMODE(path.stat().st_mode) == 0o664
    assert "reformatted" in capsys.readouterr().out
