"""Block kinds as plug-ins (`archdsl.kinds`): two kinds built from timm's layers, registered from
outside the package (examples/blocks/archdsl_timm_blocks.py), written in a spec beside `msa`,
checked, printed, counted, compiled, trained, analysed, searched, and their mistakes reported as the
built-in words' are."""

from __future__ import annotations

import dataclasses
import importlib
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import archdsl
from archdsl import kinds
from archdsl.errors import UserError
from archdsl.ir import ExtBlock
from archdsl.lang.diagnostics import SpecError
from archdsl.lang.printer import format_arch
from archdsl.lang.spec import parse_spec
from archdsl.nn.summary import summarize

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "mbconv-convnext.arch"
EXAMPLES = ROOT / "examples" / "blocks"


@pytest.fixture
def registry():
    """The registry as the test left it is forgotten: each test starts with no plug-in kinds."""
    saved = dict(kinds._REGISTRY)
    kinds._REGISTRY.clear()
    yield kinds._REGISTRY
    kinds._REGISTRY.clear()
    kinds._REGISTRY.update(saved)


@pytest.fixture
def timm_blocks(registry, monkeypatch):
    """The example module imported (which registers `mbconv` and `convnext`)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    if "archdsl_timm_blocks" in sys.modules:
        module = importlib.reload(sys.modules["archdsl_timm_blocks"])
    else:
        module = importlib.import_module("archdsl_timm_blocks")
    return module


def _spec(blocks: str, *, width: int = 16, extra: str = "") -> str:
    return f"""arch t {{
    input   3x16x16
    classes 10
    stem    conv3x3(16)
    conv  = basic
    stage s1(width=16)        {{ {blocks} }}
    stage s2(width={width}, stride=2) {{ mbconv convnext }}{extra}
}}
"""


def test_an_unregistered_kind_is_an_unknown_block(registry):
    with pytest.raises(SpecError) as info:
        parse_spec(_spec("mbconv"), "t.arch")
    assert "unknown block `mbconv`" in str(info.value)


def test_the_example_spec_checks_prints_and_counts_as_built(timm_blocks):
    arch = archdsl.load_spec(SPEC)
    kinds_used = [block.kind for stage in arch.stages for block in stage.blocks]
    assert {"mbconv", "convnext", "msa"} <= set(kinds_used)
    assert parse_spec(format_arch(arch)) == arch  # the canonical text reads back
    summary = summarize(arch)
    model = archdsl.create_model(arch)
    assert summary.params == sum(p.numel() for p in model.parameters())
    for block, (name, module) in zip(summary.blocks, model.named_blocks(), strict=True):
        assert block.params == sum(p.numel() for p in module.parameters()), name
        assert module.kind == block.kind
    # The FLOPs too: torch's counter agrees on the whole model (with grad, the math attention kernel).
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        model.eval()(torch.zeros(1, *summary.input_shape))
    assert summary.flops == counter.get_total_flops()


def test_defaults_are_filled_in_so_equal_designs_have_one_digest(timm_blocks):
    short = parse_spec(_spec("mbconv convnext"))
    spelt = parse_spec(_spec("mbconv(4, kernel=3, se=0.25) convnext(7, 4, grn=false)"))
    assert short == spelt and short.digest() == spelt.digest()
    block = short.stages[0].blocks[0]
    assert isinstance(block, ExtBlock) and block.arguments == {"expansion": 4, "kernel": 3, "se": 0.25}
    other = parse_spec(_spec("mbconv(6) convnext"))
    assert other.digest() != short.digest()
    assert "mbconv(expansion=6)" in format_arch(other)


def test_a_stored_design_needs_its_kind_registered(timm_blocks):
    arch = parse_spec(_spec("mbconv convnext"))
    text = arch.model_dump_json()
    assert archdsl.Arch.model_validate_json(text) == arch
    archdsl.unregister_block("mbconv")
    with pytest.raises(ValueError, match="unknown block kind 'mbconv'"):
        archdsl.Arch.model_validate_json(text)


@pytest.mark.parametrize("value", [10**400, -(10**400)])
def test_a_stored_argument_too_large_for_a_float_is_refused_with_a_message(timm_blocks, value):
    """A checkpoint's design is read without the front end: an integer no float can hold is an
    argument out of bounds, not an OverflowError."""
    from archdsl.run.checkpoint import checked_design

    text = parse_spec(_spec("mbconv(6) convnext")).model_dump_json()
    assert '["expansion",6]' in text
    bad = text.replace('["expansion",6]', f'["expansion",{value}]')
    with pytest.raises(UserError, match="the checkpoint's design does not parse: .*expansion must be at"):
        checked_design(bad, "ckpt.safetensors")


@pytest.mark.parametrize(
    "blocks,at,message,hint",
    [
        ("mbconv(expansion=0)", "0", "expansion must be at least 1, got 0", None),
        ("mbconv(expansion=99)", "99", "expansion must be at most 16, got 99", None),
        ("mbconv(expnsion=6)", "expnsion", "unknown argument `expnsion` for `mbconv`", "did you mean `expansion`?"),
        ("mbconv(se=2)", "2", "se must be at most 1, got 2", None),
        ("mbconv(se=big)", "big", "se must be a number, not `big`", "se is written like 1e-6 or 0.5"),
        ("mbconv(1.5)", "1.5", "expansion must be a whole number, got 1.5", None),
        ("convnext(grn=ture)", "ture", "grn must be `true` or `false`, not `ture`", "did you mean `true`?"),
        ("convnext(kernel=4)", "4", "kernel 4 has no centre", "use an odd size: 3 or 5"),
        ("convnext(7, 4, true, 1)", "1", "`convnext` takes at most 3 positional arguments (kernel, ratio, grn)", None),
        ("mbconvv", "mbconvv", "unknown block `mbconvv`", "did you mean `mbconv`?"),
        ("convnxt(5)", "convnxt", "unknown block `convnxt`", "did you mean `convnext`?"),
    ],
)
def test_bad_arguments_read_like_the_built_in_words(timm_blocks, blocks, at, message, hint):
    text = _spec(blocks)
    with pytest.raises(SpecError) as info:
        parse_spec(text, "t.arch")
    diagnostics = info.value.diagnostics
    assert [d.message for d in diagnostics] == [message]
    assert diagnostics[0].hint == hint
    span = diagnostics[0].span
    assert span is not None and span.line == 6  # the stage line, with a caret under the mistake
    line = text.splitlines()[5]
    assert line[span.column - 1 : span.end_column - 1] == at
    assert "^" in str(info.value)


def test_a_squeeze_excite_of_no_channels_is_reported_at_se(timm_blocks):
    # 16 channels x se=0.02 round to no squeeze-excite channel: timm builds an empty conv that fails in
    # the first forward pass. The kind's check says so at `se`, before anything is built.
    text = _spec("mbconv(se=0.02)")
    with pytest.raises(SpecError) as info:
        parse_spec(text, "t.arch")
    [found] = info.value.diagnostics
    assert found.message == "se=0.02 squeezes the 16 channels to none: round(16 x 0.02) = 0"
    assert found.hint == "use se=0 (no squeeze-excite) or at least se=0.032"
    assert found.span is not None and text.splitlines()[5][found.span.column - 1 : found.span.end_column - 1] == "0.02"
    # The smallest ratio the hint gives builds and runs.
    arch = parse_spec(_spec("mbconv(se=0.032)"))
    model = archdsl.create_model(arch)
    assert model(torch.zeros(1, 3, 16, 16)).shape == (1, 10)


def test_a_kind_may_point_at_its_stage_width(timm_blocks, registry):
    # An Issue may name the stage's `width` (or `stride`): the caret goes under that setting.
    def even_width(place: kinds.Placement) -> list[kinds.Issue]:
        if place.width % 2 == 0:
            return []
        return [kinds.Issue(f"stage {place.stage} has odd width {place.width}", "halve an even one", stage="width")]

    archdsl.register_block(dataclasses.replace(timm_blocks.CONVNEXT, name="evenly", check=even_width))
    text = _spec("mbconv", width=15).replace("mbconv convnext }", "mbconv evenly }")
    with pytest.raises(SpecError) as info:
        parse_spec(text, "t.arch")
    [found] = info.value.diagnostics
    assert (found.message, found.hint) == ("stage s2 has odd width 15", "halve an even one")
    assert found.span is not None and text.splitlines()[6][found.span.column - 1 : found.span.end_column - 1] == (
        "width=15"
    )


def test_a_kinds_activations_count_in_the_memory_estimate(timm_blocks):
    from archdsl.nn.summary import memory_estimate

    arch = parse_spec(_spec("mbconv(6) convnext"))
    declared = memory_estimate(summarize(arch), arch).activations
    archdsl.register_block(dataclasses.replace(timm_blocks.MBCONV, activations=None), replace=True)
    undeclared = memory_estimate(summarize(arch), arch).activations
    # 4 bytes a value of the expanded maps, before and after the depthwise conv: s1's mbconv(6) keeps
    # 16x16, s2's mbconv (expansion 4) goes from 16x16 to 8x8; both read 16 channels.
    assert declared - undeclared == 4 * (16 * 6 * (256 + 256) + 16 * 4 * (256 + 64))


def test_shape_rules_apply_to_registered_kinds(timm_blocks):
    # convnext keeps its channels and does not downsample: it cannot start a strided stage.
    with pytest.raises(SpecError) as info:
        parse_spec(_spec("mbconv", extra="\n    stage s3(width=32, stride=2) { convnext }"))
    assert [d.message for d in info.value.diagnostics] == [
        "a `convnext` block cannot downsample: it is the first block of stage s3, which has stride 2"
    ]
    # A stage of convnext blocks only keeps what it receives: its width must say so.
    with pytest.raises(SpecError) as info:
        parse_spec(_spec("convnext", extra="\n    stage s3(width=64, stride=1) { convnext }"))
    assert "mismatched dims: stage s3 has width 64, but its blocks keep the 16 channels" in str(info.value)


def test_registration_refuses_built_in_names_and_clashes(registry, timm_blocks):
    with pytest.raises(ValueError, match="built-in"):
        kinds.BlockKind("msa", (), count=lambda place: (0, 0), build="x:y")
    clash = kinds.BlockKind("mbconv", (), count=lambda place: (0, 0), build="x:y")
    with pytest.raises(ValueError, match="already registered"):
        archdsl.register_block(clash)
    timm_blocks.register()  # the same declarations again: nothing changes


def test_kinds_come_from_entry_points(registry, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))

    class Point:
        name, value = "timm", "archdsl_timm_blocks:kinds"

        def load(self):
            import archdsl_timm_blocks

            return archdsl_timm_blocks.kinds

    monkeypatch.setattr(kinds, "entry_points", lambda group: [Point()] if group == kinds.ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(kinds, "_entry_points_read", False)
    sys.modules.pop("archdsl_timm_blocks", None)
    registry.clear()  # as a fresh process finds it, before anything is looked up
    assert kinds.block_kind("convnext") is not None
    assert parse_spec(_spec("mbconv convnext")).n_blocks == 4


def test_a_missing_builder_is_a_user_error(registry):
    kind = kinds.BlockKind(
        "ghost",
        (kinds.Arg("size", int, default=2, low=1),),
        count=lambda place: (0, 0),
        build="archdsl:nothing",
        downsamples=True,
    )
    archdsl.register_block(kind)
    with pytest.raises(UserError) as info:
        archdsl.create_model(parse_spec(_spec("ghost").replace("mbconv convnext", "ghost")))
    assert "block kind `ghost`" in str(info.value) and "`archdsl:nothing`" in str(info.value)
    with pytest.raises(UserError, match="unknown block kind `nope`"):
        kinds.require_kind("nope")


def _failing(error: Exception):
    def hook(*args):
        raise error

    return hook


def _ghost(**hooks) -> kinds.BlockKind:
    """A kind of one argument that builds a conv; `hooks` replace its count, check, activations or build."""

    def build(place, drop_path):
        return torch.nn.Conv2d(place.in_channels, place.out_channels, 3, place.stride, 1)

    fields = {"count": lambda place: (0, 0), "build": build} | hooks
    return kinds.BlockKind("ghost", (kinds.Arg("size", int, default=2, low=1),), downsamples=True, **fields)


@pytest.mark.parametrize(
    "hooks,hook,error",
    [
        ({"check": _failing(RuntimeError("check broke"))}, "check", "RuntimeError: check broke"),
        ({"check": lambda place: [("size", "too short")]}, "check", "TypeError: it gave ('size', 'too short')"),
        ({"count": _failing(KeyError("kernel"))}, "count", "KeyError: 'kernel'"),
        ({"count": lambda place: 7}, "count", "TypeError: it returned 7, not (params, MACs)"),
        ({"count": lambda place: (10, 2.5)}, "count", "TypeError: it returned (10, 2.5), not (params, MACs)"),
        ({"activations": _failing(ZeroDivisionError("oops"))}, "activations", "ZeroDivisionError: oops"),
        ({"build": "nowhere_at_all:f"}, "build `nowhere_at_all:f`", "ModuleNotFoundError: No module named"),
        ({"build": _failing(ValueError("no"))}, "build", "ValueError: no"),
        ({"build": lambda place, drop_path: 3}, "build", "TypeError: it returned a int, not a torch.nn.Module"),
    ],
)
def test_a_plug_in_hook_that_fails_is_a_user_error_naming_it(registry, hooks, hook, error):
    # A broken plug-in is its author's mistake: the user reads which kind, which hook, which module and
    # what went wrong, and the CLI exits with a message (a UserError), not a traceback.
    archdsl.register_block(_ghost(**hooks))
    with pytest.raises(UserError) as info:
        arch = parse_spec(_spec("ghost").replace("mbconv convnext", "ghost"))
        archdsl.create_model(arch)
    message = str(info.value)
    assert message.startswith(f"block kind `ghost` (declared in {__name__}): its {hook} failed: "), message
    assert error in message
    assert info.value.hint == "the plug-in that declares it has a bug: report it to its author"


def test_a_kind_names_the_module_that_declared_it(timm_blocks):
    # Not the module of its count (mbconv's comes from archdsl.nn.meta_count).
    assert timm_blocks.MBCONV.module == timm_blocks.CONVNEXT.module == "archdsl_timm_blocks"
    assert dataclasses.replace(timm_blocks.MBCONV, name="other").module == "archdsl_timm_blocks"


def test_a_hook_that_fails_ends_archdsl_check_with_a_message(registry, tmp_path, capsys):
    from archdsl.cli import main

    archdsl.register_block(_ghost(check=_failing(RuntimeError("check broke"))))
    path = tmp_path / "t.arch"
    path.write_text(_spec("ghost").replace("mbconv convnext", "ghost"))
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "its check failed: RuntimeError: check broke" in err and "Traceback" not in err


@pytest.mark.parametrize("build", ["nowhere", "a:b:c", "mod:", ":f", "my-blocks:f"])
def test_a_build_path_must_read_module_colon_function(registry, build):
    with pytest.raises(ValueError, match='is not "module:function"'):
        _ghost(build=build)


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"args": (kinds.Arg("k", int, default=2.5),)}, "its default does not fit: k must be a whole number, got 2.5"),
        ({"args": (kinds.Arg("k", int, default=True),)}, "k must be a whole number, got True"),
        ({"args": (kinds.Arg("k", float, default="x"),)}, "k must be a number, got 'x'"),
        ({"args": (kinds.Arg("g", bool, default=1),)}, "g must be true or false, got 1"),
        ({"args": (kinds.Arg("k", int, default=0, low=1),)}, "k must be at least 1, got 0"),
        ({"args": (kinds.Arg("k", int, default=9, high=8),)}, "k must be at most 8, got 9"),
        ({"args": (kinds.Arg("a", str, default="tanh", choices=("relu",)),)}, "a must be one of relu, got 'tanh'"),
        ({"args": (kinds.Arg("k", int, low=3, high=1),)}, "low 3 is above high 1"),
        ({"args": (kinds.Arg("Kernel", int),)}, "use lower-case letters, digits and `_`"),
        ({"args": (kinds.Arg("dim-head", int),)}, "use lower-case letters, digits and `_`"),
        ({"args": (kinds.Arg("k", int, choices=("a",)),)}, "only a str argument takes `choices`"),
        ({"layout": "maps"}, 'layout must be "map" or "tokens", got \'maps\''),
        ({"channels": "same"}, 'channels must be "width" or "keep", got \'same\''),
    ],
)
def test_declaration_mistakes_are_refused_when_declared(changes, message):
    with pytest.raises(ValueError) as info:
        dataclasses.replace(_ghost(), **changes)
    assert message in str(info.value)


@pytest.mark.slow
def test_train_analyse_and_search_a_plug_in_design(timm_blocks, tmp_path):
    from test_train_loop import colour_classes

    from archdsl.run.recipe import TrainConfig
    from archdsl.run.train import train

    arch = parse_spec(_spec("mbconv(2) convnext msa(2, 4, dim_head=8)", width=32))
    config = TrainConfig(recipe="fast", epochs=1, batch_size=32, lr=0.05, device="cpu")
    result = train(arch, colour_classes(64, 0), colour_classes(32, 1), config, run_dir=tmp_path, progress=False)
    assert len(result.history) == 1 and torch.isfinite(torch.tensor(result.history[0].train_loss))
    # The run's files read back with the kind registered: spec and checkpoint.
    from archdsl.run.checkpoint import load_checkpoint

    assert parse_spec((tmp_path / "spec.arch").read_text()) == arch
    assert load_checkpoint(tmp_path / "final.safetensors").arch == arch
    # Analysis: the feature-map measures see every block, named by its kind.
    from archdsl.analysis.fourier import delta_log_amplitude

    profile = delta_log_amplitude(result.model.eval(), torch.rand(4, 3, 16, 16))
    assert [layer.kind for layer in profile.layers][1:4] == ["mbconv", "convnext", "msa"]
    # Search: the build-up space keeps the plug-in blocks where a conv would stand.
    from archdsl.search.space import make_space

    space = make_space(arch)
    for k, expected in ((0, ["mbconv", "convnext"]), (1, ["mbconv", "msa"])):
        params = {name: values[0] for name, values in space.choices().items()} | {"k_s2": k}
        designed = space.arch_from_params(params)
        assert [b.kind for b in designed.stages[1].blocks] == expected
        assert summarize(designed).params == sum(p.numel() for p in archdsl.create_model(designed).parameters())


def test_the_language_doc_example_runs_and_prints_what_it_shows(registry, capsys):
    from _doc_files import section

    text = section((ROOT / "docs" / "language.md").read_text(encoding="utf-8"), "Your own block kinds")
    code = re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)
    shown = re.search(r"^The last lines print\n\n```\n(.*?)^```", text, re.M | re.S)
    assert code and shown
    for block in code:
        exec(compile(block, "language.md", "exec"), {"__name__": "__docs__"})
    assert capsys.readouterr().out == shown.group(1)
    assert kinds.block_kind("dsconv") is None  # the example leaves the registry as it found it


def test_required_choice_and_bare_kinds_read_like_the_built_in_words(timm_blocks):
    def zero(place):
        return 0, 0

    archdsl.register_block(
        kinds.BlockKind(
            "gate",
            (kinds.Arg("heads", int, low=1), kinds.Arg("act", str, default="gelu", choices=("gelu", "relu"))),
            count=zero,
            build="x:y",
            downsamples=True,
        )
    )
    archdsl.register_block(
        kinds.BlockKind("blur", (), count=zero, build="x:y", channels="keep", description="a fixed blur")
    )

    def problems(blocks: str) -> list[tuple[str, str | None]]:
        with pytest.raises(SpecError) as info:
            parse_spec(_spec(blocks))
        return [(d.message, d.hint) for d in info.value.diagnostics]

    assert problems("gate") == [("`gate` needs `heads`", "e.g. `gate(1)`")]
    assert problems("gate(act=relu)") == [("`gate` needs `heads`", "e.g. `gate(1)`")]
    assert problems("gate(2, act=rleu)") == [("act must be `gelu` or `relu`, not `rleu`", "did you mean `relu`?")]
    assert problems("gate(2) blur(1)") == [("`blur` takes no arguments", "it is a fixed blur: write `blur`")]
    arch = parse_spec(_spec("gate(2, act=relu) blur"))
    assert "gate(2, act=relu) blur" in format_arch(arch)
    assert parse_spec(format_arch(arch)) == arch


class _Point:
    """An entry point of the group `archdsl.blocks` as importlib.metadata gives it."""

    def __init__(self, name: str, target):
        self.name, self.value, self._target = name, f"pkg_{name}:kinds", target
        self.dist = SimpleNamespace(name=f"pkg-{name}")  # the installed distribution that declares it

    def load(self):
        if isinstance(self._target, BaseException):
            raise self._target
        return self._target


def _fresh_entry_points(monkeypatch, registry, *points) -> None:
    """`points` are the installed entry points, read afresh (as a new process reads them)."""
    monkeypatch.setattr(kinds, "entry_points", lambda group: list(points) if group == kinds.ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(kinds, "_entry_points_read", False)
    monkeypatch.setattr(kinds, "_entry_point_failures", [])
    registry.clear()


def _unknown(blocks: str) -> tuple[str, str | None]:
    with pytest.raises(SpecError) as info:
        parse_spec(_spec(blocks).replace("mbconv convnext", "conv"))
    [found] = info.value.diagnostics
    return found.message, found.hint


@pytest.mark.parametrize(
    "target,why",
    [
        (lambda: None, "TypeError: it gave NoneType, not a BlockKind or a list of them"),
        (lambda: ["mbconv"], "TypeError: it gave str among its kinds, not BlockKind"),
        (lambda: [kinds.BlockKind("msa", (), count=lambda p: (0, 0), build="x:y")], "ValueError: `msa` is a built-in"),
        (ImportError("no module named pkg_bad"), "ImportError: no module named pkg_bad"),
    ],
)
def test_a_broken_entry_point_is_told_where_a_block_stays_unknown(registry, monkeypatch, target, why):
    # One broken plug-in neither stops the others loading nor replaces a spec's own diagnostics; its
    # failure is told in the hint of a block name it may have declared, which stays unknown.
    good = _Point("good", [_ghost()])
    _fresh_entry_points(monkeypatch, registry, _Point("bad", target), good)
    assert kinds.block_kind("ghost") is not None  # the entry point after the broken one loaded
    message, hint = _unknown("gizmo")
    assert message == "unknown block `gizmo`"
    assert hint is not None and hint.startswith("blocks are: conv, msa, attn, mlp, merge, pool, smooth, ghost; ")
    assert (
        f"the archdsl.blocks entry point `bad` (pkg_bad:kinds) of the distribution pkg-bad could not be loaded: {why}"
        in hint
    )
    # A typo keeps its did-you-mean (the failure follows it: it may be why a word is unknown).
    message, hint = _unknown("convv")
    assert message == "unknown block `convv`" and hint is not None and hint.startswith("did you mean `conv`?; ")
    assert parse_spec(_spec("ghost").replace("mbconv convnext", "ghost")).n_blocks == 2


def test_an_unknown_block_far_from_every_word_says_how_kinds_are_added(registry, monkeypatch):
    _fresh_entry_points(monkeypatch, registry)
    message, hint = _unknown("gizmo")
    assert message == "unknown block `gizmo`"
    assert hint == (
        "blocks are: conv, msa, attn, mlp, merge, pool, smooth; a block kind is added from Python"
        " (archdsl.register_block) or by an installed package's `archdsl.blocks` entry point;"
        ' see docs/language.md, "Your own block kinds"'
    )
    assert _unknown("convv") == ("unknown block `convv`", "did you mean `conv`?")


@pytest.mark.parametrize(
    "arg,value,problem",
    [
        ("expansion", -4, "expansion must be at least 1, got -4"),
        ("expansion", 99, "expansion must be at most 16, got 99"),
        ("expansion", True, "expansion must be a whole number, got True"),
        ("expansion", 2.5, "expansion must be a whole number, got 2.5"),
        ("se", "big", "se must be a number, got 'big'"),
        ("se", 1.5, "se must be at most 1, got 1.5"),
        ("se", float("nan"), "se must be a number, got nan"),
    ],
)
def test_a_stored_plug_in_block_is_held_to_its_declaration(timm_blocks, tmp_path, arg, value, problem):
    # A checkpoint's IR is not read by the front end: the IR's validator checks each value against its Arg,
    # and a checkpoint reader turns that into a UserError naming the file.
    import json

    from archdsl.run.checkpoint import checked_design

    data = parse_spec(_spec("mbconv convnext")).model_dump(mode="json")
    block = data["stages"][0]["blocks"][0]
    block["args"] = [[name, value if name == arg else given] for name, given in block["args"]]
    with pytest.raises(ValueError, match=re.escape(f"block kind 'mbconv': {problem}")):
        archdsl.Arch.model_validate(data)
    with pytest.raises(UserError) as info:
        checked_design(json.dumps(data), "run/final.safetensors")
    assert str(info.value).startswith("run/final.safetensors: the checkpoint's design does not parse: ")
    assert problem in str(info.value)


def test_counts_may_be_numpy_integers(registry):
    import numpy as np

    archdsl.register_block(_ghost(count=lambda place: (np.int64(10), np.int64(20))))
    summary = summarize(parse_spec(_spec("ghost").replace("mbconv convnext", "ghost")))
    assert [(block.params, block.flops) for block in summary.blocks] == [(10, 40)] * 2  # a MAC is 2 FLOPs


def test_a_stored_whole_number_reads_as_a_float_argument(timm_blocks):
    data = parse_spec(_spec("mbconv convnext")).model_dump(mode="json")
    block = data["stages"][0]["blocks"][0]
    block["args"] = [[name, 0 if name == "se" else given] for name, given in block["args"]]
    assert archdsl.Arch.model_validate(data).stages[0].blocks[0].arguments["se"] == 0


def test_a_missing_argument_below_one_stands_in_within_its_bounds(registry):
    # While the rest of a spec is checked, a missing required argument takes a neutral value: one its
    # bounds allow, or the IR holding it would be refused (a traceback instead of the message).
    archdsl.register_block(dataclasses.replace(_ghost(), args=(kinds.Arg("shift", int, low=-5, high=-1),)))
    with pytest.raises(SpecError) as info:
        parse_spec(_spec("ghost").replace("mbconv convnext", "ghost"))
    found = [(d.message, d.hint) for d in info.value.diagnostics]
    assert found == [("`ghost` needs `shift`", "e.g. `ghost(-1)`")] * 2  # one for each stage


def test_the_example_spec_says_how_to_load_its_kinds(timm_blocks):
    # The command in the example's comment runs as written, from the repository's root.
    import os
    import shlex
    import subprocess

    [line] = [line for line in SPEC.read_text().splitlines() if line.startswith("#   PYTHONPATH=")]
    env_setting, *command = shlex.split(line.removeprefix("#   "))
    name, _, value = env_setting.partition("=")
    env = os.environ | {name: value}
    command[0] = sys.executable
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == archdsl.load_spec(SPEC).n_blocks


def test_a_token_kind_cannot_carry_the_class_token(registry):
    # A plug-in is told nothing of a class token before the patches (its Placement has no prefix),
    # so a `head class` net must not hand it 1 + HW tokens: refused as `merge` is, at the block.
    def build(place):
        return torch.nn.Identity()

    archdsl.register_block(
        kinds.BlockKind(
            name="tokmix", args=(), count=lambda place: (0, 0), build=build, layout="tokens", channels="keep"
        )
    )
    text = """arch t {
    input   3x8x8
    classes 10
    stem    patch(2, 32)
    head    class
    pos     absolute
    stage s1(width=32) { attn(2, global) tokmix mlp(2) }
}
"""
    with pytest.raises(SpecError) as info:
        parse_spec(text, "t.arch")
    assert "a `tokmix` block cannot carry the class token (`head class`)" in str(info.value)
    assert "t.arch:7:" in str(info.value)  # at the block, not the head line
    parse_spec(text.replace("head    class", "head    mean").replace("    pos     absolute\n", ""), "t.arch")


# -- a plug-in that misbehaves (issue 32, item 7): one line naming it, no traceback, nothing written --


def _ghost_spec(tmp_path: Path, blocks: str = "ghost") -> Path:
    """The test spec with `blocks` in both stages, as a file for the command line."""
    path = tmp_path / "t.arch"
    path.write_text(_spec(blocks).replace("mbconv convnext", blocks))
    return path


def _one_error(capsys) -> str:
    """What a command printed on stderr, checked to be archdsl's message (no traceback)."""
    err = capsys.readouterr().err
    assert err.startswith("archdsl: error: ") and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "hooks,hook,returned",
    [
        ({"count": lambda place: (10**400, 0)}, "count", "about 10^400"),
        ({"count": lambda place: (0, 2**63)}, "count", "9223372036854775808"),
        # Beyond the digits Python turns into text at all (4,300): still said, not a ValueError.
        ({"count": lambda place: (10**5000, 10**5000)}, "count", "about 10^5000"),
        ({"activations": lambda place: 10**400}, "activations", "about 10^400"),
    ],
)
def test_a_count_beyond_the_largest_archdsl_keeps_is_refused_naming_the_bound(
    registry, tmp_path, capsys, hooks, hook, returned
):
    # Once an OverflowError in the memory estimate (a float of the bytes): now the hook's result is
    # refused where the hook is called, naming the kind, the hook and the bound.
    from archdsl.cli import main

    archdsl.register_block(_ghost(**hooks))
    assert main(["check", str(_ghost_spec(tmp_path))]) == 1
    err = _one_error(capsys)
    assert f"block kind `ghost` (declared in {__name__}): its {hook} failed: " in err
    assert returned in err and "more than 2**63 - 1" in err
    assert len(err.splitlines()) == 2  # the message and its hint


