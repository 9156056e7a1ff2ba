"""Graph branches: a Lance branch of ``__manifest`` plus one of ``_graph_commits.lance`` (§J).

Table datasets are not touched at branch creation; a table is forked lazily on its first write
to the branch (``ensure_fork``), at the version the branch inherited.
"""

from __future__ import annotations

import logging

import lance

from ..errors import BranchError, BranchExistsError, BranchNotFoundError, OmnigraphError
from . import manifest, tables
from . import sidecar as _sidecar
from .fs import RootStorage
from .layout import MAIN, SCHEMA_APPLY_LOCK_BRANCH, RootPaths, normalize_branch

log = logging.getLogger(__name__)


def list_branches(root: str, storage_options: dict[str, str] | None = None) -> list[str]:
    ds = manifest.open_manifest(root, MAIN, storage_options=storage_options)
    names = [b for b in ds.branches.list() if b != SCHEMA_APPLY_LOCK_BRANCH]
    return [MAIN] + sorted(names)


def create(root: str, name: str, from_branch: str = MAIN, storage_options: dict[str, str] | None = None) -> int:
    """Create graph branch ``name`` at ``from_branch``'s current manifest version."""
    name = normalize_branch(name)
    from_branch = normalize_branch(from_branch)
    if name == MAIN:
        raise BranchExistsError("branch 'main' always exists", branch=name)
    manifest.check_not_locked(root, storage_options)
    existing = list_branches(root, storage_options)
    if name in existing:
        raise BranchExistsError(f"branch '{name}' already exists", branch=name)
    if from_branch not in existing:
        raise BranchNotFoundError(f"source branch '{from_branch}' not found", branch=from_branch)
    paths = RootPaths(root)
    src = manifest.open_manifest(root, from_branch, storage_options=storage_options)
    ref = src.version if from_branch == MAIN else (from_branch, src.version)
    src.create_branch(name, ref)
    try:
        cds = lance.dataset(paths.commits, storage_options=storage_options)
        if name in cds.branches.list():
            cds.branches.delete(name)  # a stale leftover of an earlier, failed create
        csrc = tables.open_dataset(
            paths.commits, branch=None if from_branch == MAIN else from_branch, storage_options=storage_options
        )
        cref = csrc.version if from_branch == MAIN else (from_branch, csrc.version)
        csrc.create_branch(name, cref)
    except Exception:
        lance.dataset(paths.manifest, storage_options=storage_options).branches.delete(name)
        raise
    return src.version


def delete(root: str, name: str, storage_options: dict[str, str] | None = None) -> None:
    """Delete a branch: refused for main, for a branch with descendants, or one whose tables
    another branch still references."""
    name = normalize_branch(name)
    if name == MAIN:
        raise BranchError("cannot delete branch 'main'", branch=name)
    branches = list_branches(root, storage_options)
    if name not in branches:
        raise BranchNotFoundError(f"branch '{name}' not found", branch=name)
    mds = lance.dataset(RootPaths(root).manifest, storage_options=storage_options)
    info = mds.branches.list()
    children = [b for b, meta in info.items() if meta.get("parent_branch") == name]
    if children:
        raise BranchError(f"branch '{name}' has descendant branches {sorted(children)}; delete them first", branch=name)
    owned = []
    for other in branches:
        if other == name:
            continue
        st = manifest.read_state(manifest.open_manifest(root, other, storage_options=storage_options), other)
        refs = [k for k, e in st.entries.items() if e.table_branch == name]
        if refs:
            raise BranchError(f"branch '{other}' still references tables owned by '{name}': {refs}", branch=name)
    st = manifest.read_state(manifest.open_manifest(root, name, storage_options=storage_options), name)
    owned = [e for e in st.entries.values() if e.table_branch == name]
    mds.branches.delete(name)  # the authority flip: from here the branch is gone
    paths = RootPaths(root)
    for uri in [paths.commits] + [f"{root}/{e.table_path}" for e in owned]:
        try:
            ds = lance.dataset(uri, storage_options=storage_options)
            if name in ds.branches.list():
                ds.branches.delete(name)
        except Exception as e:  # best effort; cleanup reconciles leftovers
            log.warning("branch delete: could not drop Lance branch %s of %s: %s", name, uri, e)


def ensure_fork(
    root: str, entry: manifest.TableEntry, branch: str, storage_options: dict[str, str] | None = None
) -> lance.LanceDataset:
    """Open the table for writing on ``branch``, forking it lazily if it is still inherited.

    A leftover fork that no manifest references (a crashed or aborted earlier job) is reused if
    it still sits at the inherited version, and reclaimed (deleted, re-forked) otherwise.
    """
    base = f"{root}/{entry.table_path}"
    if branch == MAIN:
        return tables.open_dataset(base, storage_options=storage_options)
    if entry.table_branch == branch:
        return tables.open_dataset(base, branch=branch, storage_options=storage_options)
    existing = tables.lance_branches(base, storage_options)
    if branch in existing:
        ds = tables.open_dataset(base, branch=branch, storage_options=storage_options)
        if ds.version == entry.version and existing[branch].get("parent_version") == entry.version:
            return ds
        if _named_by_pending_sidecar(root, entry.table_key, branch, storage_options):
            # I8: not an orphan — a crashed load committed on this fork and recovery decides its
            # fate from it (the commit's heal rolls it forward); never delete the evidence.
            return ds
        log.warning(
            "reclaiming orphaned fork '%s' of %s (at %d, inherited %d)",
            branch,
            entry.table_key,
            ds.version,
            entry.version,
        )
        tables.delete_lance_branch(base, branch, storage_options)
    return tables.fork(base, entry.table_branch, entry.version, branch, storage_options)


def _named_by_pending_sidecar(root: str, table_key: str, branch: str, storage_options) -> bool:
    """Whether a pending recovery sidecar pins ``table_key`` on Lance branch ``branch`` (an
    unreadable sidecar counts as yes: when in doubt, keep the fork)."""
    try:
        pending = _sidecar.read_all(RootStorage(root, storage_options), root)
    except OmnigraphError:
        return True
    return any(p.table_key == table_key and p.table_branch == branch for sc in pending for p in sc.tables)
