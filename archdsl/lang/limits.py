"""The limits of the language, in one place (docs/language.md lists them).

They keep every input, however hostile, to a clear error in bounded time and memory: a
spec file is read only up to its size limit; numbers, stages, blocks and names have
ceilings far above any real network; and an IR read from a file (a checkpoint, a study)
is held to exactly the same limits as one written in a spec (`archdsl.lang.checks`).
The memory a design needs is estimated, and refused above its limit, where models are
built (`archdsl.nn.summary.MEMORY_LIMIT_BYTES`).
"""

MAX_SOURCE_BYTES = 256 * 1024  # a spec file (the largest built-in one is under 1 KiB)
MAX_NUMBER = 2**31 - 1  # any number in a design (int32, what torch's shapes take)
MAX_STAGES = 64
MAX_BLOCKS = 1000  # in the whole design, after repeats are expanded
MAX_GROUP_DEPTH = 32  # nested `[...]`
MAX_NAME_LENGTH = 64  # arch and stage names (they become file and module names)
