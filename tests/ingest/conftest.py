"""Shared fixtures for the ingest tests: hand-written schema IR (spec §B.2) -> Catalog."""

from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from omnigraph_spark.schema.catalog import Catalog  # noqa: E402


def prop(name, scalar, nullable=False, lst=False, enum=None, annotations=()):
    return {
        "name": name,
        "prop_id": 1,
        "prop_type": {
            "scalar": scalar,
            "nullable": nullable,
            "list": lst,
            "enum_values": sorted(enum) if enum else None,
        },
        "annotations": [{"name": a, "value": None} for a in annotations],
    }


def node(name, props, constraints=()):
    return {
        "name": name,
        "type_id": 1,
        "annotations": [],
        "implements": [],
        "properties": sorted(props, key=lambda p: p["name"]),
        "constraints": list(constraints),
    }


def edge(name, src, dst, props=(), constraints=(), card=None):
    return {
        "name": name,
        "type_id": 2,
        "from_type": src,
        "to_type": dst,
        "cardinality": card or {"min": 0, "max": None},
        "annotations": [],
        "properties": sorted(props, key=lambda p: p["name"]),
        "constraints": list(constraints),
    }


def catalog(nodes, edges=()):
    return Catalog.from_ir({"ir_version": 1, "interfaces": [], "nodes": list(nodes), "edges": list(edges)})


@pytest.fixture
def test_catalog():
    """The fixture test.pg, written by hand (spec §B.4)."""
    return catalog(
        [
            node("Company", [prop("name", "String", annotations=["key"])], [{"Key": ["name"]}]),
            node(
                "Person",
                [prop("age", "I32", nullable=True), prop("name", "String", annotations=["key"])],
                [{"Key": ["name"]}],
            ),
        ],
        [
            edge("Knows", "Person", "Person", [prop("since", "Date", nullable=True)]),
            edge("WorksAt", "Person", "Company"),
        ],
    )
