"""Progress bars: drawn on a terminal, silent in a log (no `\r` updates), off on request, and on a
terminal never a stray line (a `0%` bar left behind, a bar for a step that took no time)."""

from __future__ import annotations

import contextlib
import io
import re
import sys
import time

import pytest
from _micro_arch import micro_arch

from archdsl import progress
from archdsl.progress import progress_bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def screen(text: str) -> list[str]:
    """The lines a terminal shows for `text`: `\\r` returns to the line's start, later text overwrites."""
    lines = []
    for raw in re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text).split("\n"):
        cells: list[str] = []
        column = 0
        for char in raw:
            if char == "\r":
                column = 0
                continue
            if column < len(cells):
                cells[column] = char
            else:
                cells.append(char)
            column += 1
        lines.append("".join(cells).rstrip())
    return lines


def stray_zero_lines(text: str) -> list[str]:
    """Shown lines of a bar at 0% (`  0%|`, not `100%|`): a bar that never moved but stayed."""
    return [line for line in screen(text) if re.search(r"(?<!\d)0%\|", line)]


def _drawn(stream: io.StringIO, show: bool) -> str:
    for _ in progress_bar(range(3), show=show, file=stream, desc="work", mininterval=0, delay=0):
        pass
    return stream.getvalue()


def test_a_bar_is_drawn_on_a_terminal() -> None:
    text = _drawn(Terminal(), show=True)
    assert "work" in text and "3/3" in text and "\r" in text


def test_no_bar_when_the_output_is_a_log_file_or_bars_are_off() -> None:
    assert _drawn(io.StringIO(), show=True) == ""  # piped into a log: nothing, not `\r` spam
    assert _drawn(Terminal(), show=False) == ""


def test_a_step_that_ends_within_the_delay_draws_nothing_even_with_a_postfix() -> None:
    terminal = Terminal()
    with progress_bar(total=3, show=True, file=terminal, desc="cached") as bar:
        bar.set_description("epoch 1/1")  # tqdm's own set_* draw at once, delay or not
        for _ in range(3):
            bar.set_postfix(loss="1.0")
            bar.update(1)
    assert terminal.getvalue() == ""


def test_a_slow_bar_shows_after_the_delay_and_stays_at_its_end() -> None:
    terminal = Terminal()
    for _ in progress_bar(range(2), show=True, file=terminal, desc="slow", mininterval=0, delay=0.05):
        time.sleep(0.1)
    assert [line for line in screen(terminal.getvalue()) if line] == [
        line for line in screen(terminal.getvalue()) if "slow" in line
    ]
    assert "2/2" in screen(terminal.getvalue())[0] and terminal.getvalue().endswith("\n")


@pytest.mark.parametrize("stop", ["empty", "failure"])
def test_a_bar_closed_without_work_clears_its_line(stop: str) -> None:
    terminal = Terminal()
    failing = pytest.raises(RuntimeError) if stop == "failure" else contextlib.nullcontext()
    with failing, progress_bar(total=0 if stop == "empty" else 5, show=True, file=terminal, delay=0) as bar:
        bar.set_description("epoch 1/3")
        if stop == "failure":
            raise RuntimeError("out of memory in the first step")
    print("what comes next", file=terminal, end="")
    assert "epoch 1/3" in terminal.getvalue()  # it was drawn (no delay) ...
    assert [line for line in screen(terminal.getvalue()) if line.strip()] == ["what comes next"]  # ... and cleared


MICRO = micro_arch("c1(width=8) { conv }")
TRAIN = ["--dataset", "synthetic:train=40,test=20", "--recipe", "fast", "--batch-size", "20"]


def test_a_log_line_is_written_where_no_bar_is_drawn() -> None:
    log, terminal = io.StringIO(), Terminal()
    for stream in (log, terminal):
        progress.log_line("epoch 1/2  loss=1.000", show=True, file=stream)
    progress.log_line("hidden", show=False, file=log)  # --no-progress: neither bar nor line
    assert log.getvalue() == "epoch 1/2  loss=1.000\n" and terminal.getvalue() == ""


