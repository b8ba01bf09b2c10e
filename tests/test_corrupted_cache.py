"""Generated corrupted copies kept on disk (archdsl.data.corrupted_cache): a later process reads them
back instead of running the generator, and makes them again when the folder, the generator or the
entry changed. A "new process" is the in-process caches cleared; tiny folders of PNG files."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from _mnist_files import write_idx
from test_data_folder import write_tree

from archdsl.data import corrupted_cache, load_corrupted, load_split, registry
from archdsl.data import hf as hf_module
from archdsl.data import mnist as mnist_module
from archdsl.data.stats_cache import cache_dir
from archdsl.errors import UserError

PICKED = {"corruptions": ["gaussian_noise", "contrast"], "severities": [1, 3]}


@pytest.fixture
def generated(monkeypatch):
    """The number of sets the corruption generator has made (each call corrupts one set)."""
    calls = []
    original = registry.corrupt

    def counting(images, corruption, severity, seed=0):
        calls.append((corruption, severity))
        return original(images, corruption, severity, seed)

    monkeypatch.setattr(registry, "corrupt", counting)
    return calls


def new_process() -> None:
    """Forget what this process keeps in memory, as a new `archdsl` process starts without it."""
    for cached in (
        registry._folder_corrupted_set,
        registry._decoded_test,
        registry._identified_test,
        registry._generated_corrupted,
        hf_module._decoded,
    ):
        cached.cache_clear()  # type: ignore[attr-defined]


def load(name: str, **options) -> list[np.ndarray]:
    new_process()
    return [np.asarray(s.images.images) for s in load_corrupted(name, **PICKED, **options)]


def kept_files() -> list[Path]:
    return sorted((cache_dir() / corrupted_cache.FOLDER).glob("*/*.npy"))


def test_a_new_process_reads_the_copies_back_without_generating(tmp_path, generated):
    name = f"folder:{write_tree(tmp_path / 'pets', {'train': 2, 'test': 2})},size=16"
    first = load(name)
    assert len(generated) == 4 and [p.name for p in kept_files()] == [
        "contrast-1.npy",
        "contrast-3.npy",
        "gaussian_noise-1.npy",
        "gaussian_noise-3.npy",
    ]
    new_process()
    sets = load_corrupted(name, **PICKED)
    assert len(generated) == 4  # nothing generated: read from the cache
    for kept, made in zip(sets, first, strict=True):
        np.testing.assert_array_equal(kept.images.images, made)
        assert not kept.images.images.flags.writeable
        assert kept.images.labels.tolist() == load_split(name, "test").labels.tolist()
    assert sets[0].images.name == f"{name}/gaussian_noise/1"


def touch(path: Path) -> None:
    """A second later: a file rewritten within the clock's tick would keep its modification time."""
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))


def test_a_changed_folder_is_generated_again(tmp_path, generated):
    root = write_tree(tmp_path / "pets", {"train": 2, "test": 2})
    load(f"folder:{root},size=16")
    touch(root / "val" / "bee" / "0.png")
    load(f"folder:{root},size=16")
    assert len(generated) == 8
    (root / "val" / "bee" / "2.png").write_bytes((root / "val" / "bee" / "1.png").read_bytes())  # one more image
    again = load(f"folder:{root},size=16")
    assert len(generated) == 12 and again[0].shape == (7, 16, 16, 3)
    load(f"folder:{root},size=20")  # fitted at another size: other images
    assert len(generated) == 16


def test_a_damaged_entry_is_generated_again_and_replaced(tmp_path, generated):
    name = f"folder:{write_tree(tmp_path / 'pets', {'train': 2, 'test': 2})},size=16"
    first = load(name)
    damaged = kept_files()[0]
    damaged.write_bytes(damaged.read_bytes()[:200])  # truncated mid-image
    (garbage := kept_files()[1]).write_bytes(b"not an array")
    second = load(name)
    assert sorted(generated[4:]) == [("contrast", 1), ("contrast", 3)]  # the two damaged entries only
    for kept, made in zip(second, first, strict=True):
        np.testing.assert_array_equal(kept, made)
    assert np.load(damaged).shape == np.load(garbage).shape == (6, 16, 16, 3)  # replaced whole


