"""Blocks: pre-activation conv blocks, the AlterNet MSA block, stem and head."""
