"""Ingest: user rows -> rows of a graph table, enforcing the engine's data rules.

Pure pyarrow (no pyspark, no lance): the Spark and store layers call these per batch on
executors (:class:`RowConverter`) and once per load on the driver (:mod:`.checks`).
"""
from __future__ import annotations

from .convert import EDGE_ENDPOINTS, RowConverter, fill_missing_ids, fresh_ids
from .policy import DIFFERS_FROM_ENGINE, STRICTER_THAN_ENGINE

__all__ = [
    "RowConverter", "EDGE_ENDPOINTS", "fresh_ids", "fill_missing_ids",
    "STRICTER_THAN_ENGINE", "DIFFERS_FROM_ENGINE",
]
