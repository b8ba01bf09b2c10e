"""archdsl's specs as timm models.

After `import archdsl`, every built-in spec is a timm model named `archdsl_<spec>` (a `-` in
the spec's name is written `_`, as in every timm name):

    import archdsl, timm
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

When the registration happens: importing timm costs seconds (it imports torch), and `import
archdsl` must stay light (`archdsl check` never imports torch). So `import archdsl` calls
`install_timm_hook()`, which imports nothing: if timm is already imported, the specs are
registered at once; otherwise a finder on `sys.meta_path` waits for the first `import timm`
(by the user, by timm's own users, or by archdsl's compiler) and registers them as soon as
timm's package has loaded. Registering parses the built-in specs (~0.1 s).
"""

from __future__ import annotations

import importlib.abc
import sys
import warnings
from collections.abc import Callable
from os import PathLike
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from archdsl.ir import Arch

PREFIX = "archdsl_"

# timm's `register_model` reads the module's `default_cfgs` (model name -> pretrained cfg) and
# appends each model's name to `__all__`; the entry points are set as attributes of this module.
default_cfgs: dict[str, dict[str, Any]] = {}
__all__ = ["PREFIX", "install_timm_hook", "register_builtin_specs", "register_timm", "timm_name"]

_builtins_registered = False


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
        from archdsl.lang.spec import load_spec

        spec = load_spec(spec)
    model_name = name if name is not None else timm_name(spec.name)
    if not model_name or "." in model_name or ":" in model_name:
        raise UserError(f"bad timm model name {model_name!r}", hint="timm names have no `.` (tags) and no `:`")
    _register(model_name, spec)
    return model_name


def register_builtin_specs() -> list[str]:
    """Register every built-in spec with timm (once); return their timm names."""
    global _builtins_registered
    from archdsl.lang.spec import builtin_names, load_spec

    names = builtin_names()
    if not _builtins_registered:
        for spec_name in names:
            _register(timm_name(spec_name), load_spec(spec_name))
        _builtins_registered = True
    return [timm_name(n) for n in names]


def _register(model_name: str, arch: Arch) -> None:
    from timm.models import register_model

    from archdsl.nn.timm_cfg import pretrained_cfg

    def entrypoint(pretrained: bool = False, **kwargs: Any) -> Any:
        return _create(model_name, arch, pretrained, **kwargs)

    entrypoint.__name__ = entrypoint.__qualname__ = model_name
    entrypoint.__module__ = __name__
    entrypoint.__doc__ = f"The archdsl spec `{arch.name}` (id {arch.short_id}) as a timm model."
    default_cfgs[model_name] = pretrained_cfg(arch)
    setattr(sys.modules[__name__], model_name, entrypoint)
    register_model(entrypoint)


def _create(variant: str, arch: Arch, pretrained: bool, **kwargs: Any) -> Any:
    from functools import partial

    from timm.models import build_model_with_cfg

    from archdsl.nn.build import create_model
    from archdsl.nn.timm_cfg import feature_info

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


# -- registering when timm is imported ------------------------------------------------------


def install_timm_hook() -> None:
    """Make the built-in specs timm models: now if timm is imported, else right after it is.

    Imports nothing itself; called by `import archdsl`.
    """
    if "timm" in sys.modules:
        _register_quietly()
    elif not any(isinstance(finder, _AfterTimmImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterTimmImport())


def _register_quietly() -> None:
    # Never break someone else's `import timm`: a failure here is reported, not raised.
    try:
        register_builtin_specs()
    except Exception as err:
        warnings.warn(f"archdsl could not register its specs with timm: {err}", RuntimeWarning, stacklevel=2)


class _AfterTimmImport(importlib.abc.MetaPathFinder):
    """Finds `timm` through the other finders and has its loader register the specs after it runs."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "timm":
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and not isinstance(spec.loader, _RegisterAfterLoading):
            spec.loader = _RegisterAfterLoading(spec.loader)
        return spec


class _RegisterAfterLoading(importlib.abc.Loader):
    """timm's own loader, then the registration; timm's module keeps its own loader."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        try:
            self.loader.exec_module(module)
        finally:
            module.__loader__ = self.loader
            if module.__spec__ is not None:
                module.__spec__.loader = self.loader
        for finder in [f for f in sys.meta_path if isinstance(f, _AfterTimmImport)]:
            sys.meta_path.remove(finder)
        _register_quietly()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        return getattr(self.loader, name)
