"""One definition per setting: the flags, the `--config` keys and the settings fields are one list.

Each setting is a pydantic field (default, bounds, help, flag); `archdsl.commands.settings_flags`
makes the flags from it. These tests hold the command lines to the models: every field a command
takes has exactly one flag of its own, a `--config` key of the same name sets the same field, and
a value left out is the field's default.
"""

from __future__ import annotations

import argparse

import pytest

from archdsl.analysis.settings import AnalysisSettings
from archdsl.cli import build_parser
from archdsl.commands.settings_flags import _base_types, choices_of, setting_flags, settings_given, show
from archdsl.run.recipe import TrainConfig, recipe_flags
from archdsl.run.session import TrainSettings
from archdsl.search.measures import Fidelity
from archdsl.search.session import SearchSettings

# (command, its settings model, the positional arguments it needs, fields the model has without a flag)
COMMANDS = [
    ("analyze", AnalysisSettings, ["ckpt.safetensors"], {"recipe"}),
    ("search", Fidelity, [], {"train_settings", "hessian_tol", "hessian_method", "latency_batch", "optimize"}),
    # (the study's settings shared with other commands have their flags in archdsl.commands._args)
    ("search", SearchSettings, [], {"data_root", "download", "device", "progress", "dist_timeout"}),
    (
        "train",
        TrainSettings,
        ["alter-small-base", "--dataset", "synthetic"],
        {"data_root", "download", "progress", "dist_timeout"},
    ),
]


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[command]


def _leaf_fields(model, path=()) -> set[str]:
    found = set()
    for name, info in model.model_fields.items():
        annotation = info.annotation
        nested = isinstance(annotation, type) and hasattr(annotation, "model_fields") and annotation is not TrainConfig
        found |= _leaf_fields(annotation, (*path, name)) if nested else {".".join((*path, name))}
    return found


@pytest.mark.parametrize(("command", "model", "positional", "unflagged"), COMMANDS)
def test_every_field_has_one_flag_of_its_own(command, model, positional, unflagged):
    flags = setting_flags(model)
    paths = {".".join(f.path) for f in flags}
    assert paths == _leaf_fields(model) - unflagged  # no setting without its flag, none left over
    parser = _subparser(command)
    for flag in flags:
        owners = [a for a in parser._actions if flag.flag in a.option_strings]
        assert len(owners) == 1 and owners[0].dest == flag.dest, flag.flag  # not hand-written a second time
        assert owners[0].default is None  # left out: the field's default, not a copy of it
        assert flag.help and flag.help in owners[0].help.replace("%%", "%")


@pytest.mark.parametrize(("command", "model", "positional", "unflagged"), COMMANDS)
def test_a_config_key_sets_the_field_its_flag_sets(tmp_path, command, model, positional, unflagged):
    flags = setting_flags(model)
    # Every setting at a value other than its default, once as flags and once as the file's keys.
    flags = [flag for flag in flags if not _is_switch(flag)]  # (switches: their own test below)
    chosen = {flag: _other_value(flag) for flag in flags}
    words = [word for flag, value in chosen.items() for word in (flag.flag, value)]
    from_flags = build_parser().parse_args([command, *positional, *words])
    config = tmp_path / "settings.yaml"
    config.write_text("".join(f"{flag.dest}: '{value}'\n" for flag, value in chosen.items()), encoding="utf-8")
    from_file = build_parser().parse_args([command, *positional, "--config", str(config)])
    given = settings_given(from_flags, model)
    assert given == settings_given(from_file, model)
    built = model(**given)
    for flag in flags:
        value = built
        for part in flag.path:
            value = getattr(value, part)
        assert show(value) == chosen[flag], flag.flag  # the flag's value reached its field


@pytest.mark.parametrize(("command", "model", "positional", "unflagged"), COMMANDS)
def test_a_setting_left_out_is_the_fields_default(command, model, positional, unflagged):
    args = build_parser().parse_args([command, *positional])
    required = {flag.field for flag in setting_flags(model) if flag.required}  # (among the positional words)
    assert {field: value for field, value in settings_given(args, model).items() if field not in required} == {}


@pytest.mark.parametrize(("command", "model", "positional", "unflagged"), COMMANDS)
def test_a_switch_sets_its_field_both_ways(command, model, positional, unflagged):
    for flag in filter(_is_switch, setting_flags(model)):
        off = "--no-" + flag.flag.removeprefix("--")
        for words, value in (([flag.flag], True), ([off], False)):
            args = build_parser().parse_args([command, *positional, *words])
            expected: object = value
            for part in reversed(flag.path):
                expected = {part: expected}
            given = settings_given(args, model)
            assert {key: given[key] for key in expected} == expected, flag.flag


def test_the_search_commands_study_settings_are_search_settings():
    """`archdsl search`'s flags build the SearchSettings a Python caller gets: left out, the
    fields' defaults; a value the field refuses is refused as the model refuses it."""
    from archdsl.commands.search import settings_from_args

    settings, _ = settings_from_args(build_parser().parse_args(["search"]))
    assert settings == SearchSettings(progress=True)  # (bars on a terminal: the command's own default)
    chosen, _ = settings_from_args(
        build_parser().parse_args(
            ["search", "--strategy", "tpe", "--objectives", "accuracy,params", "--seed-endpoints"]
        )
    )
    assert (chosen.strategy, chosen.objectives, chosen.seed_endpoints) == ("tpe", "accuracy,params", True)
    for words in (["--strategy", "nope"], ["--n-trials", "0"], ["--max-retry", "-1"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["search", *words])


def _is_switch(flag) -> bool:
    return isinstance(flag.default, bool)


def test_the_recipe_flags_are_train_configs_fields():
    parser = _subparser("train")
    for field, (flag, _) in recipe_flags().items():
        [action] = [a for a in parser._actions if flag in a.option_strings]
        assert action.dest == field and action.default is None


def _other_value(flag) -> str:
    """A valid value of the setting that is not its default, as a command-line word."""
    if flag.required:  # train's --dataset: the positional words give it, and the command line wins
        return "synthetic"
    default = flag.default
    info = flag.model.model_fields[flag.field]
    choices = [c for c in flag.choices or choices_of(info.annotation) or () if c != default]
    if choices:
        return show(choices[0])
    if isinstance(default, tuple):
        return "1,5"
    if isinstance(default, bool):
        raise AssertionError("switches are checked by their BooleanOptionalAction")
    if isinstance(default, int):
        return str(default + 2 if flag.field == "points" else default + 1)  # the landscape's grid stays odd
    if isinstance(default, float):
        return show(default / 2)
    kinds = _base_types(info.annotation)
    if default is None and float in kinds:
        return "1.5"
    if default is None and int in kinds:
        return "7"
    if flag.comma_list:
        return "accuracy,params" if flag.field == "objectives" else "k,heads"
    if default is None or isinstance(default, str):
        return f"{default or 'x'}-other"  # a name, path or URL: the command checks it later
    raise AssertionError(f"no test value for {flag.flag}")


@pytest.mark.parametrize(("doc", "model"), [("analysis.md", AnalysisSettings), ("search.md", Fidelity)])
def test_the_docs_tables_are_made_from_the_fields(doc, model):
    from pathlib import Path

    from archdsl.commands.settings_flags import settings_table

    page = (Path(__file__).resolve().parents[1] / "docs" / doc).read_text(encoding="utf-8")
    assert settings_table(model) in page, (
        f"regenerate docs/{doc}'s table: settings_flags.settings_table({model.__name__})"
    )
