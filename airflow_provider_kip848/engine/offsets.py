"""The offsets steps of every migration: snapshot, compare, restore what was lost.

One implementation, used by the single-group DAGs' operators
(:mod:`airflow_provider_kip848.operators.offsets`) and by each application of
a fleet wave (:mod:`airflow_provider_kip848.engine.move`): a snapshot already
taken is the baseline and is kept; a comparison is with a snapshot of the same
group on the same cluster; a restore puts back only the partitions that lost
progress, so running it again restores nothing.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_provider_kip848.changecontrol import storage
from airflow_provider_kip848.changecontrol.artifacts import ARTIFACTS_ENV
from airflow_provider_kip848.changecontrol.audit_trail import Change
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.base import KafkaAdminBaseHook
from airflow_provider_kip848.kafka.api import take_snapshot
from airflow_provider_kip848.kafka.errors import (
    GroupNotFound,
    SnapshotConflict,
    SnapshotFromOtherCluster,
    SnapshotInvalid,
    SnapshotTopicsNotRead,
)
from airflow_provider_kip848.kafka.model import GroupOffsets, OffsetSnapshot, TopicPartition
from airflow_provider_kip848.kafka.rules.conditions import TaskLog
from airflow_provider_kip848.kafka.rules.offsets import (
    OffsetComparison,
    compare,
    restore_plan,
    topics_read,
    unread_topics,
)


def current_offsets(hook: KafkaAdminBaseHook, group_id: str) -> GroupOffsets:
    """The group's offsets; a group that no longer exists has none (everything was lost)."""
    try:
        return hook.group_offsets(group_id)
    except GroupNotFound:
        return GroupOffsets(group_id)


def load_snapshot(location: str) -> OffsetSnapshot:
    if not storage.exists(location):
        if "://" not in location:  # a worker-local path: the snapshot may sit on another worker's disk
            raise SnapshotInvalid(
                f"No snapshot at {location} on worker {socket.gethostname()}.",
                remedy=f"If another worker took it, this worker cannot see that worker's disk: point "
                       f"${ARTIFACTS_ENV} (or the connection extra artifacts_url) at an "
                       "ObjectStorage URL or a volume every worker mounts, or take a new snapshot.")
        raise SnapshotInvalid(f"No snapshot at {location}.")
    return OffsetSnapshot.from_json(storage.read_text(location), source=location)


def write_snapshot(  # Any: JSON of several shapes (XCom, reports)
        native_hook: KafkaGroupAdminHook, group_id: str, path: str, log: TaskLog) -> dict[str, Any]:
    """Write ``group_id``'s committed offsets to ``path``, or keep the snapshot of the same cluster and group
    already there (a retry: the first one is the baseline taken before anything changed); another group's or
    cluster's snapshot at ``path`` is never overwritten. The snapshot step of every migration."""
    fresh = take_snapshot(native_hook.get_conn(), group_id)
    reused = False
    quarantined = None
    existing: OffsetSnapshot | None = None
    if storage.exists(path):
        try:
            existing = load_snapshot(path)
        except SnapshotInvalid as exc:
            # a leftover of an attempt killed while writing (or a foreign file): kept aside, never used
            quarantined = storage.quarantine(path)
            log.warning("%s Moved it to %s and taking the snapshot again.", exc.what, quarantined)
    if existing is not None:
        if (existing.cluster_id, existing.group_id) != (fresh.cluster_id, fresh.group_id):
            raise SnapshotConflict(
                f"{path} holds a snapshot of group {existing.group_id!r} on cluster {existing.cluster_id}, "
                f"not of {fresh.group_id!r} on {fresh.cluster_id}; refusing to overwrite it."
            )
        moved = compare(existing, _as_offsets(fresh)).counts
        log.info("A snapshot of %s taken at %s is already at %s; keeping it as the baseline "
                      "(since then: %s).", group_id, existing.taken_at, path, moved)
        snapshot, reused = existing, True
    else:
        if not storage.write_once(path, fresh.to_json()):
            raise SnapshotConflict(f"Another writer created {path} while this task took its snapshot.",
                                   remedy="Rerun the task: it keeps the snapshot already there as the baseline.")
        snapshot = fresh
        log.info("Snapshot of %s (%s, %d partitions, total lag %d) written to %s.", group_id,
                      snapshot.group_state, len(snapshot.partitions), _lag(snapshot), path)
    return {"path": path, "group_id": snapshot.group_id, "cluster_id": snapshot.cluster_id,
            "group_type": snapshot.group_type, "group_state": snapshot.group_state,
            "partitions": len(snapshot.partitions), "committed_partitions": len(snapshot.committed),
            "total_lag": _lag(snapshot), "sha256": snapshot.sha256, "taken_at": snapshot.taken_at,
            "reused": reused, "quarantined": quarantined, "worker": socket.gethostname()}


