"""The only module that calls lance for table data: create, open, stage, commit, restore, fork.

Guards against the pylance traps (docs/invariants.md):
- I5: staged fragments must carry the dataset's own field ids (fragments written in
  ``overwrite`` mode but committed as Append read back garbage silently) -> ``check_fragment_fields``.
- I6: a commit must land at exactly ``expected + 1``; pylance rebases Append over a concurrent
  commit even with ``max_retries=0`` -> ``CommitRebasedError``.
- I7: HEAD must equal the manifest pin before a commit (drift) -> ``TableDriftError``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

import lance
import pyarrow as pa
from lance.dataset import Transaction
from lance.file import LanceFileReader
from lance.fragment import FragmentMetadata

from ..errors import (
    AutoCleanupConfigError,
    CommitRebasedError,
    CorruptGraphError,
    GraphNotFoundError,
    StorageError,
    TableDriftError,
)
from .fs import RootStorage
from .layout import MAIN, is_local, manifest_file_name_v2

log = logging.getLogger(__name__)

DATA_STORAGE_VERSION: Final = "2.2"
AUTO_CLEANUP_PREFIX = "lance.auto_cleanup."
READ_STAGED_THREADS = 8
#: rows per data file a write (and a compaction) aims for; the read planner's default task size too,
#: so that a full-size file is read by one task
DEFAULT_MAX_ROWS_PER_FILE = 1024 * 1024


def create_empty(uri: str, schema: pa.Schema, storage_options: dict[str, str] | None = None) -> lance.LanceDataset:
    """A new dataset at version 1 with 0 rows: stable row ids, file format 2.2, no auto-cleanup."""
    empty = pa.Table.from_batches([], schema=schema)
    return lance.write_dataset(
        empty,
        uri,
        schema=schema,
        mode="create",
        enable_stable_row_ids=True,
        data_storage_version=DATA_STORAGE_VERSION,
        storage_options=storage_options,
        auto_cleanup_options=None,
        enable_v2_manifest_paths=True,
    )


def write_new(uri: str, table: pa.Table, storage_options: dict[str, str] | None = None) -> lance.LanceDataset:
    """Create a dataset holding ``table`` (internal datasets: commit graph, actors, audit)."""
    return lance.write_dataset(
        table,
        uri,
        schema=table.schema,
        mode="create",
        enable_stable_row_ids=True,
        data_storage_version=DATA_STORAGE_VERSION,
        storage_options=storage_options,
        auto_cleanup_options=None,
        enable_v2_manifest_paths=True,
    )


def open_dataset(
    uri: str, *, branch: str | None = None, version: int | None = None, storage_options: dict[str, str] | None = None
) -> lance.LanceDataset:
    """Open ``uri`` on a Lance branch (None/main = main lineage) at ``version`` (None = HEAD)."""
    try:
        ds = lance.dataset(uri, storage_options=storage_options)
        if branch and branch != MAIN:
            ds = ds.checkout_version((branch, version))
        elif version is not None:
            ds = ds.checkout_version(version)
        return ds
    except (ValueError, OSError) as e:
        msg = str(e)
        if "not found" in msg.lower() or "does not exist" in msg.lower():
            raise GraphNotFoundError(
                f"dataset not found at '{uri}'"
                + (f" on branch '{branch}'" if branch else "")
                + (f" version {version}" if version is not None else "")
                + f": {msg}",
                uri=uri,
                branch=branch,
                version=version,
            ) from e
        raise StorageError(f"cannot open dataset '{uri}': {msg}", uri=uri) from e


def head_version(uri: str, branch: str | None, storage_options: dict[str, str] | None = None) -> int:
    return open_dataset(uri, branch=branch, storage_options=storage_options).version


def transaction_property(ds: lance.LanceDataset, version: int, name: str) -> str | None:
    """A property a commit stored in the Lance transaction of ``version`` (see
    :func:`commit_operation`); None when that version's commit did not store it (another
    writer's, a restore) or its transaction cannot be read."""
    try:
        tx = ds.read_transaction(version)
    except Exception as e:  # callers treat "unknown" as "not stored"
        log.debug("no readable transaction at version %d of %s: %s", version, ds.uri, e)
        return None
    return None if tx is None else (tx.transaction_properties or {}).get(name)


def check_no_auto_cleanup(ds: lance.LanceDataset, what: str) -> None:
    """Refuse to commit to a dataset whose config would GC versions the manifest pins (§G.6)."""
    keys = [k for k in ds.config() if k.startswith(AUTO_CLEANUP_PREFIX)]
    if keys:
        raise AutoCleanupConfigError(
            f"{what} carries Lance auto-cleanup config ({', '.join(sorted(keys))}); a commit could delete "
            "versions the manifest still pins. Run `omnigraph optimize` (it strips the config) and retry.",
            dataset=what,
            keys=keys,
        )


