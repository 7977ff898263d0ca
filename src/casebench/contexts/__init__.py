"""Contexts for your own queries: a model writes a safe and an unsafe CI context per query
(``casebench contexts generate``), giving a dataset without votes, ready for annotation.

The heavy lifting is the ordinary run engine (``casebench.runs``); this package only adds the
mode that asks for contexts and reads them, the query loader and the dataset writer.
"""

from __future__ import annotations

from .generate import (
    ContextsMode, Failure, answer_schema, GenerateResult, QueriesError, generate, load_queries, queries_dataset,
    read_generated, write_generated,
)

__all__ = [
    "ContextsMode", "Failure", "answer_schema", "GenerateResult", "QueriesError", "generate", "load_queries", "queries_dataset",
    "read_generated", "write_generated",
]
