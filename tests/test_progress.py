"""Progress bars: drawn on a terminal, silent in a log (no `\r` updates), off on request."""

from __future__ import annotations

import io

from archdsl.progress import progress_bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _drawn(stream: io.StringIO, show: bool) -> str:
    for _ in progress_bar(range(3), show=show, file=stream, desc="work", mininterval=0):
        pass
    return stream.getvalue()


def test_a_bar_is_drawn_on_a_terminal() -> None:
    text = _drawn(Terminal(), show=True)
    assert "work" in text and "3/3" in text and "\r" in text


def test_no_bar_when_the_output_is_a_log_file_or_bars_are_off() -> None:
    assert _drawn(io.StringIO(), show=True) == ""  # piped into a log: nothing, not `\r` spam
    assert _drawn(Terminal(), show=False) == ""


def test_train_piped_to_a_log_writes_no_bar(tmp_path, capsys) -> None:
    from archdsl.cli import main

    spec = tmp_path / "micro.arch"
    spec.write_text(
        "arch micro {\n input 3x32x32\n classes 10\n stem conv3x3(8)\n conv = basic\n stage c1(width=8) { conv }\n}\n"
    )
    argv = ["train", str(spec), "--dataset", "synthetic:train=40,test=20", "--recipe", "weak", "--epochs", "1"]
    assert main([*argv, "--batch-size", "20", "--out", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err  # pytest's capture is not a terminal, as a log file is not
    assert "\r" not in err and "step/s" not in err and "epoch 1/1" not in err
