"""Fake Fashion-MNIST/MNIST IDX files for tests (random pixels, labels cycling 0..9)."""

from __future__ import annotations

import gzip
import struct

import numpy as np


def idx_bytes(array: np.ndarray) -> bytes:
    """The IDX format: magic (0, 0, type 0x08 = uint8, dimensions), big-endian sizes, the data."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + b"".join(struct.pack(">I", n) for n in array.shape)
    return header + array.astype(np.uint8).tobytes()


def write_idx(folder, n_train=40, n_test=20, packed=False, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        arrays[split] = (images, labels)
        for kind, array in (("images-idx3", images), ("labels-idx1", labels)):
            name = folder / f"{split}-{kind}-ubyte"
            data = idx_bytes(array)
            if packed:
                with gzip.open(f"{name}.gz", "wb") as out:
                    out.write(data)
            else:
                name.write_bytes(data)
    return arrays