def version_metadata_json(
    table_dir_uri: str, version: int, table_path: str, storage_options: dict[str, str] | None = None
) -> str:
    """The manifest ``metadata`` JSON for a table version (§C.3), compact, in serde key order.

    ``table_dir_uri`` is the version's own location (including ``/tree/<b>`` on a branch).
    ``manifest_path`` is the object-store path of the version's manifest file: no scheme and no
    leading '/'.
    """
    name = manifest_file_name_v2(version)
    full = f"{table_dir_uri.rstrip('/')}/_versions/{name}"
    size: int | None = None
    if is_local(full):
        try:
            size = os.path.getsize(full)
        except OSError:
            size = None
        obj_path = full.lstrip("/")
    else:
        obj_path = full.split("://", 1)[1].split("/", 1)[1]
        try:
            size = RootStorage(full, storage_options).size(full)
        except Exception:  # size is informative only (not load-bearing at 0.7.2)
            size = None
    if size is None:
        # V1 naming fallback (graphs created by other writers)
        alt = f"{table_dir_uri.rstrip('/')}/_versions/{version}.manifest"
        if is_local(alt) and os.path.exists(alt):
            return json.dumps(
                {
                    "manifest_path": alt.lstrip("/"),
                    "manifest_size": os.path.getsize(alt),
                    "e_tag": None,
                    "naming_scheme": "V1",
                },
                separators=(",", ":"),
            )
    return json.dumps(
        {"manifest_path": obj_path, "manifest_size": size, "e_tag": _local_e_tag(full), "naming_scheme": "V2"},
        separators=(",", ":"),
    )


