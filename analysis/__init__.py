"""Analysis of trained candidates (imported as `archdsl.analysis`)."""
