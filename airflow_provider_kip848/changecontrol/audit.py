"""The audit trail: one JSON line per change the provider applied to a cluster.

Every change the provider makes (a feature level, a group config key, an
offsets restore, a member removal) leaves one record: who triggered the run,
who approved and when, the plan shown at approval time (and its hash), the
values before and after *as read back from the cluster*, and the DAG run and
task ids. Records are appended, never rewritten:

* a local path (``/var/log/kafka-changes/audit.jsonl``) is opened in append
  mode, one line per record, flushed and fsynced;
* an object-store URL (``s3://bucket/kafka-audit/``, ``file:///...``, any
  Airflow ``ObjectStoragePath``) cannot append, so each record becomes its own
  immutable object ``<url>/<YYYY-MM-DD>/<record id>.jsonl`` (one line), which
  ``read_audit`` reads back in time order.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from airflow_provider_kip848.changecontrol import storage
from airflow_provider_kip848.changecontrol.approvals import is_approving
from airflow_provider_kip848.kafka.errors import ArtifactUnwritable, Kip848Error
from airflow_provider_kip848.kafka.model import ClusterInfo
from airflow_provider_kip848.kafka.rules.conditions import TaskLog

AUDIT_FORMAT = "kip848-audit/1"


@dataclass(frozen=True)
class AuditRecord:
    kind: str  # feature | feature_override_dependent_groups | group_config | offsets | members | group
    target: str  # e.g. "streams.version", "my-group:consumer.session.timeout.ms", "my-group"
    before: Any  # Any: a value of any kind a change sets
    after: Any  # Any: a value of any kind a change sets
    cluster_id: str | None = None
    triggered_by: str | None = None
    approvals: list[dict[str, Any]] = field(default_factory=list)  # Any: JSON of several shapes
    plan_hash: str | None = None
    plan: dict[str, Any] | None = None  # Any: JSON of several shapes
    change_control: dict[str, Any] | None = None  # Any: JSON of several shapes
    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    try_number: int | None = None
    map_index: int | None = None
    at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="milliseconds"))
    record_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    format: str = AUDIT_FORMAT

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def to_line(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, default=str)


def append(location: str, records: list[AuditRecord]) -> list[str]:
    """Append ``records`` at ``location``; returns where each one was written."""
    if not records:
        return []
    if "://" not in location:
        path = Path(location).expanduser()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # O_APPEND: concurrent writers never overwrite each other's lines; one write() per record.
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
            try:
                for record in records:
                    os.write(fd, (record.to_line() + "\n").encode())
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise ArtifactUnwritable(f"Cannot append the audit record(s) to {path}: {exc.strerror or exc}.") from exc
        return [str(path)] * len(records)
    written = []
    for seq, record in enumerate(records):
        day = record.at[:10]
        # the sequence keeps one task's records in order when they share a millisecond
        target = f"{location.rstrip('/')}/{day}/{record.at.replace(':', '')}-{seq:04d}-{record.record_id}.jsonl"
        if not storage.write_once(target, record.to_line() + "\n"):  # record ids are unique
            raise ArtifactUnwritable(f"An audit record already exists at {target}; refusing to overwrite it.")
        written.append(target)
    return written


def read_audit(location: str) -> list[dict[str, Any]]:  # Any: JSON of several shapes (XCom, reports)
    """Every record at ``location`` (a JSONL file, or a prefix of one-record objects), oldest first.

    A line that is not a JSON object (the torn tail a writer killed mid-line leaves) is skipped with a
    warning naming where it is: one bad line must not hide every other record from a report.
    """
    if "://" not in location:
        path = Path(location).expanduser()
        if not path.exists():
            return []
        return _records(str(path), storage.read_text(str(path)))
    root = storage.storage_path(location)
    if not root.exists():
        return []
    # object names start with the record's time and its place in its batch: name order is time order
    objects = sorted((Path(str(p)) if isinstance(p, Path) else p for p in root.rglob("*.jsonl")), key=str)
    return [r for p in objects for r in _records(str(p), storage.read_text(str(p)))]


def _records(source: str, text: str) -> list[dict[str, Any]]:
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict):
            out.append(record)
        else:
            logging.getLogger(__name__).warning("Audit %s line %d is not a record (a torn write?); skipped.",
                                                source, number)
    return out


def summary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:  # Any: JSON of several shapes (XCom, reports)
    """The lines a run report shows: what changed, from what to what, approved by whom."""
    return [{"kind": r["kind"], "target": r["target"], "before": r["before"], "after": r["after"],
             # a reused approval (recheck) repeats its approver: each person once
             "approved_by": list(dict.fromkeys(a.get("by") for a in r.get("approvals") or [] if a)),
             "task_id": r["task_id"], "at": r["at"], "record_id": r["record_id"]} for r in records]


# -- recording a task's changes ------------------------------------------------------------

#: One change a task applied: ``(kind, target, before, after)``, before/after read back from the cluster.
Change = tuple[str, str, Any, Any]


class _DescribesCluster(Protocol):
    def describe_cluster(self) -> ClusterInfo: ...


def audit_location(audit_log: str | None, connection_audit_log: str | None = None,
                   artifacts_root: str | None = None) -> str:
    """Where audit records go: the task's ``audit_log``, the connection's extra ``audit_log``,
    ``$KIP848_AUDIT_LOG``, the deployment's artifact location (``<root>/audit``, one object per
    record, or ``<root>/audit.jsonl`` for a shared path), else ``$AIRFLOW_HOME/kip848/audit.jsonl``
    (one worker's disk: only for a single-machine deployment)."""
    for given in (audit_log, connection_audit_log):
        if given and str(given) not in ("None", ""):
            return str(given)
    if os.environ.get("KIP848_AUDIT_LOG"):
        return os.environ["KIP848_AUDIT_LOG"]
    if artifacts_root:
        return f"{artifacts_root.rstrip('/')}/audit" + ("" if "://" in artifacts_root else ".jsonl")
    home = os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow")
    return os.path.join(home, "kip848", "audit.jsonl")


def record_changes(context: Mapping[str, Any], task_id: str, changes: list[Change], *, admin: _DescribesCluster,
                   # Any: a task's Context (or the Airflow layers' dict of it)
                   location: str, approval_task_ids: Sequence[str] = ("approval", "recheck_approval"),
                   log: TaskLog | None = None) -> list[dict[str, Any]]:
    """Append one audit record per change and push them as the task's XCom ``audit``.

    Each record quotes the run's approvals (the ``decision`` XComs of
    ``approval_task_ids``), the plan the authorising approval saw, and the
    cluster's id (read through ``admin``; None when it cannot be read). ``log``: the task's logger.
    """
    ti = context["ti"]
    dag_run = context.get("dag_run")
    decisions = [(t, d) for t in approval_task_ids if (d := ti.xcom_pull(task_ids=t, key="decision"))]
    approvals = [{"task_id": t, **{k: d.get(k) for k in ("decision", "by", "by_id", "at", "plan_hash", "reused")}}
                 for t, d in decisions]
    authorising: dict[str, Any] = next((d for _, d in reversed(decisions) if is_approving(d.get("decision"))), {})
    try:
        cluster_id: str | None = admin.describe_cluster().cluster_id
    except Kip848Error:
        cluster_id = None
    records = [AuditRecord(
        kind=kind, target=target, before=before, after=after, cluster_id=cluster_id,
        triggered_by=getattr(dag_run, "triggering_user_name", None), approvals=approvals,
        plan_hash=authorising.get("plan_hash"), plan=authorising.get("plan"),
        change_control=authorising.get("change_control"),
        dag_id=getattr(ti, "dag_id", None), run_id=getattr(ti, "run_id", None), task_id=task_id,
        try_number=getattr(ti, "try_number", None), map_index=getattr(ti, "map_index", None),
    ) for kind, target, before, after in changes]
    written = append(location, records)
    (log or logging.getLogger(__name__)).info("Audit: %d change record(s) appended to %s", len(records), location)
    pushed = [{**r.to_dict(), "written_to": w} for r, w in zip(records, written, strict=True)]
    ti.xcom_push(key="audit", value=pushed)
    return pushed