def _local_e_tag(path: str) -> str | None:
    """The e_tag Lance's local object store reports for a file (hex inode-mtime_us-size), as
    the engine records it (interop D4); None on object stores, where we do not fetch it."""
    if not is_local(path):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_ino:x}-{st.st_mtime_ns // 1000:x}-{st.st_size:x}"


def _field_id_groups(ds: lance.LanceDataset) -> dict[str, set]:
    """Top-level column -> the field ids of it and all its descendants."""

    def ids(f) -> set:
        out = {f.id()}
        for c in f.children():
            out |= ids(c)
        return out

    return {f.name(): ids(f) for f in ds.lance_schema.fields()}


def check_fragment_fields(ds: lance.LanceDataset, fragments: Sequence[FragmentMetadata], table: str) -> None:
    """I5: every staged fragment must store exactly the dataset's columns, by field id.

    Fragments written against another schema (or in ``overwrite`` mode) carry renumbered ids and
    read back as garbage after an Append commit; this refuses them before the commit.
    """
    groups = _field_id_groups(ds)
    allowed = set().union(*groups.values()) if groups else set()
    for frag in fragments:
        seen: set = set()
        for df in frag.files:
            bad = [i for i in df.fields if i not in allowed]
            if bad:
                raise CorruptGraphError(
                    f"staged fragment for {table} stores field ids {list(df.fields)} but the dataset's are "
                    f"{sorted(allowed)}; refusing to commit (fragments written for another schema read back "
                    "as garbage)",
                    table=table,
                )
            seen.update(df.fields)
        missing = [name for name, g in groups.items() if not (g & seen)]
        if frag.files and missing:
            raise CorruptGraphError(f"staged fragment for {table} lacks columns {missing}", table=table)


def stage_fragments(
    ds: lance.LanceDataset,
    data,
    schema: pa.Schema,
    *,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_bytes_per_file: int | None = None,
) -> list[FragmentMetadata]:
    """Write data files into ``ds`` without committing (always in append mode, so field ids
    are the dataset's: I5)."""
    kw: dict[str, Any] = {}
    if max_bytes_per_file:
        kw["max_bytes_per_file"] = max_bytes_per_file
    return lance.fragment.write_fragments(
        data, ds, schema=schema, mode="append", max_rows_per_file=max_rows_per_file, **kw
    )


def data_file_uris(ds_uri: str, fragments: Iterable[FragmentMetadata]) -> list[str]:
    return [f"{ds_uri.rstrip('/')}/data/{df.path}" for frag in fragments for df in frag.files]


def read_staged_columns(
    ds_uri: str,
    fragments: Iterable[FragmentMetadata],
    columns: list[str],
    storage_options: dict[str, str] | None = None,
) -> pa.Table:
    """Read some columns of uncommitted fragments (driver-side load-wide validation)."""

    def read(uri: str) -> pa.Table:
        return LanceFileReader(uri, storage_options=storage_options, columns=columns).read_all().to_table()

    uris = data_file_uris(ds_uri, fragments)
    if len(uris) > 1:
        # many small files (one or more per task): overlap their opens and reads; map keeps file order

        with ThreadPoolExecutor(max_workers=min(READ_STAGED_THREADS, len(uris))) as pool:
            tables = list(pool.map(read, uris))
    else:
        tables = [read(u) for u in uris]
    if not tables:
        return None
    return pa.concat_tables(tables)


def delete_files(ds_uri: str, names: Iterable[str], storage_options: dict[str, str] | None = None) -> int:
    """Best-effort removal of data files ``ds_uri/data/<name>`` (abort). Returns files removed.

    Names with a path separator are refused: only files directly in this dataset's data dir go."""
    n = 0
    for name in names:
        if "/" in name or "\\" in name or name in ("", ".", ".."):
            log.warning("refusing to delete suspicious staged file name %r", name)
            continue
        uri = f"{ds_uri.rstrip('/')}/data/{name}"
        try:
            if is_local(uri):
                os.remove(uri)
            else:
                RootStorage(uri, storage_options).delete(uri)
            n += 1
        except FileNotFoundError:
            pass
        except OSError as e:  # abort is best effort; cleanup reclaims the rest
            log.warning("could not delete staged file %s: %s", uri, e)
    return n


@dataclass(frozen=True)
class CommitResult:
    version: int
    row_count: int


def check_head(ds_head: lance.LanceDataset, pinned: int, table: str) -> None:
    """I7: the table's HEAD must equal the manifest pin before we commit on top of it."""
    if ds_head.version < pinned:
        raise CorruptGraphError(
            f"table '{table}' Lance HEAD version {ds_head.version} is behind manifest version {pinned}", table=table
        )
    if ds_head.version > pinned:
        raise TableDriftError(
            f"table '{table}' has Lance HEAD version {ds_head.version} ahead of manifest "
            f"version {pinned}; another writer is mid-commit or a recovery is pending",
            table=table,
            head=ds_head.version,
            pinned=pinned,
        )


def commit_operation(
    ds_at_pin: lance.LanceDataset, operation, expected: int, table: str, properties: dict[str, str] | None = None
) -> CommitResult:
    """Commit ``operation`` on top of ``expected`` and insist it lands at ``expected + 1`` (I6).

    ``properties`` are stored in the Lance transaction: the operation id and idempotency token
    travel with the commit itself, so a re-run can prove whether it landed.
    """
    if ds_at_pin.version != expected:
        raise TableDriftError(
            f"table '{table}' opened at version {ds_at_pin.version}, expected {expected}", table=table
        )
    try:
        tx = Transaction(read_version=expected, operation=operation, transaction_properties=dict(properties or {}))
        new = lance.LanceDataset.commit(ds_at_pin, tx, max_retries=0)
    except OSError as e:
        msg = str(e)
        if "conflict" in msg.lower() or "concurrent" in msg.lower() or "retryable" in msg.lower():
            # Lance refused: the commit did NOT land (safe: staged files are ours to delete or retry).
            raise TableDriftError(
                f"commit to table '{table}' conflicted with a concurrent commit: {msg}", table=table
            ) from e
        raise StorageError(f"commit to table '{table}' failed: {msg}", table=table) from e
    if new.version != expected + 1:
        # It DID land, on top of someone else's commit. Never publish it; the sidecar lets
        # recovery roll it back (Strict class UnexpectedMultistep / UnexpectedAtP1).
        raise CommitRebasedError(
            f"commit to table '{table}' landed at version {new.version}, expected {expected + 1}: a concurrent "
            "commit was rebased over; the recovery sweep will roll this write back",
            table=table,
            expected=expected + 1,
            actual=new.version,
        )
    return CommitResult(new.version, new.count_rows())


def restore_to(uri: str, branch: str | None, version: int, storage_options: dict[str, str] | None = None) -> int:
    """Roll back by restore: a new commit at HEAD+1 whose content is ``version``'s."""
    ds = open_dataset(uri, branch=branch, version=version, storage_options=storage_options)
    ds.restore()
    return head_version(uri, branch, storage_options)


def fork(
    uri: str, source_branch: str | None, source_version: int, branch: str, storage_options: dict[str, str] | None = None
) -> lance.LanceDataset:
    """Lazy fork (§J.4): create Lance branch ``branch`` of a table at the inherited version."""
    ds = open_dataset(uri, branch=source_branch, version=source_version, storage_options=storage_options)
    ref = (source_branch, source_version) if source_branch and source_branch != MAIN else source_version
    ds.create_branch(branch, ref)
    return open_dataset(uri, branch=branch, storage_options=storage_options)


def lance_branches(uri: str, storage_options: dict[str, str] | None = None) -> dict[str, Any]:
    return dict(lance.dataset(uri, storage_options=storage_options).branches.list())


def delete_lance_branch(uri: str, branch: str, storage_options: dict[str, str] | None = None) -> None:
    lance.dataset(uri, storage_options=storage_options).branches.delete(branch)
