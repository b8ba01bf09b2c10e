"""The built-in `.arch` specs, shipped as package data `archdsl.specs` (see archdsl.lang.spec)."""
