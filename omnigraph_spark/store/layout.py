"""Every path and name of an Omnigraph 0.7 graph root, in one place.

Why one module: sidecars, manifest rows and the engine all have to agree on these strings
byte for byte (format.md §A). Nothing here touches storage.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlparse

from ..errors import BranchError, OptionError
from ..schema.hashing import fnv1a_64_hex

SCHEMA_PG = "_schema.pg"
SCHEMA_IR = "_schema.ir.json"
SCHEMA_STATE = "__schema_state.json"
MANIFEST = "__manifest"
COMMITS = "_graph_commits.lance"
ACTORS = "_graph_commit_actors.lance"
RECOVERIES = "_graph_commit_recoveries.lance"
RECOVERY_DIR = "__recovery"
# Our own bookkeeping (lease, idempotency records): a directory the engine never reads.
SPARK_DIR = "_omnigraph_spark"

MANIFEST_STAMP_KEY = "omnigraph:internal_schema_version"
MANIFEST_STAMP = "3"
SCHEMA_APPLY_LOCK_BRANCH = "__schema_apply_lock__"
MAIN = "main"

_BRANCH_SEGMENT = re.compile(r"^[A-Za-z0-9._\-]+$")


def normalize_root(uri: str) -> str:
    """The engine's root normalisation (§A.1), made absolute for local paths.

    ``file://`` (and Hadoop's ``file:/``, as Spark's session catalog qualifies a table's
    location) becomes a plain path, trailing slashes go, and a relative local path is made
    absolute so that paths we write into sidecars match what the engine would resolve.
    """
    if not uri or not uri.strip():
        raise OptionError("graph URI is empty", option="path")
    uri = uri.strip()
    if uri.startswith("s3://") or uri.startswith("gs://") or uri.startswith("az://"):
        return uri.rstrip("/")
    if uri.startswith("file:/"):
        uri = urlparse(uri).path
    elif "://" in uri:
        raise OptionError(
            f"unsupported graph URI scheme in '{uri}' (use a local path, file://, s3://)", option="path", value=uri
        )
    path = os.path.abspath(uri)
    return path.rstrip("/") or "/"


def is_local(root: str) -> bool:
    return "://" not in root


def join(root: str, *parts: str) -> str:
    out = root.rstrip("/")
    for p in parts:
        if p:
            out += "/" + p.strip("/")
    return out


def table_path_for_key(table_key: str) -> str:
    """``node:Person`` -> ``nodes/40d76f1f51639ec0`` (FNV-1a-64 of the bare name)."""
    kind, _, name = table_key.partition(":")
    if kind not in ("node", "edge") or not name:
        raise ValueError(f"not a table key: {table_key!r}")
    return f"{kind}s/{fnv1a_64_hex(name)}"


def normalize_branch(name: str | None) -> str:
    """Trim, map empty/None to an error and ``main`` to main; refuse the internal lock branch
    and any name that could escape the graph root (``..``, absolute, odd characters)."""
    if name is None:
        return MAIN
    b = name.strip()
    if not b:
        raise BranchError("branch name cannot be empty", branch=name)
    if b.lstrip("/") == SCHEMA_APPLY_LOCK_BRANCH:
        raise BranchError(f"branch '{b}' is an internal system ref", branch=b)
    if b == MAIN:
        return MAIN
    segs = b.split("/")
    for s in segs:
        if s in ("", ".", "..") or not _BRANCH_SEGMENT.match(s):
            raise BranchError(
                f"invalid branch name '{b}': segments must match [A-Za-z0-9._-]+ and not be '.' or '..'", branch=b
            )
    return b


def lance_branch(branch: str) -> str | None:
    """The Lance branch name for a graph branch (None for main)."""
    return None if branch == MAIN else branch


def table_uri(root: str, table_path: str, table_branch: str | None) -> str:
    """Where a table version lives: ``root/<path>`` or ``root/<path>/tree/<b1>/<b2>``."""
    base = join(root, table_path)
    if table_branch and table_branch != MAIN:
        return join(base, "tree", *table_branch.split("/"))
    return base


def version_object_id(table_key: str, version: int) -> str:
    return f"{table_key}${version:020d}"


def tombstone_object_id(table_key: str, version: int) -> str:
    return f"{table_key}$tombstone${version:020d}"


def manifest_file_name_v2(version: int) -> str:
    return f"{(2**64 - 1) - version:020d}.manifest"


@dataclass(frozen=True)
class RootPaths:
    """Absolute locations of a graph root's fixed entries."""

    root: str

    @property
    def manifest(self) -> str:
        return join(self.root, MANIFEST)

    @property
    def commits(self) -> str:
        return join(self.root, COMMITS)

    @property
    def actors(self) -> str:
        return join(self.root, ACTORS)

    @property
    def recoveries(self) -> str:
        return join(self.root, RECOVERIES)

    @property
    def recovery_dir(self) -> str:
        return join(self.root, RECOVERY_DIR)

    def sidecar(self, operation_id: str) -> str:
        return join(self.root, RECOVERY_DIR, f"{operation_id}.json")

    @property
    def spark_dir(self) -> str:
        return join(self.root, SPARK_DIR)

    @property
    def staging_dir(self) -> str:
        """Per-load staging journals (``<dir>/<load id>/``): what each task attempt staged."""
        return join(self.root, SPARK_DIR, "staging")

    @property
    def id_indexes(self) -> str:
        """Node-id indexes the JVM shim keeps between loads (``<rows key hash>.ids``): a cache
        any of whose files may be deleted at any time."""
        return join(self.root, SPARK_DIR, "id_indexes")

    def file(self, name: str) -> str:
        return join(self.root, name)
