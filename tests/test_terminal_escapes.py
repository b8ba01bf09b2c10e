"""Text read from files (a config key, a state dict's keys, a checkpoint's design) reaches the
terminal with its control characters escaped, as a spec's source lines do: a file cannot drive
the user's terminal (colours, cursor moves, window titles) nor fake lines of output."""

from __future__ import annotations

import json

import pytest

from archdsl.cli import main
from archdsl.errors import visible, visible_lines

ESC = "\x1b[31m"


def test_visible_escapes_control_and_format_characters_only():
    assert visible(f"a{ESC}b\n\u202ec é") == "a\\x1b[31mb\\x0a\\u202ec é"
    assert visible_lines(f"one {ESC}\ntwo") == "one \\x1b[31m\ntwo"
    assert visible(visible(ESC)) == visible(ESC)  # escaping twice changes nothing


def test_a_config_key(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text('"\\e[31mepochs": 3\n')  # YAML's own escape: the file itself is plain text
    assert main(["train", "tiny", "--dataset", "synthetic", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "`\\x1b[31mepochs` is not a setting" in err


def test_a_raw_control_character_in_a_config_file_is_bad_yaml(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text(f"{ESC}epochs: 3\n")
    assert main(["train", "tiny", "--dataset", "synthetic", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"archdsl: error: {config}: not valid YAML: unacceptable character #x001b"), err


def test_the_first_keys_of_an_unknown_layout(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    source = tmp_path / "weights.pth"
    torch.save({"state_dict": {f"{ESC}stem.weight": torch.zeros(2)}}, source)
    assert main(["import", str(source), "--spec", "tiny", "--out", str(tmp_path / "out.safetensors")]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "first keys: \\x1b[31mstem.weight" in err, err


def test_a_checkpoints_design_name(tmp_path, capsys):
    pytest.importorskip("torch")
    from safetensors import safe_open
    from safetensors.torch import save_file

    from archdsl.lang.spec import load_spec
    from archdsl.nn.build import build
    from archdsl.run.checkpoint import save_checkpoint

    arch = load_spec("tiny")
    path = save_checkpoint(tmp_path / "good.safetensors", build(arch), arch, {"dataset": "synthetic"})
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118 (not a dict)
    ir = json.loads(metadata["archdsl.ir"])
    ir["name"] = f"tiny{ESC}"
    metadata["archdsl.ir"] = json.dumps(ir)
    bad = tmp_path / "bad.safetensors"
    save_file(tensors, str(bad), metadata=metadata)
    assert main(["eval", str(bad), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "arch name 'tiny\\x1b[31m' is not a valid name" in err, err


def test_a_study_read_back_from_its_journal(tmp_path, capsys):
    """A study's storage is shared (a disk, a database several people write): the report's summary
    quotes what it holds, escaped."""
    import _search_support as support

    args = support.search_args(tmp_path, "esc", "--strategy", "random", "--objectives", "params", "--n-trials", "1")
    assert main(args) == 0
    journal = tmp_path / "runs" / "esc" / "study.journal"
    text = journal.read_text()
    assert '"layout":"' in text
    journal.write_text(text.replace('"layout":"', '"layout":"\\u001b[31m'))  # JSON's escape: a plain text file
    capsys.readouterr()
    assert main(["report", "esc", "--out", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[31mc1:" in out, out


def test_a_spec_name_given_to_check(capsys):
    assert main(["check", "\x1b[2Jx"]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b[2Jx" in err, err


def test_the_out_path_in_trains_lines(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / f"{ESC}run"
    args = ["train", "tiny", "--dataset", "synthetic:train=40,test=20", "--recipe", "fast", "--epochs", "1"]
    assert main([*args, "--batch-size", "20", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr()
    assert "\x1b" not in printed.out + printed.err and "\\x1b[31mrun" in printed.out, printed.out


def test_the_last_line_of_import(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    from archdsl.lang.spec import load_spec
    from archdsl.nn.build import build

    source = tmp_path / "weights.pth"
    torch.save(build(load_spec("tiny")).state_dict(), source)
    out = tmp_path / f"{ESC}out.safetensors"
    assert main(["import", str(source), "--spec", "tiny", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "\\x1b[31mout.safetensors" in printed, printed


def test_every_line_a_command_prints_goes_through_say():
    # One escaping function for every line: a print of its own would skip it.
    from pathlib import Path

    commands = Path(__file__).resolve().parent.parent / "archdsl" / "commands"
    offenders = [
        f"{path.name}:{number}"
        for path in commands.glob("*.py")
        if path.name != "_say.py"
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if "print(" in line or "sys.stdout" in line or "sys.stderr" in line
    ]
    assert offenders == []
