"""The registry of source formats and the weight comparison used to report mismatches."""

from __future__ import annotations

import pytest
import torch

from archdsl.errors import UserError
from archdsl.lang.spec import load_spec
from archdsl.nn.build import build
from archdsl.nn.convert import convert_state_dict, detect_format, formats, get_format
from archdsl.nn.weights import compare_weights, expected_shapes


@pytest.fixture(scope="module")
def arch():
    return load_spec("tiny")


def test_every_format_has_a_unique_name_and_describes_itself() -> None:
    known = formats()
    assert "archdsl" in known
    for name, fmt in known.items():
        assert fmt.name == name and fmt.description


def test_a_plain_archdsl_state_dict_is_recognised_and_kept(arch) -> None:
    state = build(arch, seed=0).state_dict()
    assert detect_format(state).name == "archdsl"
    fmt, converted = convert_state_dict(arch, state)
    assert fmt.name == "archdsl"
    assert converted.keys() == state.keys()
    assert all(converted[k] is state[k] for k in state)


def test_no_format_claims_an_unknown_layout_and_the_error_names_keys() -> None:
    with pytest.raises(UserError, match=r"no known layout.*encoder\.layer0\.weight") as err:
        detect_format({"encoder.layer0.weight": torch.zeros(1)})
    assert "--format" in err.value.hint


def test_an_unknown_format_name_lists_the_known_ones() -> None:
    with pytest.raises(UserError, match="unknown checkpoint format 'caffe'") as err:
        get_format("caffe")
    assert "archdsl" in err.value.hint


def test_expected_shapes_match_a_real_model_without_allocating(arch) -> None:
    real = {k: tuple(v.shape) for k, v in build(arch, seed=0).state_dict().items()}
    assert expected_shapes(arch) == real


def test_compare_weights_names_each_kind_of_difference_with_counts(arch) -> None:
    expected = expected_shapes(arch)
    state = {k: torch.zeros(shape) for k, shape in expected.items()}
    assert not compare_weights(expected, state)
    keys = sorted(state)
    for key in keys[:7]:
        del state[key]
    state["extra.weight"] = torch.zeros(2)
    state[keys[-1]] = torch.zeros(3, 1)
    mismatch = compare_weights(expected, state)
    assert mismatch.missing == tuple(keys[:7])
    assert mismatch.unexpected == ("extra.weight",)
    assert mismatch.misshaped == ((keys[-1], expected[keys[-1]], (3, 1)),)
    text = mismatch.describe(first=5)
    assert f"7 missing: {', '.join(keys[:5])}, ... (2 more)" in text
    assert "1 unexpected: extra.weight" in text
    assert f"{keys[-1]} 3x1 (expected {'x'.join(map(str, expected[keys[-1]]))})" in text
