"""The built-in `.arch` specs, shipped as package data `archdsl.specs` (see archdsl.lang.spec)."""

__all__: list[str] = []  # data only: the .arch files (archdsl.lang.spec.load_spec reads them)
