"""How every rendering of a study writes a figure measured on paired seeds: the terminal lines, report.md and the
plots' labels all call `estimate_text` (or `mean_text` where only the mean is shown), so a figure reads the same
wherever it appears.

The rule: the interval's half-width at two significant digits, and the mean and the interval's ends rounded to
the same decimal place, so a figure carries as many digits as its interval supports and no more:
`0.82 ± 0.20 [0.61, 1.00]`, `0.8853 ± 0.0061 [0.8792, 0.8914]`. A figure with no spread (every seed equal) is
written at four significant digits with `± 0`; a figure of one seed has no interval and is written at four
significant digits.
"""

from __future__ import annotations

import math

from archdsl.search.seed_stats import SeedEstimate

SIGNIFICANT_DIGITS = 2  # of the half-width: the digits of a figure stop where its interval's second digit does
BARE_DIGITS = 4  # significant digits of a figure that has no interval (one seed) or no spread (every seed equal)
MAX_DECIMALS = 6


def figure_decimals(half_width: float) -> int | None:
    """The decimal places a figure with this half-width is written to (negative: rounded to tens, hundreds...);
    None where the half-width is 0 or not finite (no spread: the figure is written at BARE_DIGITS)."""
    if not math.isfinite(half_width) or half_width <= 0:
        return None
    shown = float(f"{half_width:.{SIGNIFICANT_DIGITS}g}")  # 0.0996 -> 0.1: the places of the rounded half-width
    return min(MAX_DECIMALS, SIGNIFICANT_DIGITS - 1 - math.floor(math.log10(shown)))


def rounded_text(value: float, decimals: int | None) -> str:
    """`value` at `decimals` places (`figure_decimals`), or at BARE_DIGITS significant digits where None."""
    if decimals is None:
        return f"{value:.{BARE_DIGITS}g}"
    if decimals >= 0:
        return f"{value:.{decimals}f}"
    return f"{round(value, decimals):.0f}"


def mean_text(value: SeedEstimate, *, interval: bool = False) -> str:
    """The mean at the digits its interval supports: `0.82`; with `interval`, `0.82 ± 0.20`."""
    if value.half_width is None:
        return rounded_text(value.mean, None)
    decimals = figure_decimals(value.half_width)
    mean = rounded_text(value.mean, decimals)
    if not interval:
        return mean
    return f"{mean} ± {rounded_text(value.half_width, decimals) if decimals is not None else '0'}"


def estimate_text(value: SeedEstimate) -> str:
    """`0.82 ± 0.20 [0.61, 1.00] (3 seeds)`: the mean, the half-width of its 95 % t-interval and the interval
    clipped to the objective's range, at the digits the interval supports (the module's rule); `0.72 (1 seed: no
    interval)`."""
    if value.half_width is None or value.low is None or value.high is None:
        return f"{mean_text(value)} ({value.seeds} seed: no interval)"
    decimals = figure_decimals(value.half_width)
    ends = f"[{rounded_text(value.low, decimals)}, {rounded_text(value.high, decimals)}]"
    return f"{mean_text(value, interval=True)} {ends} ({value.seeds} seeds)"
