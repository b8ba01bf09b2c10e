"""archdsl's specs as timm models.

Once this module is imported, every built-in spec is a timm model named `archdsl_<spec>` (a `-` in
the spec's name is written `_`, as in every timm name):

    import timm, archdsl
    timm.list_models("archdsl_*")                              # ['archdsl_alter18', ...]
    model = timm.create_model("archdsl_alter50", num_classes=10)
    archdsl.register_timm("my.arch")                           # 'archdsl_my_net'

The prefix keeps them apart from timm's own models (timm has a `resnet50`). timm builds them
with its own `build_model_with_cfg`, so `pretrained_cfg`, `features_only=True` (through
`ArchNet.forward_intermediates`), `checkpoint_path=` and timm's keywords (`num_classes`,
`in_chans`, `img_size`, `drop_rate`, `drop_path_rate`) behave as for timm's models. There are
no pretrained weights: `pretrained=True` alone is refused by timm (a `RuntimeError`), as for any
model without weights; train with `archdsl train`, or load a checkpoint with `checkpoint_path=`,
or name a weights file with `pretrained=True, pretrained_cfg_overlay={"file": PATH}`: an archdsl
checkpoint, or any file `archdsl import` reads (converted on the way in).

When the registration happens: as for timm's own models, importing this module registers the
built-in specs (timm's convention: the module that defines the models calls `register_model` as it is
imported); registering parses the built-in specs (~0.1 s). It imports timm (seconds: it imports torch), and
`import archdsl` stays light (`archdsl check` never imports torch), so `import archdsl` imports this module
only where timm is already imported; otherwise `import archdsl.nn.timm_models` (or any name from it, such as
`archdsl.register_timm`) makes the specs timm models:

    import timm, archdsl                        # timm first: registered by `import archdsl`
    import archdsl.nn.timm_models               # in any order
"""

from __future__ import annotations

import sys
from functools import partial
from os import PathLike
from typing import TYPE_CHECKING, Any

from timm.models import build_model_with_cfg, register_model

from archdsl.lang.spec import builtin_names, load_spec
from archdsl.nn.timm_cfg import feature_info, pretrained_cfg

if TYPE_CHECKING:
    from archdsl.ir import Arch

PREFIX = "archdsl_"

# timm's `register_model` reads the module's `default_cfgs` (model name -> pretrained cfg) and
# appends each model's name to `__all__`; the entry points are set as attributes of this module.
default_cfgs: dict[str, dict[str, Any]] = {}
__all__ = ["PREFIX", "register_timm", "timm_name"]


def timm_name(spec_name: str) -> str:
    """The timm model name of a spec: `alter50` -> `archdsl_alter50`, `vit-ti` -> `archdsl_vit_ti`."""
    return PREFIX + spec_name.replace("-", "_")


def register_timm(spec: Arch | str | PathLike[str], *, name: str | None = None) -> str:
    """Register a spec (an `Arch`, a `.arch` path or a built-in name) as a timm model; return its name.

    The name is `archdsl_<spec name>` unless `name` is given. Registering a name again replaces
    the model (timm warns).
    """
    from archdsl.errors import UserError
    from archdsl.ir import Arch

    if not isinstance(spec, Arch):
        spec = load_spec(spec)
    model_name = name if name is not None else timm_name(spec.name)
    if not model_name or "." in model_name or ":" in model_name:
        raise UserError(f"bad timm model name {model_name!r}", hint="timm names have no `.` (tags) and no `:`")
    _register(model_name, spec)
    return model_name


def _register(model_name: str, arch: Arch) -> None:
    def entrypoint(pretrained: bool = False, **kwargs: Any) -> Any:
        return _create(model_name, arch, pretrained, **kwargs)

    entrypoint.__name__ = entrypoint.__qualname__ = model_name
    entrypoint.__module__ = __name__
    entrypoint.__doc__ = f"The archdsl spec `{arch.name}` (id {arch.short_id}) as a timm model."
    default_cfgs[model_name] = pretrained_cfg(arch)
    setattr(sys.modules[__name__], model_name, entrypoint)
    register_model(entrypoint)


def _create(variant: str, arch: Arch, pretrained: bool, **kwargs: Any) -> Any:
    from archdsl.nn.build import create_model

    # features_only returns every feature map by default (timm's CNNs have five: stem + four stages).
    every_map = tuple(range(len(feature_info(arch))))
    return build_model_with_cfg(
        partial(create_model, arch),
        variant,
        pretrained,
        feature_cfg={"feature_cls": "getter", "out_indices": every_map},
        pretrained_filter_fn=partial(_in_archdsl_layout, arch),
        **kwargs,
    )


def _in_archdsl_layout(arch: Arch, state: dict[str, Any], model: Any = None) -> dict[str, Any]:
    """timm's `pretrained_filter_fn`: the weights of a `pretrained_cfg_overlay={"file": ...}` in
    any layout `archdsl import` reads (archdsl's own, the reference implementation's, timm's
    ViT/PiT/Swin), detected from the keys and converted for the registered spec `arch` (timm
    then drops the classifier if `num_classes` differs)."""
    from archdsl.nn.convert import convert_state_dict

    return convert_state_dict(arch, state)[1]


# Every built-in spec, registered as this module is imported (timm's own models are, by `@register_model`).
for _spec_name in builtin_names():
    _register(timm_name(_spec_name), load_spec(_spec_name))
