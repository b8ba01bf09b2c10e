"""Blocks: pre-activation conv blocks, the AlterNet MSA block, stem and head."""

# One module per kind of block; `archdsl.nn.build` picks them. Nothing here is API of its own.
__all__: list[str] = []
