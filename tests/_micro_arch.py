"""The micro networks the train, analysis and progress tests train in a second: one header,
the stages each test needs."""

from __future__ import annotations


def micro_arch(*stages: str, size: int = 32, stem: int = 8, classes: int = 10) -> str:
    """`arch micro` on 3xSIZExSIZE images: a conv3x3(STEM) stem, basic convs, then `stage S` for each S."""
    body = "".join(f"    stage {stage}\n" for stage in stages)
    return (
        "arch micro {\n"
        f"    input   3x{size}x{size}\n"
        f"    classes {classes}\n"
        f"    stem    conv3x3({stem})\n"
        "    conv  = basic\n"
        f"{body}"
        "}\n"
    )