def test_the_largest_count_archdsl_keeps_is_accepted(registry):
    archdsl.register_block(_ghost(count=lambda place: (0, 2**63 - 1), activations=lambda place: 2**63 - 1))
    summary = summarize(parse_spec(_spec("ghost").replace("mbconv convnext", "ghost")))
    assert [block.flops for block in summary.blocks] == [2 * (2**63 - 1)] * 2


def _exits(place):
    sys.exit(0)


def test_a_hook_that_exits_is_a_failed_hook(registry, tmp_path, capsys):
    # sys.exit in a hook once ended `archdsl check` with no output and status 0.
    from archdsl.cli import main

    archdsl.register_block(_ghost(count=_exits))
    assert main(["check", str(_ghost_spec(tmp_path))]) == 1
    err = _one_error(capsys)
    assert "block kind `ghost` (declared in test_block_kinds): its count failed: it called sys.exit(0)" in err


def test_ctrl_c_stops_a_hook_that_hangs(registry, tmp_path, capsys):
    # A hook runs in archdsl's process and is not timed (docs/language.md): Ctrl-C is how a hung one
    # is stopped, and it is the interruption it is, not a failed hook.
    from archdsl.cli import main

    archdsl.register_block(_ghost(count=_failing(KeyboardInterrupt())))
    assert main(["check", str(_ghost_spec(tmp_path))]) == 130
    said = "archdsl: interrupted in the count of block kind `ghost` (declared in test_block_kinds)"
    assert capsys.readouterr().err == f"{said}\n"  # which plug-in hangs