def test_train_piped_to_a_log_writes_one_plain_line_per_epoch_and_no_bar(tmp_path, capsys) -> None:
    from archdsl.cli import main

    spec = tmp_path / "micro.arch"
    spec.write_text(MICRO)
    assert main(["train", str(spec), *TRAIN, "--epochs", "2", "--out", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err  # pytest's capture is not a terminal, as a log file is not
    assert "\r" not in err and "step/s" not in err
    epochs = [line for line in err.splitlines() if line.startswith("epoch ")]
    assert [line.split("  ")[0] for line in epochs] == ["epoch 1/2", "epoch 2/2"]
    assert all("test_acc=" in line for line in epochs)
    assert main(["train", str(spec), *TRAIN, "--epochs", "1", "--out", str(tmp_path / "quiet"), "--no-progress"]) == 0
    assert "epoch 1/1" not in capsys.readouterr().err


def test_train_and_analyze_on_a_terminal_leave_no_zero_percent_line(tmp_path, monkeypatch, one_thread) -> None:
    from archdsl.cli import main

    monkeypatch.setattr(progress, "DELAY_SECONDS", 0)  # draw every bar, however quick
    spec = tmp_path / "micro.arch"
    spec.write_text(MICRO)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["train", str(spec), *TRAIN, "--epochs", "2", "--out", str(tmp_path / "run")]) == 0
    last = (tmp_path / "run" / "metrics.csv").read_text().splitlines()[-1].split(",")
    header = (tmp_path / "run" / "metrics.csv").read_text().splitlines()[0].split(",")
    epoch_2 = dict(zip(header, last, strict=True))
    # The postfix holds the epoch's own values: epoch 2's loss and test accuracy, not a run mean.
    final_bar = [line for line in screen(terminal.getvalue()) if "epoch 2/2: 100%" in line][-1]
    assert f"loss={float(epoch_2['train_loss']):.3f}" in final_bar
    assert f"test_acc={float(epoch_2['test_acc']):.3f}" in final_bar
    checkpoint = str(tmp_path / "run" / "final.safetensors")
    analyze = ["analyze", checkpoint, "--metrics", "acc,hessian,fourier", "--batches", "1", "--k", "2"]
    assert main([*analyze, "--hessian-batch-size", "8", "--max-iter", "5", "--images", "8"]) == 0
    shown = screen(terminal.getvalue())
    assert any("hessian: 100%" in line for line in shown)
    assert stray_zero_lines(terminal.getvalue()) == []


def test_training_stopped_in_its_first_step_leaves_no_zero_percent_line(tmp_path, monkeypatch) -> None:
    import archdsl.run.train as training
    from archdsl.cli import main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(progress, "DELAY_SECONDS", 0)
    monkeypatch.setattr(training, "train_step", interrupted)
    spec = tmp_path / "micro.arch"
    spec.write_text(MICRO)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["train", str(spec), *TRAIN, "--epochs", "1", "--out", str(tmp_path / "run")]) == 130
    assert "epoch 1/1" in terminal.getvalue()  # the bar was drawn ...
    assert stray_zero_lines(terminal.getvalue()) == []  # ... and did not stay at 0% above the message
    assert "interrupted before the first epoch finished" in terminal.getvalue()


def test_the_train_bar_never_shows_the_last_epochs_values_under_the_next_epochs_label(tmp_path, monkeypatch) -> None:
    import archdsl.run.train as training
    from archdsl.cli import main

    made = []

    def recording_bar(**options):
        made.append(progress_bar(**options, file=Terminal(), mininterval=0, delay=0))
        return made[-1]

    monkeypatch.setattr(training, "progress_bar", recording_bar)
    spec = tmp_path / "micro.arch"
    spec.write_text(MICRO)
    # Two steps an epoch: the postfix is first set at the epoch's last step, so the epoch's early frames show it.
    assert main(["train", str(spec), *TRAIN, "--epochs", "2", "--out", str(tmp_path / "run")]) == 0
    frames = re.split(r"[\r\n]", re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", made[0].fp.getvalue()))  # every redraw
    second = [line for line in frames if "epoch 2/2" in line and "100%" not in line]
    assert second and not [line for line in second if "test_acc" in line], frames
