"""Finding and loading specs: built-in names, paths, and the errors for neither."""

from __future__ import annotations

import pytest

from archdsl.errors import UserError
from archdsl.ir import Arch
from archdsl.lang.spec import builtin_names, load_spec, resolve_spec


def test_builtin_specs_include_the_tiny_ones_and_all_load():
    names = builtin_names()
    assert {"tiny", "tiny-basic"} <= set(names)
    for name in names:
        assert isinstance(load_spec(name), Arch)


def test_tiny_specs_are_small_and_have_an_msa():
    for name in ("tiny", "tiny-basic"):
        arch = load_spec(name)
        assert arch.classes == 10 and arch.input.height <= 32 and arch.n_msa >= 1
        assert max(stage.width for stage in arch.stages) <= 64
    assert load_spec("tiny-basic").conv.variant == "basic"


def test_bare_name_is_builtin_and_path_is_a_file(tmp_path, monkeypatch):
    assert resolve_spec("tiny").name == "tiny.arch"
    spec = tmp_path / "tiny.arch"
    spec.write_text(resolve_spec("tiny").read_text().replace("classes 10", "classes 7"))
    monkeypatch.chdir(tmp_path)
    assert load_spec("tiny.arch").classes == 7  # ends in .arch: a file in the working directory
    assert load_spec("tiny").classes == 10  # bare: the built-in, even with a same-named file here
    assert load_spec(spec).classes == 7


def test_unknown_builtin_lists_the_names_and_suggests_one():
    with pytest.raises(UserError) as info:
        resolve_spec("tinny")
    assert "no built-in spec named `tinny`" in str(info.value)
    assert "did you mean `tiny`?" in info.value.hint and "tiny-basic" in info.value.hint


def test_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_spec(tmp_path / "nope.arch")
    with pytest.raises(UserError, match="is a directory"):
        load_spec(str(tmp_path) + "/")


def test_non_utf8_file_is_a_user_error(tmp_path):
    path = tmp_path / "bin.arch"
    path.write_bytes(b"\xff\xfe\x00arch")
    with pytest.raises(UserError, match="not UTF-8"):
        load_spec(path)
