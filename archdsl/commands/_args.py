"""Argument types and option groups shared by the commands.

Each type raises `argparse.ArgumentTypeError`, so a bad value is a usage error (exit 2)
with argparse's `argument --flag: ...` prefix. Light: no torch, nothing heavy imported.
"""

from __future__ import annotations

import argparse
import math

from archdsl.outputs import RUNS_DIR  # noqa: F401  # the commands' --out default

DEVICES = ("auto", "cpu", "cuda", "mps")


def _number(text: str, kind: type, expected: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None


def positive_int(text: str) -> int:
    value = _number(text, int, "a positive integer")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = _number(text, int, "an integer >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def positive_float(text: str) -> float:
    value = _number(text, float, "a positive number")
    if not 0 < value < math.inf:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def non_negative_float(text: str) -> float:
    value = _number(text, float, "a number >= 0")
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text}")
    return value


def fraction(text: str) -> float:
    """A share of a dataset: 0 < x <= 1."""
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], got {text}")
    return value


def rate(text: str) -> float:
    """A probability such as a drop-path rate: 0 <= x < 1."""
    value = _number(text, float, "a rate in [0, 1)")
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a rate in [0, 1), got {text}")
    return value


def severity(text: str) -> int:
    """A corruption severity of CIFAR-C: 1 (mild) to 5 (strong)."""
    if text.strip() not in ("1", "2", "3", "4", "5"):
        raise argparse.ArgumentTypeError(f"expected a severity from 1 to 5, got {text!r}")
    return int(text)


def name_list(text: str) -> tuple[str, ...]:
    """A list flag's value: names separated by commas, `fog,contrast` (every list flag of every
    command takes this one form; repeats are dropped)."""
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated names, got {text!r}")
    return names


def comma_list_text(text: str) -> str:
    """A list flag the command splits itself (search's `--objectives accuracy,params`): the text
    as given. Its type marks it a list, which a config file may give as a YAML list."""
    return text


def severity_list(text: str) -> tuple[int, ...]:
    """Severities separated by commas: `1,3,5`."""
    return tuple(severity(part) for part in name_list(text))


def device_name(text: str) -> str:
    kind, _, index = text.partition(":")
    if kind not in DEVICES or (index and (kind != "cuda" or not index.isdigit())):
        raise argparse.ArgumentTypeError(f"unknown device {text!r} (choose from {', '.join(DEVICES)}, or cuda:N)")
    return text


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-root", metavar="DIR", help="where datasets live (default: $ARCHDSL_DATA or ./data)")
    parser.add_argument("--download", action="store_true", help="download the dataset if it is missing")


def add_optimize_argument(parser: argparse.ArgumentParser, *, default: bool | None = True) -> None:
    """`--no-optimize`: run the model as built instead of `archdsl.optimize_model`'s fast version."""
    parser.add_argument(
        "--no-optimize",
        dest="optimize",
        action="store_false",
        default=default,
        help="run the model as built: no channels_last, folded BatchNorm, micro-batches or torch.compile",
    )


def add_dist_timeout_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """`--dist-timeout`: how long a rank of a torchrun group waits for the others (archdsl.run.distributed)."""
    from archdsl.run import DEFAULT_TIMEOUT_S  # torch-free

    parser.add_argument(
        "--dist-timeout",
        type=positive_float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"under torchrun: how long a rank waits for the others before the run fails with an error "
        f"(default: {DEFAULT_TIMEOUT_S:g})",
    )


# --no-progress's help, the same for every command: bars are drawn only on a terminal (archdsl.progress).
NO_PROGRESS_HELP = "no progress bars (they are drawn only when stderr is a terminal, never into a log file)"
