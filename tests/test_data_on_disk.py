"""Images read from disk stay there: `folder:` sets hold paths (DiskImages), DataLoader workers
decode them, and a folder's mean and std are computed once and cached."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from test_data_folder import write_tree

from archdsl.data import image_files, load_split
from archdsl.data.image_files import DiskImages
from archdsl.run.loader import ImageSetDataset, default_workers, make_loader


def test_a_folder_set_holds_paths_and_pickles_far_smaller_than_its_pixels(tmp_path):
    root = write_tree(tmp_path / "pets", {"train": 6, "test": 2})
    train = load_split(f"folder:{root},size=64", "train")
    assert isinstance(train.images, DiskImages) and train.images.shape == (18, 64, 64, 3)
    pixels = np.asarray(train.images)
    assert pixels.shape == (18, 64, 64, 3) and np.array_equal(pixels[5], train.images[5])
    assert np.array_equal(train.take(np.array([2, 7])).images[1], pixels[7])
    pickled = len(pickle.dumps(ImageSetDataset(train)))  # what a DataLoader worker receives
    assert pickled * 20 < pixels.nbytes, (pickled, pixels.nbytes)


def test_a_batch_of_disk_images_is_a_fresh_writable_array_as_numpys_fancy_index_is(tmp_path):
    # A read-only batch made torch.from_numpy warn "The given NumPy array is not writable" in every
    # evaluation batch of a folder (ImageSetDataset.__getitems__).
    train = load_split(f"folder:{write_tree(tmp_path / 'pets', {'train': 2, 'test': 1})},size=16", "train")
    for key in (np.array([0, 3]), slice(1, 4), [2, 5]):
        assert train.images[key].flags.writeable, key
    batch, _ = ImageSetDataset(train).__getitems__([0, 3])
    assert batch.shape == (2, 3, 16, 16)


def test_disk_sets_get_workers_by_default_and_memory_sets_none(tmp_path):
    root = write_tree(tmp_path / "pets", {"train": 2, "test": 1})
    on_disk = load_split(f"folder:{root},size=16", "train")
    in_memory = load_split("synthetic:train=20,test=10", "train")
    assert default_workers(on_disk) >= 1 and default_workers(in_memory) == 0
    assert make_loader(in_memory, 4, augment=False).num_workers == 0


@pytest.mark.parametrize("recipe", ["deit", "weak"])
def test_batches_with_workers_are_the_batches_without(tmp_path, recipe):
    root = write_tree(tmp_path / "pets", {"train": 4, "test": 1})
    train = load_split(f"folder:{root},size=16", "train")

    def batches(workers: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        torch.manual_seed(123 + workers)  # the global streams differ: the batches must not
        return list(make_loader(train, 4, augment=True, recipe=recipe, seed=7, workers=workers))

    alone, with_workers = batches(0), batches(2)
    assert len(alone) == 3
    for (x0, y0), (x2, y2) in zip(alone, with_workers, strict=True):
        assert torch.equal(y0, y2) and torch.equal(x0, x2)
    assert not torch.equal(alone[0][0], list(make_loader(train, 4, augment=True, recipe=recipe, seed=8))[0][0])


def test_a_second_start_reads_the_statistics_not_the_images(tmp_path, monkeypatch):
    root = write_tree(tmp_path / "pets", {"train": 3, "test": 2})
    decoded = []
    read_image = image_files.read_image
    monkeypatch.setattr(image_files, "read_image", lambda path, *args: decoded.append(path) or read_image(path, *args))
    first = load_split(f"folder:{root},size=16", "train")
    assert len(decoded) == 15  # the first start decodes both splits once: 9 for the statistics, 6 checked
    decoded.clear()
    again = load_split(f"folder:{root},size=16", "test")
    assert decoded == [] and (again.mean, again.std) == (first.mean, first.std)
    write_tree(tmp_path / "more", {"train": 1, "test": 1})
    (tmp_path / "more" / "train" / "ant" / "0.png").rename(root / "train" / "ant" / "new.png")
    changed = load_split(f"folder:{root},size=16", "train")
    assert len(decoded) == 16 and changed.mean != first.mean  # a new file: read again
