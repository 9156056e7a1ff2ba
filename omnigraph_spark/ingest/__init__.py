"""Ingest: user rows -> rows of a graph table, enforcing the engine's data rules.

Pure pyarrow (no pyspark, no lance): the Spark and store layers call :class:`RowConverter`
per batch on executors and :mod:`.checks` once per load on the driver. :mod:`.jsonl` reads the
engine's JSONL envelope into the same rows. :mod:`.policy` lists where we are stricter than
the engine (``STRICTER_THAN_ENGINE``).
"""

from __future__ import annotations

from .checks import (
    check_cardinality,
    check_endpoints,
    check_fresh_ids,
    check_unique,
    raise_key_conflict,
    shadowed_src_counts,
    src_counts,
    unique_groups,
)
from .convert import EDGE_ENDPOINTS, RowConverter, fill_missing_ids, fresh_ids
from .jsonl import parse_record, records_to_batch
from .policy import DIFFERS_FROM_ENGINE, STRICTER_THAN_ENGINE

__all__ = [
    "RowConverter",
    "EDGE_ENDPOINTS",
    "fresh_ids",
    "fill_missing_ids",
    "check_unique",
    "check_endpoints",
    "check_cardinality",
    "unique_groups",
    "src_counts",
    "shadowed_src_counts",
    "check_fresh_ids",
    "raise_key_conflict",
    "parse_record",
    "records_to_batch",
    "STRICTER_THAN_ENGINE",
    "DIFFERS_FROM_ENGINE",
]
