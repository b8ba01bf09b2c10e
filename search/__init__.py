"""Search where the MSAs go (imported as `archdsl.search`)."""
