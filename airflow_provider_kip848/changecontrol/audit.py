"""The audit trail: every change the provider makes to a cluster, recorded ahead of the change, then its outcome.

Every change the provider makes (a feature level, a group config key, an
offsets restore, a member removal, a group delete) leaves a **pair** of
records, each one JSON line:

* the **intent**, written (and fsynced) *before* anything is sent: what is to
  change (kind, target, the value before as planned, the value after as
  planned), who triggered the run, who approved and when, the plan shown at
  approval time (and its hash), the DAG run, task, try and map index;
* its **outcome**, written once the change was sent: ``applied`` with the
  values read back from the cluster, or ``failed`` with the error (and what
  could be read back).

Both carry ``change_id``, a hash of the DAG, run, task, map index, kind and
target: the same for every try of one task's change. A worker killed between
the two leaves an intent alone; the task's retry completes it before it plans
anything (:class:`~airflow_provider_kip848.changecontrol.audit_trail.TaskAudit`):
``found in place`` (the earlier try's change reached the cluster), or ``not
applied`` (it did not; the retry plans and records it anew). An intent that no
retry completed reads as ``outcome unknown`` (:func:`read_audit`, the run
reports): never a change without a record.

Records are appended, never rewritten:

* a local path (``/var/log/kafka-changes/audit.jsonl``) is opened in append
  mode, one ``write`` of one line per record, then fsynced;
* an object-store URL (``s3://bucket/kafka-audit/``, ``file:///...``, any
  Airflow ``ObjectStoragePath``) cannot append, so each record becomes its own
  immutable object ``<url>/<YYYY-MM-DD>/<record id>.jsonl`` (one line), which
  ``read_audit`` reads back in time order.

Records of the first format (``kip848-audit/1``: one record per change, written
after it) are read as changes whose outcome is ``applied``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow_provider_kip848.changecontrol import storage
from airflow_provider_kip848.kafka.errors import ArtifactUnwritable

AUDIT_FORMAT = "kip848-audit/2"
#: the first format: one record per change, written after it (read as an applied change)
AUDIT_FORMAT_1 = "kip848-audit/1"

#: a record's ``phase``
INTENT, OUTCOME = "intent", "outcome"
#: an outcome record's ``outcome``; :data:`UNKNOWN` is what an intent no outcome completed reads as
APPLIED, FOUND_IN_PLACE, NOT_APPLIED, FAILED = "applied", "found in place", "not applied", "failed"
UNKNOWN = "outcome unknown"

#: records that state an override a change is made under (the groups a feature is lowered over, a restore from
#: another cluster, offsets on topics the group does not read): they share their change's id and outcome
NOTE_OF = {"feature_override_dependent_groups": "feature", "cross_cluster_restore": "offsets",
           "restore_unread_topics": "offsets"}


def change_id(dag_id: str | None, run_id: str | None, task_id: str | None, map_index: int | None, kind: str,
              target: str) -> str:
    """The id an intent and its outcome share: the same for every try of one task's change of ``target`` (a note
    takes its change's kind), so that a retry's outcome completes an earlier try's intent."""
    key = json.dumps([dag_id, run_id, task_id, map_index, NOTE_OF.get(kind, kind), target], default=str)
    return hashlib.sha256(key.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class AuditRecord:
    kind: str  # feature | feature_override_dependent_groups | group_config | offsets | members | group | ...
    target: str  # e.g. "streams.version", "my-group:consumer.session.timeout.ms", "my-group"
    before: Any  # Any: a value of any kind a change sets
    after: Any  # Any: a value of any kind a change sets (an intent: as planned; an outcome: read back)
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
    #: :data:`INTENT` (written before the change) or :data:`OUTCOME` (after it, or by a later try)
    phase: str = INTENT
    #: shared by an intent and its outcome, the same for every try of the task's change (:func:`change_id`)
    change_id: str | None = None
    #: an outcome's :data:`APPLIED`, :data:`FOUND_IN_PLACE`, :data:`NOT_APPLIED` or :data:`FAILED`
    outcome: str | None = None
    #: an outcome: the intent records it completes (this try's, or an earlier try's)
    intent_ids: list[str] = field(default_factory=list)
    #: an outcome: what failed (the error's type and message)
    error: str | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def to_line(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, default=str)


def append(location: str, records: list[AuditRecord]) -> list[str]:
    """Append ``records`` at ``location`` (durable when this returns); returns where each one was written."""
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


def read_audit(location: str, *, since_day: str | None = None) -> list[dict[str, Any]]:  # Any: JSON records
    """Every record at ``location`` (a JSONL file, or a prefix of one-record objects), oldest first; each intent
    with ``outcome``: the outcome of the record that completes it, or ``"outcome unknown"`` (and
    ``completed_by``: that record's id, or None).

    ``since_day`` (``YYYY-MM-DD``): an object store's records of that day and later only (a run's records: the
    day it started), so a run does not list the whole trail. A line that is not a JSON object (the torn tail a
    writer killed mid-line leaves) is skipped with a warning naming where it is: one bad line must not hide every
    other record from a report.
    """
    return annotated(_read_raw(location, since_day))


def _read_raw(location: str, since_day: str | None) -> list[dict[str, Any]]:  # Any: JSON records
    if "://" not in location:
        path = Path(location).expanduser()
        if not path.exists():
            return []
        return _records(str(path), storage.read_text(str(path)))
    root = storage.storage_path(location)
    if not storage.read_with(location, root.exists):
        return []

    def listing() -> list[Any]:  # Any: Path or ObjectStoragePath
        days = [d for d in root.iterdir() if since_day is None or d.name >= since_day]
        return [p for d in days for p in d.rglob("*.jsonl")]

    # object names start with the record's time and its place in its batch: name order is time order
    objects = sorted(storage.read_with(location, listing), key=lambda p: (p.parent.name, p.name))
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


# -- pairing intents with their outcomes -----------------------------------------------------------

def _pair(records: Iterable[Mapping[str, Any]],  # Any: JSON records
          ) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Copies of ``records``, each intent with its ``outcome`` (the latest outcome of its change written after it)
    and ``completed_by``; and intent record id -> that outcome record."""
    out = [dict(r) for r in records]
    waiting: dict[str, list[dict[str, Any]]] = {}  # change id -> intents no outcome followed yet
    closed: dict[str, list[dict[str, Any]]] = {}  # change id -> the intents its last outcome completed
    outcome_of: dict[str, dict[str, Any]] = {}
    for record in out:
        cid = record.get("change_id")
        if record.get("phase") == INTENT:
            record["outcome"], record["completed_by"] = UNKNOWN, None
            waiting.setdefault(str(cid), []).append(record)
        elif record.get("phase") == OUTCOME:
            # a later outcome of a change already completed (found in place after a failure) replaces it
            intents = waiting.pop(str(cid), None) or closed.get(str(cid), [])
            for intent in intents:
                intent["outcome"], intent["completed_by"] = record.get("outcome"), record.get("record_id")
                outcome_of[str(intent.get("record_id"))] = record
            closed[str(cid)] = intents
    return out, outcome_of


def annotated(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:  # Any: JSON records
    """``records`` as :func:`read_audit` returns them: each intent with its ``outcome`` and ``completed_by``."""
    return _pair(records)[0]


def changes(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:  # Any: JSON records
    """One entry per change: its intent's fields (who approved, the plan ...), ``after`` read back by its outcome
    (as planned where none), ``planned_after``, ``outcome`` (:data:`UNKNOWN` without one), ``outcome_try`` (the
    try that wrote it), ``error`` and ``outcome_record_id``. An intent repeated by a later try of the same change
    (its first try died before the change) is one entry. A record of the first format is an applied change; an
    outcome whose intent is not among ``records`` is an entry of its own."""
    pairs, outcome_of = _pair(records)
    entries: dict[tuple[str, ...], dict[str, Any]] = {}
    seen_intents = {str(r.get("record_id")) for r in pairs if r.get("phase") == INTENT}
    for record in pairs:
        phase = record.get("phase")
        if phase is None:  # kip848-audit/1: written after the change, read back
            entries[("v1", str(record.get("record_id")))] = {**record, "planned_after": record.get("after"),
                                                               "outcome": APPLIED, "outcome_try": record.get(
                                                                   "try_number"), "error": None,
                                                               "outcome_record_id": record.get("record_id")}
            continue
        if phase == OUTCOME:
            if not set(record.get("intent_ids") or []) & seen_intents:
                entries[("orphan", str(record.get("record_id")))] = _entry(record, record)
            continue
        outcome = outcome_of.get(str(record.get("record_id")))
        anchor = str(outcome.get("record_id")) if outcome is not None else f"open:{record.get('change_id')}"
        key = (anchor, str(record.get("kind")), str(record.get("target")))
        entries.pop(key, None)  # the latest intent of one change stands for it (the dict keeps the order)
        entries[key] = _entry(record, outcome)
    return list(entries.values())


def _entry(intent: Mapping[str, Any], outcome: Mapping[str, Any] | None) -> dict[str, Any]:  # Any: JSON
    entry = {k: v for k, v in intent.items() if k not in ("outcome", "completed_by", "intent_ids", "error")}
    entry["planned_after"] = intent.get("after")
    if outcome is None:
        return {**entry, "outcome": UNKNOWN, "outcome_try": None, "error": None, "outcome_record_id": None}
    # a note (the groups a feature was lowered over ...) keeps what it stated; its change's outcome is read back
    same = (outcome.get("kind"), outcome.get("target")) == (intent.get("kind"), intent.get("target"))
    return {**entry, "after": outcome.get("after") if same else intent.get("after"),
            "outcome": outcome.get("outcome"), "outcome_try": outcome.get("try_number"),
            "error": outcome.get("error"), "outcome_record_id": outcome.get("record_id")}


def describe_outcome(entry: Mapping[str, Any]) -> str:  # Any: an entry of :func:`changes`
    """``applied``, ``found in place by try 2``, ``not applied (try 2 found it not in place)``,
    ``failed (try 1): <error>``, ``outcome unknown``: what a report says of a change."""
    outcome, by = entry.get("outcome"), entry.get("outcome_try")
    tried = f"try {by}" if by is not None else "a later try"
    if outcome == APPLIED:
        return APPLIED + (f" (try {by})" if by is not None and by != 1 else "")
    if outcome == FOUND_IN_PLACE:
        return f"{FOUND_IN_PLACE} by {tried}"
    if outcome == NOT_APPLIED:
        return f"{NOT_APPLIED} ({tried} found it not in place)"
    if outcome == FAILED:
        return f"{FAILED}" + (f" ({tried})" if by is not None else "") + (f": {entry['error']}"
                                                                          if entry.get("error") else "")
    return UNKNOWN


def summary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:  # Any: JSON of several shapes (XCom, reports)
    """The lines a run report shows: what changed, from what to what, with what outcome, approved by whom."""
    return [{"kind": r["kind"], "target": r["target"], "before": r["before"], "after": r["after"],
             "outcome": describe_outcome(r),
             # a reused approval (recheck) repeats its approver: each person once
             "approved_by": list(dict.fromkeys(a.get("by") for a in r.get("approvals") or [] if a)),
             "task_id": r["task_id"], "at": r["at"], "record_id": r["record_id"]} for r in changes(records)]


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
