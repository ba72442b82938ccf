"""The built-in defaults, in a module that imports nothing (the CLI reads them for `--help`)."""

DEFAULT_DB = "situated.db"
DEFAULT_EMBEDDER = "minilm-static"
DEFAULT_RECONSTRUCTOR = "rules"
ENDPOINT_EMBEDDERS = frozenset({"openai"})
"""Embedders that take the `embedder_*` endpoint settings (`situated.config`)."""
ENDPOINT_RECONSTRUCTORS = frozenset({"llm"})
"""Reconstructors that take the `reconstructor_*` endpoint settings."""
OPEN_END = 253402300799.0
"""The sentinel `valid_until` for "still valid" (9999-12-31T23:59:59Z as epoch seconds).

Stored instead of NULL because sqlite-vec's KNN filter cannot express `IS NULL OR ...`."""
DEFAULT_DISTILLER = "rules"
DEFAULT_EXTRACTOR = "none"
ENDPOINT_DISTILLERS = frozenset({"llm"})
"""Distillers that take the `distiller_*` endpoint settings."""
ENDPOINT_EXTRACTORS = frozenset({"llm"})
"""Conversation extractors that take the `distiller_*` endpoint settings."""
