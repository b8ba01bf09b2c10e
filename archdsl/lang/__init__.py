"""Text -> IR: the `.arch` language (grammar, parser, lowering, checks, diagnostics, printer).

Pure Python: nothing here imports torch, so `archdsl check` and `archdsl fmt` answer at once.
"""
