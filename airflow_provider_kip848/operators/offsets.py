"""Offsets snapshot, compare and restore: the safety net of every destructive migration step.

The steps themselves are :mod:`airflow_provider_kip848.engine.offsets` (the fleet's application moves run the
same ones); these operators are their single-group tasks.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol.audit_trail import Change
from airflow_provider_kip848.engine.offsets import (
    compare_with_snapshot,
    current_offsets,
    load_snapshot,
    restore_lost_offsets,
    write_snapshot,
)
from airflow_provider_kip848.kafka.arguments import parse_flag
from airflow_provider_kip848.operators.base import KafkaAdminBaseOperator, check_flag_arg, check_group_id_arg

__all__ = ["KafkaCompareGroupOffsetsOperator", "KafkaRestoreGroupOffsetsOperator", "KafkaSnapshotGroupOffsetsOperator",
           "compare_with_snapshot", "load_snapshot", "write_snapshot"]


class KafkaSnapshotGroupOffsetsOperator(KafkaAdminBaseOperator[dict[str, object]]):
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

    def __init__(self, *, group_id: str, path: str, **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        check_group_id_arg(group_id)
        self.group_id, self.path = group_id, path

    def run(self, context: Context) -> dict[str, object]:
        return write_snapshot(self.native_hook, self.group_id, self.path, self.log)


class KafkaCompareGroupOffsetsOperator(KafkaAdminBaseOperator[dict[str, object]]):
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

    def __init__(self, *, group_id: str, snapshot_path: str, allow_advanced: bool = True,  # Any: passed to BaseOperator
                 fail_on_loss: bool = True, allow_other_cluster: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_group_id_arg(group_id)
        self.group_id, self.snapshot_path = group_id, snapshot_path
        self.allow_other_cluster = parse_flag(allow_other_cluster, "allow_other_cluster")
        self.allow_advanced = parse_flag(allow_advanced, "allow_advanced")
        self.fail_on_loss = parse_flag(fail_on_loss, "fail_on_loss")

    def run(self, context: Context) -> dict[str, object]:
        result = compare_with_snapshot(self.hook, self.native_hook, self.group_id, self.snapshot_path, self.log,
                                       allow_other_cluster=self.allow_other_cluster)
        if self.fail_on_loss and result.lost():
            raise AirflowFailException(
                f"Group {self.group_id} lost committed offsets on {len(result.lost())} partition(s) "
                f"({', '.join(f'{p.topic}:{p.partition}' for p in result.lost()[:10])}). Restore them with "
                "KafkaRestoreGroupOffsetsOperator while the group is empty."
            )
        if not self.allow_advanced and result.by_status("advanced"):
            raise AirflowFailException(f"Group {self.group_id} advanced on {len(result.by_status('advanced'))} "
                                       "partition(s) although nothing should have consumed.")
        return result.to_dict()


class KafkaRestoreGroupOffsetsOperator(KafkaAdminBaseOperator[dict[str, object]]):
    """Put back the offsets a conversion lost: only partitions that regressed or vanished, only on an empty group.

    Partitions that are equal or advanced are left alone, so a rerun restores
    nothing (idempotent). ``dry_run`` reports the plan without committing.

    A snapshot of another cluster is refused (:class:`SnapshotFromOtherCluster`)
    unless ``allow_other_cluster=True``, a deliberate cross-cluster restore
    (a group moved to a new cluster), which the audit record then states.

    Offsets on topics the group no longer reads (it has committed offsets, none
    on them: nobody would consume from there) are refused
    (:class:`SnapshotTopicsNotRead`) unless ``allow_unread_topics=True``, which
    the audit record states too. A group with no committed offset left at all
    (every one lost) gets everything back.

    :returns: ``{group_id, restored: {tp: offset}, left_alone: n, dry_run, snapshot_cluster_id, cross_cluster,
        unread_topics}``
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "group_id", "snapshot_path", "dry_run_flag")
    changes_cluster = True

    def __init__(self, *, group_id: str, snapshot_path: str, dry_run: bool = False,  # Any: passed to BaseOperator
                 allow_other_cluster: bool = False, allow_unread_topics: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_group_id_arg(group_id)
        check_flag_arg(dry_run, "dry_run")
        self.group_id, self.snapshot_path, self.dry_run_flag = group_id, snapshot_path, dry_run
        self.allow_other_cluster = parse_flag(allow_other_cluster, "allow_other_cluster")
        self.allow_unread_topics = parse_flag(allow_unread_topics, "allow_unread_topics")

    def run(self, context: Context) -> dict[str, object]:
        return restore_lost_offsets(self.hook, self.native_hook, self.group_id, self.snapshot_path, self.log,
                                    dry_run=parse_flag(self.dry_run_flag, "dry_run"),
                                    allow_other_cluster=self.allow_other_cluster,
                                    allow_unread_topics=self.allow_unread_topics,
                                    before_send=lambda planned: self.intend(context, planned.changes())).to_dict()

    def audit_changes(self, context: Context, result: dict[str, object]) -> list[Change]:
        restored = result.get("restored")
        if not restored or result.get("dry_run") or not isinstance(restored, dict):
            return []
        now = current_offsets(self.hook, self.group_id).committed
        after: dict[str, int | None] = {str(tp): now.get(tp) for tp in sorted(now) if str(tp) in restored}
        # the offsets read back; the overrides it was made under (cross-cluster, unread topics) as the intent said
        return [("offsets", self.group_id, result["before"], after)]
