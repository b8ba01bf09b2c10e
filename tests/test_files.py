"""The I/O layer: a write either replaces the file whole or leaves the old one untouched."""

from __future__ import annotations

import errno
import json
import os
import stat

import pytest
from matplotlib.figure import Figure

from archdsl.files import atomic_path, atomic_writer, held_lock, save_figure, write_json, write_text


def test_a_failed_write_keeps_the_previous_file_and_leaves_no_temporary(tmp_path):
    target = write_text(tmp_path / "metrics.json", "old\n")
    with pytest.raises(RuntimeError), atomic_writer(target) as stream:
        stream.write("half a fi")
        raise RuntimeError("disk full")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]


def test_writes_create_the_folder_and_replace_the_file(tmp_path):
    target = tmp_path / "a" / "b" / "record.json"
    write_json(target, {"x": 1, "path": tmp_path})
    write_json(target, {"x": 2})
    assert json.loads(target.read_text()) == {"x": 2}
    assert sorted(p.name for p in target.parent.iterdir()) == ["record.json"]


def test_the_temporary_path_keeps_the_suffix_for_format_sniffing_writers(tmp_path):
    with atomic_path(tmp_path / "figure.png") as temporary:
        assert temporary.suffix == ".png" and temporary.parent == tmp_path
        temporary.write_bytes(b"png")
    assert (tmp_path / "figure.png").read_bytes() == b"png"
    figure = Figure()
    figure.add_subplot().plot([0, 1], [1, 0])
    path = save_figure(figure, tmp_path / "plot.svg")
    assert path.read_text().lstrip().startswith("<?xml")  # svg chosen from the suffix


def test_a_failed_rename_names_the_target_not_the_temporary_file(tmp_path):
    # A folder where the file goes: the rename fails, and the message must name the user's path.
    (tmp_path / "metrics.csv").mkdir()
    with pytest.raises(OSError) as info:
        write_text(tmp_path / "metrics.csv", "epoch\n")
    assert info.value.filename == str(tmp_path / "metrics.csv")
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.csv"]  # no temporary file left


@pytest.fixture
def umask():
    """Set the process umask for a test, and put it back."""
    before = os.umask(0o022)
    yield os.umask
    os.umask(before)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_a_new_file_honours_the_umask_as_open_would(tmp_path, umask, mask):
    umask(mask)
    for path in (write_text(tmp_path / "a.txt", "x"), save_figure(Figure(), tmp_path / "b.png")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path
    with open(tmp_path / "plain.txt", "w") as stream:  # what a plain write gives, for comparison
        stream.write("x")
    assert stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode) == 0o666 & ~mask


def test_a_replaced_file_keeps_its_mode(tmp_path, umask):
    umask(0o077)
    path = tmp_path / "shared.json"
    path.write_text("{}")
    path.chmod(0o664)
    write_json(path, {"x": 1})
    assert stat.S_IMODE(path.stat().st_mode) == 0o664 and json.loads(path.read_text()) == {"x": 1}


def test_a_write_through_a_symlink_replaces_the_target_and_keeps_the_link(tmp_path):
    target = tmp_path / "real" / "spec.arch"
    target.parent.mkdir()
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "link.arch"
    os.symlink(target, link)
    write_text(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.arch", "real"]


@pytest.mark.parametrize("code", [errno.ENOLCK, errno.EOPNOTSUPP])
def test_a_file_system_without_locks_runs_the_block_unlocked(tmp_path, monkeypatch, code):
    """Some NFS mounts refuse flock (ENOLCK): the lock is a courtesy between writers, so the
    write goes on without it instead of ending in a traceback."""
    import fcntl

    def refused(handle, operation):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(fcntl, "flock", refused)
    with held_lock(tmp_path / ".lock"):
        write_text(tmp_path / "report.md", "written")
    assert (tmp_path / "report.md").read_text() == "written"


def test_another_error_of_the_lock_is_raised(tmp_path, monkeypatch):
    import fcntl

    def broken(handle, operation):
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))

    monkeypatch.setattr(fcntl, "flock", broken)
    with pytest.raises(OSError, match="Bad file descriptor"), held_lock(tmp_path / ".lock"):
        pass
