"""A dataset name read at another image size: `--image-size N`, and a design's input size.

Images read from files of any size (`folder:`, `hf:`, `imagenet`) are resized and cropped to the
`size=` option of their name; `sized_name` writes that option (replacing the name's own), so every
consumer of the name (a run's record, a search's description, an analysis) reads the same images.
The other datasets hold images of one size (CIFAR's 32x32, MNIST's 28x28): a size that is not
theirs is refused in one line.
"""

from __future__ import annotations

import os

from archdsl.data import folder, hf, imagenet
from archdsl.data.registry import describe, is_corrupted
from archdsl.errors import UsageError
from archdsl.ir import InputShape

SIZE = "size"  # the option folder:, hf: and imagenet names take


def is_resizable(name: str) -> bool:
    """Whether the images of dataset `name` are fitted to a size when read (`size=`)."""
    return folder.is_folder_name(name) or hf.is_hf_name(name) or _is_imagenet(name)


def sized_name(name: str, size: int, root: str | os.PathLike | None = None) -> str:
    """`name` with its images fitted to size x size (`--image-size`): a `folder:`, `hf:` or
    `imagenet` name with `size=N` (instead of its own `size=`); a name of a dataset of fixed-size
    images as it is when its images are size x size, else a UsageError."""
    if not is_resizable(name):
        _, height, width = describe(name, root).image_shape
        if (height, width) != (size, size):
            raise UsageError(
                f"--image-size {size}: the images of {name} are {height}x{width} and are not resized",
                hint="--image-size applies to folder:, hf: and imagenet datasets; leave it out here",
            )
        return name
    head, separator, options = _parts(name)
    kept = [option for option in options if _key(option) != SIZE]
    return head + separator + ",".join([*kept, f"{SIZE}={size}"])


def size_given(name: str) -> bool:
    """Whether a resizable dataset's name sets `size=` itself."""
    return is_resizable(name) and any(_key(option) == SIZE for option in _parts(name)[2])


def _is_imagenet(name: str) -> bool:
    return name.strip().partition(":")[0].strip().lower() == imagenet.NAME


def _parts(name: str) -> tuple[str, str, list[str]]:
    """The name's head (`folder:PATH`, `hf:NAME:CONFIG`, `imagenet`), the separator before its
    options and the options: a folder's path or an hf name runs to the first comma."""
    text = name.strip()
    if _is_imagenet(text):
        head, _, tail = text.partition(":")
        separator = ":"
    else:
        head, _, tail = text.partition(",")
        separator = ","
    return head, separator, [part.strip() for part in tail.split(",") if part.strip()]


def _key(option: str) -> str:
    return option.partition("=")[0].strip()


def dataset_for_input(
    name: str, design_input: InputShape, image_size: int | None, root: str | os.PathLike | None = None
) -> str:
    """The dataset name a command with a design reads (train, eval, analyze): at `--image-size`
    when given; else a resizable dataset without its own `size=` at the design's (square) input
    size, so `folder:photos` feeds a 224x224 spec 224x224 images."""
    if image_size is not None:
        return sized_name(name, image_size, root)
    if is_resizable(name) and not size_given(name) and design_input.height == design_input.width:
        return sized_name(name, design_input.height, root)
    return name


def corrupted_for_input(
    name: str, design_input: InputShape, image_size: int | None, root: str | os.PathLike | None = None
) -> str:
    """`--corrupted NAME` as a command with a design reads it: released sets (a -c name, a folder in
    ImageNet-C's layout) as named (they are read at their clean dataset's size); a clean dataset whose
    corrupted copies are generated (`folder:CLEAN`, `hf:...`) fitted as `dataset_for_input` fits it."""
    return name if is_corrupted(name) else dataset_for_input(name, design_input, image_size, root)
