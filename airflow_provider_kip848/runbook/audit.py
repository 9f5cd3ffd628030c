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
import os
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

AUDIT_FORMAT = "kip848-audit/1"


@dataclass(frozen=True)
class AuditRecord:
    kind: str  # feature | group_config | offsets | members
    target: str  # e.g. "streams.version", "my-group:consumer.session.timeout.ms", "my-group"
    before: Any
    after: Any
    cluster_id: str | None = None
    triggered_by: str | None = None
    approvals: list[dict[str, Any]] = field(default_factory=list)
    plan_hash: str | None = None
    plan: dict[str, Any] | None = None
    change_control: dict[str, Any] | None = None
    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    try_number: int | None = None
    map_index: int | None = None
    at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="milliseconds"))
    record_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    format: str = AUDIT_FORMAT

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_line(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, default=str)


def append(location: str, records: list[AuditRecord]) -> list[str]:
    """Append ``records`` at ``location``; returns where each one was written."""
    if not records:
        return []
    if "://" not in location:
        path = Path(location).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_APPEND: concurrent writers never overwrite each other's lines; one write() per record.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            for record in records:
                os.write(fd, (record.to_line() + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return [str(path)] * len(records)
    from airflow_provider_kip848.operators import storage

    written = []
    for seq, record in enumerate(records):
        day = record.at[:10]
        # the sequence keeps one task's records in order when they share a millisecond
        target = f"{location.rstrip('/')}/{day}/{record.at.replace(':', '')}-{seq:04d}-{record.record_id}.jsonl"
        if storage.exists(target):  # record ids are unique: never overwrite an existing record
            raise FileExistsError(target)
        storage.write_text(target, record.to_line() + "\n")
        written.append(target)
    return written


def read_audit(location: str) -> list[dict[str, Any]]:
    """Every record at ``location`` (a JSONL file, or a prefix of one-record objects), oldest first."""
    if "://" not in location:
        path = Path(location).expanduser()
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    from airflow_provider_kip848.operators import storage

    root = storage.storage_path(location)
    if not root.exists():
        return []
    # object names start with the record's time and its place in its batch: name order is time order
    objects = sorted(root.rglob("*.jsonl"), key=lambda p: str(p))
    return [json.loads(line) for p in objects for line in p.read_text().splitlines() if line.strip()]


def summary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lines a run report shows: what changed, from what to what, approved by whom."""
    return [{"kind": r["kind"], "target": r["target"], "before": r["before"], "after": r["after"],
             "approved_by": [a.get("by") for a in r.get("approvals") or [] if a], "task_id": r["task_id"],
             "at": r["at"], "record_id": r["record_id"]} for r in records]