def _lag(snapshot: OffsetSnapshot) -> int:
    return sum(p.lag or 0 for p in snapshot.partitions)


def _as_offsets(snapshot: OffsetSnapshot) -> GroupOffsets:
    return GroupOffsets(snapshot.group_id, snapshot.partitions)


def compare_with_snapshot(hook: KafkaAdminBaseHook, native_hook: KafkaGroupAdminHook, group_id: str,
                          snapshot_path: str, log: TaskLog, *, allow_other_cluster: bool = False) -> OffsetComparison:
    """``group_id``'s committed offsets now against the snapshot at ``snapshot_path`` (of the same group and, unless
    ``allow_other_cluster``, the same cluster), partition by partition; logs every partition that moved."""
    snapshot = load_snapshot(snapshot_path)
    _same_group(snapshot, group_id, snapshot_path)
    _same_cluster(snapshot, native_hook.describe_cluster().cluster_id, snapshot_path, allowed=allow_other_cluster)
    result = compare(snapshot, current_offsets(hook, group_id))
    log.info("Offsets of %s vs snapshot %s: %s", group_id, snapshot.taken_at, result.counts)
    for p in result.partitions:
        if p.status != "equal":
            log.info("  %s:%d %s (snapshot %s, now %s)", p.topic, p.partition, p.status, p.snapshot, p.current)
    return result


def _same_cluster(snapshot: OffsetSnapshot, cluster_id: str, location: str, *, allowed: bool) -> bool:
    """True for a permitted cross-cluster use; :class:`SnapshotFromOtherCluster` for a refused one."""
    if snapshot.cluster_id == cluster_id:
        return False
    if allowed:
        return True
    raise SnapshotFromOtherCluster(
        f"{location} is a snapshot of group {snapshot.group_id!r} on cluster {snapshot.cluster_id}, but this "
        f"connection reaches cluster {cluster_id}.")


def _same_group(snapshot: OffsetSnapshot, group_id: str, location: str) -> None:
    if snapshot.group_id != group_id:
        raise SnapshotConflict(f"{location} is a snapshot of group {snapshot.group_id!r}, not {group_id!r}.")


@dataclass(frozen=True)
class RestoreResult:
    """What a restore did: the partitions put back (``restored``: ``topic:partition`` -> offset, with their
    offsets ``before``), how many were left alone, and whether the snapshot came from another cluster."""

    group_id: str
    restored: dict[str, int] = field(default_factory=dict)
    before: dict[str, int | None] = field(default_factory=dict)
    left_alone: int = 0
    dry_run: bool = False
    snapshot_cluster_id: str = ""
    cross_cluster: bool = False
    #: topics restored although the group does not read them (``allow_unread_topics``)
    unread_topics: tuple[str, ...] = ()
    #: the cluster restored onto (the connection's)
    cluster_id: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"group_id": self.group_id, "restored": dict(self.restored), "before": dict(self.before),
                "left_alone": self.left_alone, "dry_run": self.dry_run,
                "snapshot_cluster_id": self.snapshot_cluster_id, "cross_cluster": self.cross_cluster,
                "unread_topics": list(self.unread_topics)}

    def describe(self) -> str:
        return f"{self.group_id}: " + (f"restored {len(self.restored)} partition(s)" if self.restored
                                       else "nothing lost")

    def changes(self, after: dict[str, int | None] | None = None) -> list[Change]:
        """The restore as audited: the offsets (before / ``after``, read back; as planned without it), and the
        overrides it was made under (a snapshot of another cluster, topics the group does not read)."""
        out: list[Change] = [("offsets", self.group_id, dict(self.before),
                              dict(self.restored) if after is None else after)]
        if self.cross_cluster:
            out.append(("cross_cluster_restore", self.group_id, self.snapshot_cluster_id, self.cluster_id))
        if self.unread_topics:
            out.append(("restore_unread_topics", self.group_id, None, list(self.unread_topics)))
        return out


