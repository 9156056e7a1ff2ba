"""The recovery sweep: classify each pending sidecar, then roll forward, roll back or abort.

Classification and decision follow the engine (§H.2) and are pure functions, so the crash
matrix can be read as a table (docs/guarantees.md). Actions (§H.3):

- RollForward: every table committed exactly its one version -> publish what is on disk.
- RollBack: restore each moved table to the pinned version and publish the restored HEAD (or
  drop an unpublished branch fork), so the graph shows none of the write.
- Abort: a table's HEAD is behind the manifest -> refuse, keep the sidecar (operator review).
A sidecar is deleted only after its resolution is durable (I9).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from ..errors import ExpectedVersionMismatchError, InvariantViolationError
from . import commits, manifest, tables
from . import sidecar as sidecars
from .fs import RootStorage
from .layout import MAIN, RootPaths, table_uri
from .sidecar import Sidecar, SidecarPin

log = logging.getLogger(__name__)


class TableClass(str, enum.Enum):
    ROLLED_PAST_EXPECTED = "RolledPastExpected"
    NO_MOVEMENT = "NoMovement"
    UNEXPECTED_AT_P1 = "UnexpectedAtP1"
    UNEXPECTED_MULTISTEP = "UnexpectedMultistep"
    INCOMPLETE_PHASE_B = "IncompletePhaseB"
    INVARIANT_VIOLATION = "InvariantViolation"


class Decision(str, enum.Enum):
    ROLL_FORWARD = "RollForward"
    ROLL_BACK = "RollBack"
    ABORT = "Abort"


STRICT_KINDS = ("Mutation", "Load")
LOOSE_KINDS = ("SchemaApply", "EnsureIndices", "Optimize")


def classification_mode(writer_kind: str, schema_version: int) -> str:
    if writer_kind in STRICT_KINDS:
        return "strict"
    if writer_kind == "BranchMerge":
        return "confirmed" if schema_version >= 2 else "loose"
    return "loose"


def classify(pin: SidecarPin, head: int, pinned: int, mode: str) -> TableClass:
    """§H.2, as a pure function of the pin, the observed Lance HEAD and the manifest pin."""
    if head < pinned:
        return TableClass.INVARIANT_VIOLATION
    if head == pinned:
        return TableClass.NO_MOVEMENT
    if mode == "confirmed":
        if pin.confirmed_version is None:
            return TableClass.INCOMPLETE_PHASE_B
        if pin.confirmed_version == head and pin.expected_version == pinned:
            return TableClass.ROLLED_PAST_EXPECTED
        return TableClass.UNEXPECTED_MULTISTEP
    if head == pinned + 1:
        ok = pin.expected_version == pinned and (mode == "loose" or pin.post_commit_pin == head)
        return TableClass.ROLLED_PAST_EXPECTED if ok else TableClass.UNEXPECTED_AT_P1
    if mode == "loose" and pin.expected_version == pinned:
        return TableClass.ROLLED_PAST_EXPECTED
    return TableClass.UNEXPECTED_MULTISTEP


def decide(classes: list[TableClass]) -> Decision:
    if any(c == TableClass.INVARIANT_VIOLATION for c in classes):
        return Decision.ABORT
    if any(c != TableClass.ROLLED_PAST_EXPECTED for c in classes):
        return Decision.ROLL_BACK
    return Decision.ROLL_FORWARD


@dataclass(frozen=True)
class TableObservation:
    pin: SidecarPin
    head: int
    pinned: int
    pinned_branch: str | None
    cls: TableClass


@dataclass(frozen=True)
class RecoveryOutcome:
    """What the sweep did with one sidecar."""

    operation_id: str
    writer_kind: str
    action: str  # RolledForward | RolledBack | OrphanedBranchDiscarded | StaleCleaned | Deferred | Aborted | Converged
    tables: tuple  # ((table_key, class, from_version, to_version), ...)


def _observe(root: str, sc: Sidecar, state: manifest.ManifestState, storage_options) -> list[TableObservation]:
    mode = classification_mode(sc.writer_kind, sc.schema_version)
    out = []
    for pin in sc.tables:
        head = tables.head_version(pin.table_path, pin.table_branch, storage_options)
        entry = state.entries.get(pin.table_key)
        pinned = entry.version if entry else 0
        out.append(
            TableObservation(
                pin, head, pinned, entry.table_branch if entry else None, classify(pin, head, pinned, mode)
            )
        )
    return out


def _audit(
    root: str,
    sc: Sidecar,
    kind: str,
    manifest_version: int,
    outcomes: list[dict],
    storage_options,
    branch: str | None = None,
) -> None:
    c = commits.append(
        root, branch or sc.graph_branch, manifest_version, actor=commits.RECOVERY_ACTOR, storage_options=storage_options
    )
    commits.append_recovery_audit(
        root,
        graph_commit_id=c.graph_commit_id,
        kind=kind,
        actor=sc.actor_id,
        operation_id=sc.operation_id,
        writer_kind=sc.writer_kind,
        outcomes=outcomes,
        storage_options=storage_options,
    )


def _update_at(root: str, pin: SidecarPin, version: int, storage_options) -> manifest.TableUpdate:
    ds = tables.open_dataset(pin.table_path, branch=pin.table_branch, version=version, storage_options=storage_options)
    loc = table_uri(pin.table_path, "", pin.table_branch)
    rel = pin.table_dir or pin.table_path
    return manifest.TableUpdate(
        pin.table_key,
        version,
        pin.table_branch,
        ds.count_rows(),
        tables.version_metadata_json(loc, version, rel, storage_options),
    )


def _intent_satisfied(obs: list[TableObservation], state: manifest.ManifestState) -> bool:
    for o in obs:
        e = state.entries.get(o.pin.table_key)
        if e is None or e.version < o.head:
            return False
    return True


def resolve_one(
    root: str, storage: RootStorage, sc: Sidecar, *, mode: str = "full", storage_options=None
) -> RecoveryOutcome:
    """Resolve one sidecar (its pins under ``root``: see :func:`sidecar.read`). Raises
    InvariantViolationError (Abort) in full mode."""
    branch = sc.graph_branch
    mds = manifest.open_manifest(root, MAIN, storage_options=storage_options)
    if branch != MAIN and branch not in mds.branches.list():
        # The branch was deleted after the sidecar was written: nothing of it can be visible.
        already = any(
            a["operation_id"] == sc.operation_id and a["recovery_kind"] == "OrphanedBranchDiscarded"
            for a in commits.list_recovery_audits(root, storage_options)
        )
        if not already:
            _audit(root, sc, "OrphanedBranchDiscarded", mds.version, [], storage_options, branch=MAIN)
        sidecars.delete(storage, root, sc.operation_id)
        return RecoveryOutcome(sc.operation_id, sc.writer_kind, "OrphanedBranchDiscarded", ())
    state = manifest.read_state(manifest.open_manifest(root, branch, storage_options=storage_options), branch)
    obs = _observe(root, sc, state, storage_options)
    classes = [o.cls for o in obs]
    decision = decide(classes)
    summary = tuple((o.pin.table_key, o.cls.value, o.pinned, o.head) for o in obs)
    log.info(
        "recovery sidecar %s (%s): %s -> %s",
        sc.operation_id,
        sc.writer_kind,
        [c.value for c in classes],
        decision.value,
    )

    if (
        obs
        and all(c == TableClass.NO_MOVEMENT for c in classes)
        and any(o.pinned > o.pin.expected_version for o in obs)
    ):
        # An earlier roll-forward already published; only the sidecar was left behind.
        _audit(
            root,
            sc,
            "RolledForward",
            state.version,
            [
                {"table_key": o.pin.table_key, "from_version": o.pin.expected_version, "to_version": o.pinned}
                for o in obs
            ],
            storage_options,
        )
        sidecars.delete(storage, root, sc.operation_id)
        return RecoveryOutcome(sc.operation_id, sc.writer_kind, "StaleCleaned", summary)

    if decision == Decision.ABORT:
        if mode != "full":
            return RecoveryOutcome(sc.operation_id, sc.writer_kind, "Deferred", summary)
        raise InvariantViolationError(
            f"recovery sidecar '{sc.operation_id}' has invariant violation; refusing to act — operator review "
            f"required (tables: {[(o.pin.table_key, o.head, o.pinned) for o in obs]})",
            operation_id=sc.operation_id,
        )

    if decision == Decision.ROLL_FORWARD:
        updates = [_update_at(root, o.pin, o.head, storage_options) for o in obs]
        expected = {o.pin.table_key: o.pin.expected_version for o in obs}
        try:
            new_state = manifest.publish(root, branch, updates, expected, storage_options)
        except ExpectedVersionMismatchError:
            fresh = manifest.read_state(manifest.open_manifest(root, branch, storage_options=storage_options), branch)
            if _intent_satisfied(obs, fresh):
                if storage.exists(RootPaths(root).sidecar(sc.operation_id)):
                    _audit(
                        root,
                        sc,
                        "RolledForward",
                        fresh.version,
                        [
                            {
                                "table_key": o.pin.table_key,
                                "from_version": o.pin.expected_version,
                                "to_version": fresh.entries[o.pin.table_key].version,
                            }
                            for o in obs
                        ],
                        storage_options,
                    )
                    sidecars.delete(storage, root, sc.operation_id)
                return RecoveryOutcome(sc.operation_id, sc.writer_kind, "Converged", summary)
            return RecoveryOutcome(sc.operation_id, sc.writer_kind, "Deferred", summary)
        _audit(
            root,
            sc,
            "RolledForward",
            new_state.version,
            [{"table_key": o.pin.table_key, "from_version": o.pin.expected_version, "to_version": o.head} for o in obs],
            storage_options,
        )
        sidecars.delete(storage, root, sc.operation_id)
        return RecoveryOutcome(sc.operation_id, sc.writer_kind, "RolledForward", summary)

    # RollBack
    if mode != "full":
        return RecoveryOutcome(sc.operation_id, sc.writer_kind, "Deferred", summary)
    updates, expected, outcomes = [], {}, []
    for o in obs:
        if o.cls == TableClass.NO_MOVEMENT:
            continue
        if o.pin.table_branch and o.pin.table_branch != MAIN and o.pinned_branch != o.pin.table_branch:
            # An unpublished lazy fork: nothing visible references it; drop the Lance branch.
            try:
                tables.delete_lance_branch(o.pin.table_path, o.pin.table_branch, storage_options)
            except Exception as e:  # cleanup reconciles forks no manifest references
                log.warning("could not delete orphan fork %s of %s: %s", o.pin.table_branch, o.pin.table_key, e)
            outcomes.append({"table_key": o.pin.table_key, "from_version": o.head, "to_version": o.pinned})
            continue
        restored = tables.restore_to(o.pin.table_path, o.pin.table_branch, o.pinned, storage_options)
        updates.append(_update_at(root, o.pin, restored, storage_options))
        expected[o.pin.table_key] = o.pinned
        outcomes.append({"table_key": o.pin.table_key, "from_version": o.head, "to_version": o.pinned})
    version = state.version
    if updates:
        version = manifest.publish(root, branch, updates, expected, storage_options).version
    _audit(root, sc, "RolledBack", version, outcomes, storage_options)
    sidecars.delete(storage, root, sc.operation_id)
    return RecoveryOutcome(sc.operation_id, sc.writer_kind, "RolledBack", summary)


def sweep(
    root: str, storage: RootStorage, *, mode: str = "full", storage_options=None, only: str | None = None
) -> list[RecoveryOutcome]:
    """Resolve every pending sidecar in ULID order. A corrupt sidecar raises and stays."""
    out = []
    for path in sidecars.list_paths(storage, root):
        sc = sidecars.read(storage, root, path)
        if sc is None:
            continue  # resolved concurrently
        if only and sc.operation_id != only:
            continue
        out.append(resolve_one(root, storage, sc, mode=mode, storage_options=storage_options))
    return out
