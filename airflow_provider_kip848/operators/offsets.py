"""Offsets snapshot, compare and restore: the safety net of every destructive migration step."""

from __future__ import annotations

import socket
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol import storage
from airflow_provider_kip848.changecontrol.artifacts import ARTIFACTS_ENV
from airflow_provider_kip848.changecontrol.audit import Change
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.base import KafkaAdminBaseHook
from airflow_provider_kip848.kafka.api import take_snapshot
from airflow_provider_kip848.kafka.arguments import parse_flag
from airflow_provider_kip848.kafka.errors import (
    GroupNotFound,
    SnapshotConflict,
    SnapshotFromOtherCluster,
    SnapshotInvalid,
)
from airflow_provider_kip848.kafka.model import GroupOffsets, OffsetSnapshot, TopicPartition
from airflow_provider_kip848.kafka.rules.offsets import OffsetComparison, compare, restore_plan
from airflow_provider_kip848.operators.base import KafkaAdminBaseOperator, check_flag_arg, check_group_id_arg


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
                       f"${ARTIFACTS_ENV} (or the connection extra artifacts_url, or the DAG's snapshot_dir) at an "
                       "ObjectStorage URL or a volume every worker mounts, or take a new snapshot.")
        raise SnapshotInvalid(f"No snapshot at {location}.")
    return OffsetSnapshot.from_json(storage.read_text(location), source=location)