SLEEPY_PLUGIN = """\
import os
import pathlib
import time

from archdsl.kinds import BlockKind


def count(place):
    pathlib.Path(os.environ["SLEEPY_MARK"]).write_text("counting")  # the test's cue to press Ctrl-C
    time.sleep(600)
    return (0, 0)


def kinds():
    return BlockKind(name="sleepy", args=(), count=count, build=lambda place, drop_path: None, channels="keep")
"""


def test_ctrl_c_stops_an_installed_plugin_whose_count_hangs_and_names_it(tmp_path):
    """`archdsl check` as a user runs it, its plug-in found through an installed package's entry point (a
    dist-info folder on PYTHONPATH), its `count` asleep: SIGINT (Ctrl-C) ends it at once with one line that
    names the hook and the kind, exit status 130."""
    import os
    import signal
    import subprocess
    import time

    (tmp_path / "sleepy_blocks.py").write_text(SLEEPY_PLUGIN)
    info = tmp_path / "sleepy_blocks-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sleepy-blocks\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[archdsl.blocks]\nsleepy = sleepy_blocks:kinds\n")
    spec = _ghost_spec(tmp_path, "conv sleepy")
    mark = tmp_path / "counting"
    env = os.environ | {"PYTHONPATH": str(tmp_path), "SLEEPY_MARK": str(mark), "PYTHONWARNINGS": "ignore"}
    checking = subprocess.Popen(
        [sys.executable, "-m", "archdsl", "check", str(spec)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # A shell's background job ignores SIGINT, and a child inherits that: this one gets Ctrl-C as a terminal's.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while not mark.exists() and checking.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert mark.exists(), checking.communicate(timeout=60)[0] if checking.poll() is not None else "no count"
        checking.send_signal(signal.SIGINT)
        output, _ = checking.communicate(timeout=60)
    finally:
        checking.kill()
    assert checking.returncode == 130, output
    assert output == "archdsl: interrupted in the count of block kind `sleepy` (declared in sleepy_blocks)\n"
    assert output in (ROOT / "docs" / "language.md").read_text(encoding="utf-8")  # the line the doc shows


def test_ctrl_c_while_an_entry_point_loads_names_it(registry, monkeypatch, tmp_path, capsys):
    # A plug-in module that hangs as it is imported: Ctrl-C says which entry point was loading.
    from archdsl.cli import main

    _fresh_entry_points(monkeypatch, registry, _Point("slow", KeyboardInterrupt()))
    assert main(["check", str(_ghost_spec(tmp_path))]) == 130
    said = "archdsl: interrupted while loading the archdsl.blocks entry point `slow` (pkg_slow:kinds)"
    said += " of the distribution pkg-slow"
    assert capsys.readouterr().err == f"{said}\n"


class _Exiting(BaseException):
    """Not an Exception: what a plug-in might raise to stop everything."""


@pytest.mark.parametrize(
    "target,why",
    [
        (SystemExit(0), "it called sys.exit(0)"),
        (SystemExit("bye"), "it called sys.exit('bye')"),
        (_Exiting("x"), "_Exiting: x"),
    ],
)
def test_an_entry_point_that_exits_while_loading_is_a_failed_entry_point(
    registry, monkeypatch, tmp_path, capsys, target, why
):
    # Once `archdsl check` printed nothing and exited 0: the entry point's exit ended archdsl.
    from archdsl.cli import main

    _fresh_entry_points(monkeypatch, registry, _Point("bad", target), _Point("good", [_ghost()]))
    assert main(["check", str(_ghost_spec(tmp_path))]) == 0  # the other entry points still load
    capsys.readouterr()
    assert main(["check", str(_ghost_spec(tmp_path, "gizmo"))]) == 1
    err = capsys.readouterr().err
    assert "unknown block `gizmo`" in err and "Traceback" not in err
    assert (
        f"the archdsl.blocks entry point `bad` (pkg_bad:kinds) of the distribution pkg-bad could not be loaded: {why}"
        in err
    )


def _wrong_channels(place, drop_path):
    return torch.nn.Conv2d(place.in_channels, place.out_channels + 1, 3, place.stride, 1)


def _stride_ignored(place, drop_path):
    return torch.nn.Conv2d(place.in_channels, place.out_channels, 3, 1, 1)


def _tuple_out(place, drop_path):
    class Pair(torch.nn.Module):
        def forward(self, x):
            return x, x

    return Pair()


def _forward_fails(place, drop_path):
    return torch.nn.Linear(3, 3)  # reads the last dimension: 16 columns are not 3


@pytest.mark.parametrize(
    "build,message",
    [
        (
            _wrong_channels,
            "block kind `ghost` (declared in test_block_kinds) at stages.s1.0: its module gives 1x17x16x16"
            " for an input of 1x16x16x16, not 1x16x16x16 (B x C x H x W) as its declaration says",
        ),
        (
            _stride_ignored,
            "block kind `ghost` (declared in test_block_kinds) at stages.s2.0: its module gives 1x16x16x16"
            " for an input of 1x16x16x16, not 1x16x8x8 (B x C x H x W) as its declaration says",
        ),
        (_tuple_out, "at stages.s1.0: its module gives a tuple for an input of 1x16x16x16, not a tensor"),
        (_forward_fails, "block kind `ghost` (declared in test_block_kinds): its forward pass failed: RuntimeError:"),
    ],
)
def test_a_module_that_breaks_its_shape_rule_is_refused_where_it_is_built(registry, build, message):
    # Once a RuntimeError from deep inside the next layer, at the first forward pass: each plug-in
    # block now runs once on a dummy input where it is built, its output held to its declaration.
    archdsl.register_block(_ghost(build=build))
    arch = parse_spec(_spec("ghost conv").replace("mbconv convnext", "ghost"))
    with pytest.raises(UserError) as info:
        archdsl.create_model(arch)
    assert message in str(info.value)
    assert "Traceback" not in str(info.value)


def test_a_token_kind_is_held_to_its_token_shape(registry):
    def build(place, drop_path):
        return torch.nn.Linear(place.in_channels, place.out_channels // 2)

    archdsl.register_block(
        kinds.BlockKind(name="tokmix", args=(), count=lambda place: (0, 0), build=build, layout="tokens")
    )
    text = """arch t {
    input   3x8x8
    classes 10
    stem    patch(2, 32)
    stage s1(width=32) { attn(2, global) tokmix mlp(2) }
}
"""
    with pytest.raises(
        UserError, match=re.escape("its module gives 1x16x16 for an input of 1x16x32, not 1x16x32 (B x tokens x C)")
    ):
        archdsl.create_model(parse_spec(text))


def test_a_good_plug_in_block_is_built_as_before(registry):
    # The dummy pass leaves the block in training mode and its weights where they were; a model built
    # on the meta device (the expected weight shapes) is not run.
    from archdsl.nn.weights import expected_shapes

    archdsl.register_block(_ghost())
    arch = parse_spec(_spec("ghost conv").replace("mbconv convnext", "ghost"))
    first, second = archdsl.create_model(arch, seed=3), archdsl.create_model(arch, seed=3)
    assert all(module.training for module in first.modules())
    assert all(
        torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True)
    )
    assert set(expected_shapes(arch)) == set(first.state_dict())


@pytest.mark.parametrize("command", ["compile", "train", "search"])
def test_a_module_of_the_wrong_shape_ends_a_command_before_its_folder_is_made(registry, tmp_path, capsys, command):
    from _search_support import DATASET, TINY_BASE

    from archdsl.cli import main

    archdsl.register_block(_ghost(build=_wrong_channels))
    spec = tmp_path / "base.arch"
    spec.write_text(TINY_BASE.replace("{ conv*2 }", "{ ghost conv }"))
    out = tmp_path / "out"
    common = ["--dataset", DATASET, "--epochs", "1", "--batch-size", "32", "--device", "cpu", "--out", str(out)]
    argv = {
        "compile": ["compile", str(spec)],
        "train": ["train", str(spec), *common, "--no-progress"],
        "search": ["search", "--base", str(spec), *common, "--no-progress"],
    }[command]
    assert main(argv) == 1
    err = _one_error(capsys)
    assert "block kind `ghost` (declared in test_block_kinds) at stages.c1.0: its module gives 1x9x32x32" in err
    assert not out.exists()