def restore_lost_offsets(hook: KafkaAdminBaseHook, native_hook: KafkaGroupAdminHook, group_id: str,
                         snapshot_path: str, log: TaskLog, *, dry_run: bool = False,
                         allow_other_cluster: bool = False, allow_unread_topics: bool = False,
                         before_send: Callable[[RestoreResult], None] | None = None) -> RestoreResult:
    """Put back the committed offsets of ``group_id`` that regressed or vanished since the snapshot at
    ``snapshot_path`` (only those: equal and advanced partitions are left alone, so a rerun restores
    nothing). A snapshot of another cluster is refused unless ``allow_other_cluster``; offsets on topics the
    group no longer reads (:func:`~.rules.offsets.unread_topics`: it has committed offsets, none of them there)
    are refused unless ``allow_unread_topics``, before anything is written. ``before_send(planned)``: called with
    the restore as planned once the group and the offsets passed their checks, right before the offsets are
    committed (the audit trail's intent)."""
    snapshot = load_snapshot(snapshot_path)
    _same_group(snapshot, group_id, snapshot_path)
    cluster_id = native_hook.describe_cluster().cluster_id
    cross = _same_cluster(snapshot, cluster_id, snapshot_path, allowed=allow_other_cluster)
    if cross:
        log.warning("Restoring a snapshot of cluster %s onto cluster %s (allow_other_cluster=True).",
                    snapshot.cluster_id, cluster_id)
    current = current_offsets(hook, group_id)
    comparison = compare(snapshot, current)
    plan = restore_plan(comparison)
    left = len(comparison.partitions) - len(plan)
    unread = unread_topics(plan, topics_read(current))
    if unread and not allow_unread_topics:
        # a group with members, or an offset outside the log, is the more basic mistake: those refusals first
        hook.alter_group_offsets(group_id, plan, dry_run=True)
        read = ", ".join(sorted(topics_read(current)))
        raise SnapshotTopicsNotRead(
            f"The snapshot at {snapshot_path} (taken {snapshot.taken_at}) would restore offsets of group "
            f"{group_id!r} on {', '.join(unread)}, which the group no longer reads: it has committed offsets only on "
            f"{read}. Nobody would consume from those offsets; nothing was written.")
    if unread:
        log.warning("Restoring offsets of %s on topics it does not read now (allow_unread_topics=True): %s",
                    group_id, ", ".join(unread))
    nothing = RestoreResult(group_id, left_alone=left, dry_run=dry_run, snapshot_cluster_id=snapshot.cluster_id,
                            cross_cluster=cross, cluster_id=cluster_id)
    if not plan:
        log.info("Nothing to restore for %s: no partition lost progress (%s).", group_id, comparison.counts)
        return nothing
    for tp, offset in sorted(plan.items()):
        log.info("Restore %s to %d", tp, offset)
    before = {str(tp): c.current for c in comparison.partitions
              if (tp := TopicPartition(c.topic, c.partition)) in plan}
    planned = replace(nothing, restored={str(tp): o for tp, o in sorted(plan.items())}, before=before,
                      unread_topics=unread)
    hook.alter_group_offsets(group_id, plan, dry_run=dry_run,
                             before_send=None if before_send is None else lambda _: before_send(planned))
    return planned


__all__ = ["RestoreResult", "compare_with_snapshot", "current_offsets", "load_snapshot", "restore_lost_offsets",
           "write_snapshot"]