def test_a_cache_that_cannot_be_written_only_costs_generating_again(tmp_path, monkeypatch, generated):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder should be")  # refuses writes even to root
    monkeypatch.setenv("ARCHDSL_CACHE", str(blocked))
    name = f"folder:{write_tree(tmp_path / 'pets', {'train': 2, 'test': 2})},size=16"
    first, second = load(name), load(name)
    assert len(generated) == 8
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_copy_that_would_fill_the_disk_is_not_kept(tmp_path, monkeypatch, generated):
    monkeypatch.setattr(corrupted_cache, "FREE_RESERVE_BYTES", shutil.disk_usage(tmp_path).total)
    name = f"folder:{write_tree(tmp_path / 'pets', {'train': 2, 'test': 2})},size=16"
    load(name)
    assert kept_files() == []
    monkeypatch.setattr(corrupted_cache, "FREE_RESERVE_BYTES", 0)
    load(name)
    assert len(generated) == 8 and len(kept_files()) == 4


def test_a_changed_generator_is_generated_again(tmp_path, monkeypatch, generated):
    name = f"folder:{write_tree(tmp_path / 'pets', {'train': 2, 'test': 2})},size=16"
    load(name)
    code = registry._generator_code()

    def changed_operation(images):  # stands for an edit of the generator's source
        return images

    monkeypatch.setattr(registry, "_generator_code", lambda: (*code, changed_operation))
    load(name)
    assert len(generated) == 8 and len(kept_files()) == 8  # a second key beside the first


def test_fashion_mnist_c_is_kept_by_its_files_and_test_limit(tmp_path, monkeypatch, generated):
    spec = dataclasses.replace(mnist_module.SPECS["fashion-mnist"], system_folder=tmp_path / "no-debian")
    monkeypatch.setitem(mnist_module.SPECS, "fashion-mnist", spec)
    write_idx(tmp_path / "FashionMNIST" / "raw")
    first = load("fashion-mnist-c", root=tmp_path)
    load("fashion-mnist-c", root=tmp_path)
    assert len(generated) == 4 and first[0].shape == (20, 28, 28, 1)
    limited = load("fashion-mnist-c:test=10", root=tmp_path)
    assert len(generated) == 8 and limited[0].shape == (10, 28, 28, 1)
    mnist_module._read.cache_clear()
    write_idx(tmp_path / "FashionMNIST" / "raw", seed=1)  # other files in the data root
    touch(tmp_path / "FashionMNIST" / "raw" / "t10k-images-idx3-ubyte")
    assert not np.array_equal(load("fashion-mnist-c", root=tmp_path)[0], first[0])
    assert len(generated) == 12


@pytest.mark.extras
def test_an_hf_dataset_is_kept_until_it_is_saved_again(tmp_path, generated):
    pytest.importorskip("datasets")
    from test_data_hf import write_hf

    path = write_hf(tmp_path / "small")
    first = load(f"hf:{path},size=16")
    load(f"hf:{path},size=16")
    assert len(generated) == 4
    shutil.rmtree(path)  # files this process maps stay readable: unlinked, not rewritten in place
    write_hf(path, labels=[2, 1, 0, 2, 1, 0])  # saved again in the same folder
    again = load(f"hf:{path},size=16")
    assert len(generated) == 8 and again[0].shape == first[0].shape


def test_the_kept_copies_stay_within_the_cache_budget(tmp_path, monkeypatch, generated):
    # ARCHDSL_CORRUPTED_CACHE_GIB bounds the bytes under corrupted/: a copy that would pass it is not kept
    name = f"folder:{write_tree(tmp_path / 'pets', {'train': 2, 'test': 2})},size=16"
    first = load(name)
    entry = kept_files()[0].stat().st_size
    for path in kept_files():
        path.unlink()
    monkeypatch.setenv("ARCHDSL_CORRUPTED_CACHE_GIB", str(2.5 * entry / 2**30))
    again = load(name)
    assert len(kept_files()) == 2 and len(generated) == 8
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("value", ["lots", "-1", "nan"])
def test_a_bad_cache_budget_is_one_line(tmp_path, monkeypatch, value):
    monkeypatch.setenv("ARCHDSL_CORRUPTED_CACHE_GIB", value)
    name = f"folder:{write_tree(tmp_path / 'pets', {'train': 2, 'test': 2})},size=16"
    with pytest.raises(UserError, match=f"ARCHDSL_CORRUPTED_CACHE_GIB={value}: not a size in GiB"):
        load(name)
