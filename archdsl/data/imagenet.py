"""ImageNet (ILSVRC-2012) from its folder layout: `--dataset imagenet --data-root DIR`.

DIR holds `train/<wnid>/*.JPEG` and `val/<wnid>/*.JPEG` (the layout timm's and torchvision's
ImageFolder read; the validation images sorted into wnid folders). Read by the folder loader
(`archdsl.data.folder`) with timm's standard ImageNet evaluation transform: shorter side resized
to size / crop_pct (bicubic; 256 for 224, timm's DEFAULT_CROP_PCT 0.875), centre crop of
size x size, normalised by timm's IMAGENET_DEFAULT_MEAN/STD (the published statistics, not
recomputed from the images).
"""

from __future__ import annotations

from pathlib import Path

from archdsl.data._names import DatasetName
from archdsl.data.folder import FolderName
from archdsl.errors import UserError, visible

NAME = "imagenet"
PARAMS = ("size", "train", "test")
DEFAULT_SIZE = 224
SOURCE = "https://image-net.org"
DESCRIPTION = (
    "ImageNet ILSVRC-2012, 1,000 classes, from DIR/train/<wnid>/*.JPEG and DIR/val/<wnid>/*.JPEG "
    "(--data-root DIR); timm's transform: 224, bicubic, crop_pct 0.875"
)


def folder_name(parsed: DatasetName, root: Path, canonical: str, download: bool = False) -> FolderName:
    """How the folder loader reads ImageNet under `root`; a UserError naming the layout if it is not
    there (with `download`: that archdsl cannot fetch it, as ILSVRC-2012 is given out after sign-up)."""
    from timm.data import DEFAULT_CROP_PCT, IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD

    if not (root / "train").is_dir() or not (root / "val").is_dir():
        if download:
            raise UserError(
                f"imagenet cannot be downloaded by archdsl (ILSVRC-2012 is given out by {SOURCE} after sign-up)",
                hint=f"put its train/<wnid>/ and val/<wnid>/ folders in {visible(root)}, or pass --data-root DIR",
            )
        raise UserError(
            f"imagenet: no ILSVRC-2012 folders in {visible(root)} (expected train/<wnid>/ and val/<wnid>/)",
            hint="pass the folder that holds train/ and val/ with --data-root DIR (or $ARCHDSL_DATA)",
        )
    size = parsed.int_param("size", DEFAULT_SIZE)
    limits = tuple((split, parsed.int_param(split, 0)) for split in ("test", "train") if split in parsed.params)
    if size < 1 or any(n < 1 for _, n in limits):
        raise UserError(f"dataset {canonical}: size=, train= and test= must be positive numbers")
    stats = (tuple(IMAGENET_DEFAULT_MEAN), tuple(IMAGENET_DEFAULT_STD))
    return FolderName(root, size, limits, DEFAULT_CROP_PCT, stats, label=canonical)