class SnapshotGroupOffsetsOperator(KafkaAdminBaseOperator):
    """Write a group's committed offsets (with log start/end per partition) to a durable location.

    Idempotent: if a snapshot of the same cluster and group is already at
    ``path`` (a retry), it is kept, because the first one is the baseline taken
    before anything changed. A snapshot of another group or cluster at that
    path is never overwritten.

    :param path: local path or ObjectStoragePath URL; templated, e.g.
        ``/var/kip848/snapshots/{{ dag.dag_id }}/{{ run_id }}/{{ params.group_id }}.json``.
    :returns: ``{path, group_id, cluster_id, partitions, committed_partitions, total_lag, sha256, taken_at, reused}``
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "group_id", "path")
    supported_backends = ("native",)

    def __init__(self, *, group_id: str, path: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_group_id_arg(group_id)
        self.group_id, self.path = group_id, path

    def run(self, context: Any) -> dict:
        return write_snapshot(self.native_hook, self.group_id, self.path, self.log)


def write_snapshot(native_hook: KafkaGroupAdminHook, group_id: str, path: str, log: Any) -> dict[str, Any]:
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


class CompareGroupOffsetsOperator(KafkaAdminBaseOperator):
    """Compare a group's committed offsets with a snapshot, partition by partition.

    Each partition is ``equal``, ``advanced`` (consumers ran on), ``regressed``
    or ``missing`` (progress lost) or ``new``. Fails when progress was lost,
    and on ``advanced`` too when ``allow_advanced=False`` (nothing may have run).

    A snapshot of another cluster (another cluster id) is refused: comparing
    it would judge one cluster's group by another's offsets (unless
    ``allow_other_cluster=True``, after a deliberate cross-cluster restore).

    :returns: ``{group_id, counts, preserved, partitions: [...]}``
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "group_id", "snapshot_path")

    def __init__(self, *, group_id: str, snapshot_path: str, allow_advanced: bool = True,
                 fail_on_loss: bool = True, allow_other_cluster: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_group_id_arg(group_id)
        self.group_id, self.snapshot_path = group_id, snapshot_path
        self.allow_other_cluster = parse_flag(allow_other_cluster, "allow_other_cluster")
        self.allow_advanced = parse_flag(allow_advanced, "allow_advanced")
        self.fail_on_loss = parse_flag(fail_on_loss, "fail_on_loss")

    def run(self, context: Any) -> dict:
        result = compare_with_snapshot(self.hook, self.native_hook, self.group_id, self.snapshot_path, self.log,
                                       allow_other_cluster=self.allow_other_cluster)
        if self.fail_on_loss and result.lost():
            raise AirflowFailException(
                f"Group {self.group_id} lost committed offsets on {len(result.lost())} partition(s) "
                f"({', '.join(f'{p.topic}:{p.partition}' for p in result.lost()[:10])}). Restore them with "
                "RestoreGroupOffsetsOperator while the group is empty."
            )
        if not self.allow_advanced and result.by_status("advanced"):
            raise AirflowFailException(f"Group {self.group_id} advanced on {len(result.by_status('advanced'))} "
                                       "partition(s) although nothing should have consumed.")
        return result.to_dict()


def compare_with_snapshot(hook: KafkaAdminBaseHook, native_hook: KafkaGroupAdminHook, group_id: str,
                          snapshot_path: str, log: Any, *, allow_other_cluster: bool = False) -> OffsetComparison:
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


class RestoreGroupOffsetsOperator(KafkaAdminBaseOperator):
    """Put back the offsets a conversion lost: only partitions that regressed or vanished, only on an empty group.

    Partitions that are equal or advanced are left alone, so a rerun restores
    nothing (idempotent). ``dry_run`` reports the plan without committing.

    A snapshot of another cluster is refused (:class:`SnapshotFromOtherCluster`)
    unless ``allow_other_cluster=True``, a deliberate cross-cluster restore
    (a group moved to a new cluster), which the audit record then states.

    :returns: ``{group_id, restored: {tp: offset}, left_alone: n, dry_run, snapshot_cluster_id, cross_cluster}``
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "group_id", "snapshot_path", "dry_run_flag")

    def __init__(self, *, group_id: str, snapshot_path: str, dry_run: bool = False,
                 allow_other_cluster: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_group_id_arg(group_id)
        check_flag_arg(dry_run, "dry_run")
        self.group_id, self.snapshot_path, self.dry_run_flag = group_id, snapshot_path, dry_run
        self.allow_other_cluster = parse_flag(allow_other_cluster, "allow_other_cluster")

    def run(self, context: Any) -> dict:
        snapshot = load_snapshot(self.snapshot_path)
        _same_group(snapshot, self.group_id, self.snapshot_path)
        dry_run = parse_flag(self.dry_run_flag, "dry_run")
        cluster_id = self.native_hook.describe_cluster().cluster_id
        cross = _same_cluster(snapshot, cluster_id, self.snapshot_path, allowed=self.allow_other_cluster)
        if cross:
            self.log.warning("Restoring a snapshot of cluster %s onto cluster %s (allow_other_cluster=True).",
                             snapshot.cluster_id, cluster_id)
        extra = {"snapshot_cluster_id": snapshot.cluster_id, "cross_cluster": cross}
        comparison = compare(snapshot, current_offsets(self.hook, self.group_id))
        plan = restore_plan(comparison)
        left = len(comparison.partitions) - len(plan)
        if not plan:
            self.log.info("Nothing to restore for %s: no partition lost progress (%s).", self.group_id,
                          comparison.counts)
            return {"group_id": self.group_id, "restored": {}, "left_alone": left, "dry_run": dry_run, **extra}
        for tp, offset in sorted(plan.items()):
            self.log.info("Restore %s to %d", tp, offset)
        self.hook.alter_group_offsets(self.group_id, plan, dry_run=dry_run)
        before = {str(tp): c.current for c in comparison.partitions
                  if (tp := TopicPartition(c.topic, c.partition)) in plan}
        return {"group_id": self.group_id, "restored": {str(tp): o for tp, o in sorted(plan.items())},
                "before": before, "left_alone": left, "dry_run": dry_run, **extra}

    def audit_changes(self, context: Any, result: dict) -> list[Change]:
        if not result.get("restored") or result.get("dry_run"):
            return []
        now = current_offsets(self.hook, self.group_id).committed
        after = {str(tp): now.get(tp) for tp in sorted(now) if str(tp) in result["restored"]}
        changes: list[Change] = [("offsets", self.group_id, result["before"], after)]
        if result.get("cross_cluster"):  # the deliberate override is part of the record
            changes.append(("cross_cluster_restore", self.group_id, result["snapshot_cluster_id"],
                            self.native_hook.describe_cluster().cluster_id))
        return changes


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
