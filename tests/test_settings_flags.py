"""One definition per setting: the flags, the `--config` keys and the settings fields are one list.

Each setting is a pydantic field (default, bounds, help, flag); `archdsl.commands.settings_flags`
makes the flags from it. These tests hold the command lines to the models: every field a command
takes has exactly one flag of its own, a `--config` key of the same name sets the same field, and
a value left out is the field's default.
"""

from __future__ import annotations

import argparse

import pytest

from archdsl import common_settings
from archdsl.analysis.settings import AnalysisSettings
from archdsl.analysis.sources import AnalysisSources, EvalSettings
from archdsl.cli import build_parser
from archdsl.commands.config_file import _setting_names
from archdsl.commands.settings_flags import settings_given
from archdsl.common_settings import (
    DataSettings,
    ProgressSettings,
    base_types,
    choices_of,
    is_bool,
    is_tuple,
    setting_flags,
    show,
)
from archdsl.run.recipe import TrainConfig, recipe_flags
from archdsl.run.session import TrainSettings
from archdsl.search.fidelity.measures import Fidelity
from archdsl.search.settings import SearchSettings

TRAIN_WORDS = ["alter-small-base", "--dataset", "synthetic"]
# Fields of TrainConfig without a flag: what a run records besides its settings, or decides itself.
TRAIN_CONFIG_UNFLAGGED = {"extended_at", "channels_last", "amp", "eval_batch_size"}
# (command, its settings model, the positional arguments it needs, fields the model has without a flag)
COMMANDS = [
    ("analyze", AnalysisSettings, ["ckpt.safetensors"], {"recipe"}),
    ("analyze", AnalysisSources, ["ckpt.safetensors"], set()),
    ("eval", EvalSettings, ["ckpt.safetensors"], set()),
    ("search", Fidelity, [], {"train_settings", "hessian_tol", "hessian_method", "latency_batch"}),
    ("search", SearchSettings, [], set()),
    ("train", TrainSettings, TRAIN_WORDS, set()),
    ("train", TrainConfig, TRAIN_WORDS, TRAIN_CONFIG_UNFLAGGED),
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
    assert settings == SearchSettings()
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
    return is_bool(flag.model.model_fields[flag.field].annotation)


def _other_value(flag) -> str:
    """A valid value of the setting that is not its default, as a command-line word."""
    if flag.required:  # train's --dataset: the positional words give it, and the command line wins
        return "synthetic"
    if flag.field == "device":  # a name the field checks
        return "cpu"
    if flag.field == "fidelity_source":  # a form the field checks (the table is read later)
        return "table:some-table"
    if flag.field == "measures":
        return "acc,hessian"
    if flag.field == "val_split":  # a fraction or a count, kept as written
        return "0.2"
    default = flag.default
    info = flag.model.model_fields[flag.field]
    choices = [c for c in flag.choices or choices_of(info.annotation) or () if c != default]
    if choices:
        return show(choices[0])
    if isinstance(default, tuple) or is_tuple(info.annotation):
        return "fog,contrast" if flag.field == "corruptions" else "1,5"
    if isinstance(default, bool):
        raise AssertionError("switches are checked by their BooleanOptionalAction")
    if isinstance(default, int):
        return str(default + 2 if flag.field == "points" else default + 1)  # the landscape's grid stays odd
    if isinstance(default, float):
        return show(default / 2)
    kinds = base_types(info.annotation)
    if default is None and float in kinds:
        return "0.5"  # (a probability too: --mixup-prob)
    if default is None and int in kinds:
        return "7"
    if flag.comma_list:
        return "accuracy,params" if flag.field == "objectives" else "k,heads"
    if default is None or isinstance(default, str):
        return f"{default or 'x'}-other"  # a name, path or URL: the command checks it later
    raise AssertionError(f"no test value for {flag.flag}")


DOC_TABLES = [
    ("analysis.md", AnalysisSettings, ()),
    ("analysis.md", AnalysisSources, ()),
    ("search.md", Fidelity, ()),
    ("search.md", SearchSettings, ()),
    ("training.md", TrainSettings, ()),
    ("training.md", TrainConfig, tuple(recipe_flags())),  # (the recipe's own: recipe_flags.recipe_table)
    ("training.md", EvalSettings, ()),
]


@pytest.mark.parametrize(("doc", "model", "exclude"), DOC_TABLES)
def test_the_docs_tables_are_made_from_the_fields(doc, model, exclude):
    from pathlib import Path

    from archdsl.common_settings import settings_table

    page = (Path(__file__).resolve().parents[1] / "docs" / doc).read_text(encoding="utf-8")
    assert settings_table(model, exclude=exclude) in page, (
        f"regenerate docs/{doc}'s table: common_settings.settings_table({model.__name__})"
    )


# Each command's settings models: (model, the fields it takes flags for; None: every one).
COMMAND_MODELS = {
    ("train",): [(TrainSettings, None), (TrainConfig, None)],
    ("analyze",): [(AnalysisSources, None), (AnalysisSettings, None)],
    ("eval",): [(EvalSettings, None)],
    # (the recipe's fields as train has them; the rest of TrainConfig is the study's own: --seed, --subset)
    ("search",): [(SearchSettings, None), (Fidelity, None), (TrainConfig, set(recipe_flags()) - {"epochs"})],
    ("data", "info"): [(DataSettings, None)],
    ("data", "corrupt"): [(DataSettings, None), (ProgressSettings, None)],
}
# The only flags a command writes by hand: they set no setting (an action, an output place, a
# replaced spelling), or belong to a command without a settings model (`data corrupt`'s).
COMMAND_ONLY = {
    ("train",): {"--help", "--config"},
    ("analyze",): {"--help", "--config", "--out", "--force", "--subset"},  # --subset: --test-subset's old name
    ("eval",): {"--help", "--config", "--json"},
    ("search",): {"--help", "--config", "--dry-run", "--test-subset"},  # --test-subset: --val-subset's old name
    ("data", "info"): {"--help", "--dataset", "--checksums"},
    ("data", "corrupt"): {"--help", "--dataset", "--out", "--corruptions", "--seed", "--force"},
}


def _parser_of(words: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for word in words:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[word]
    return parser


def _switch_pair(flag: str) -> set[str]:
    return {flag, "--no-" + flag.removeprefix("--")}


@pytest.mark.parametrize("words", sorted(COMMAND_MODELS))
def test_every_flag_of_a_command_is_made_from_a_settings_field(words):
    """No setting is defined twice: each option of the command is a field's flag (or one of its
    few command-only flags), and each field's flag is there and is a --config key."""
    parser = _parser_of(words)
    made: dict[str, object] = {}
    for model, fields in COMMAND_MODELS[words]:
        for flag in setting_flags(model):
            if fields is None or flag.field in fields:
                for spelling in _switch_pair(flag.flag) if _is_switch(flag) else {flag.flag}:
                    made[spelling] = flag
    options = {spelling for action in parser._actions for spelling in action.option_strings if spelling != "-h"}
    assert options - made.keys() - COMMAND_ONLY[words] == set(), "a flag written by hand: declare it on its field"
    assert made.keys() - options == set(), "a field's flag is missing"
    keys = _setting_names(parser)
    for spelling, flag in made.items():
        [action] = [a for a in parser._actions if spelling in a.option_strings]
        assert action.dest == flag.dest and action.default is None, spelling  # generated: left out is None
        if not spelling.startswith("--no-"):
            assert keys[spelling.removeprefix("--").replace("-", "_")][0].action is action, spelling  # a --config key
    assert COMMAND_ONLY[words] & made.keys() == set()  # (the list holds no setting)


SHARED_FIELDS = {
    name: base
    for base in (
        common_settings.DataSettings,
        common_settings.DeviceSettings,
        common_settings.OptimizeSettings,
        common_settings.ProgressSettings,
        common_settings.DistSettings,
    )
    for name in base.model_fields
}


@pytest.mark.parametrize(
    "model",
    [TrainSettings, TrainConfig, AnalysisSources, EvalSettings, SearchSettings, Fidelity],
    ids=lambda model: model.__name__,
)
def test_the_shared_settings_are_declared_once(model):
    """`data_root`, `device`, `progress`, ... are archdsl.common_settings' fields, inherited, never
    declared again with a default or help of their own."""
    for name, base in SHARED_FIELDS.items():
        if name in model.model_fields:
            assert issubclass(model, base), f"{model.__name__}.{name}: inherit {base.__name__}"
            assert name not in vars(model).get("__annotations__", {}), f"{model.__name__} redeclares {name}"
            assert repr(model.model_fields[name]) == repr(base.model_fields[name])


def _every_parser(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """`parser` and its subcommands' parsers, all the way down (the test may read argparse's lists)."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _every_parser(sub)
    return found


def test_every_parser_records_every_argument_it_was_given():
    """--config and the flag suggestions read each parser's own table (argparse keeps its list
    private): an argument added past the table (argparse's add_argument_group instead of
    `section`) would be neither a config key nor suggested."""
    for parser in _every_parser(build_parser()):
        recorded = [added.action for added in parser.added]
        subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        assert sorted(map(id, recorded + subcommands)) == sorted(map(id, parser._actions)), parser.prog


def test_the_project_uses_no_private_argparse_api():
    """argparse's underscored names (`parser._actions`, `argparse._StoreAction`) may change in any
    Python release: archdsl's code keeps its own table of the arguments it adds."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    offending = [
        f"{path.relative_to(root)}:{number}"
        for folder in ("archdsl", "search", "analysis")
        for path in sorted((root / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "parser._" in line or "argparse._" in line
    ]
    assert offending == []
