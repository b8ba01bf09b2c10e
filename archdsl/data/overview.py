"""What `archdsl data info` says about a dataset: `about(name, root)`, its description, classes, image
shape, split sizes (counted on disk where the files are there), where it loads from and, when it is
missing, why and how to get it. The command prints the lines; a script reads `available`."""

from __future__ import annotations

import os
from dataclasses import dataclass

from archdsl.data.registry import count_images, describe, is_corrupted, why_missing

__all__ = ["About", "about"]


@dataclass(frozen=True)
class About:
    """A dataset described, one line each, and whether its files are there (generated sets always are)."""

    lines: tuple[str, ...]
    available: bool


def about(name: str, root: str | os.PathLike | None = None, *, checksums: bool = False) -> About:
    """Dataset `name` described without loading it (its splits are counted where its files are there);
    `checksums`: CIFAR's files also compared with the official release's MD5s."""
    info = describe(name, root)
    c, h, w = info.image_shape
    per = " per corruption and severity" if is_corrupted(info.name) else ""
    sizes = count_images(name, root) if info.available else info.split_sizes
    nominal = "" if sizes == info.split_sizes else f", counted on disk (the full set: {_sizes(info.split_sizes)})"
    lines = [
        f"dataset:  {info.name}",
        f"about:    {info.description}",
        f"classes:  {info.num_classes}",
        f"images:   {c}x{h}x{w}",
        f"splits:   {_sizes(sizes)}{per}{nominal}",
        f"source:   {info.source}" + ("" if info.available else "  (not found)"),
    ]
    problem = None if info.available else why_missing(name, root)
    if problem is not None:
        lines.append(f"missing:  {problem.message}")
        if problem.hint:
            lines.append(f"to fix:   {problem.hint}")
    if info.corruptions:
        lines.append(f"corruptions: {', '.join(info.corruptions)}")
    if checksums and info.available and info.name in ("cifar10", "cifar100"):
        from archdsl.data.cifar import matches_official_release

        matches = matches_official_release(info.name, root)
        lines.append(f"checksums: {'official' if matches else 'differ from the official release'}")
    return About(lines=tuple(lines), available=info.available)


def _sizes(sizes: dict[str, int]) -> str:
    return ", ".join(f"{split} {size:,}" for split, size in sizes.items())
