"""One module per command: each parses its flags into the library's settings, calls the library
(`archdsl`, `archdsl.analysis`, `archdsl.search`, `archdsl.run`: their exports only) and prints.
`archdsl.cli` gathers them. Nothing here is API: Python callers use the functions the commands call.
"""

__all__: list[str] = []
