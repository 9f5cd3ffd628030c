"""One task try's audit trail: the intent before each change, its outcome after, earlier tries' intents completed.

Every path that changes a cluster (the operators, the waits that force members
out, the fleet's moves, the roll by instance) records through a
:class:`TaskAudit`:

1. :meth:`TaskAudit.intend` right before the change is sent (the core calls
   back once it has planned: ``before_send``), durable when it returns;
2. :meth:`TaskAudit.applied` with the values read back once the change was
   sent, or :meth:`TaskAudit.failed` when the send or its read-back raised
   (:meth:`TaskAudit.guard`);
3. on a retry, before anything is planned, :meth:`TaskAudit.complete_earlier`:
   each intent of an earlier try of the same task left without an outcome
   (its worker was killed) is completed from what the cluster shows now,
   ``found in place`` or ``not applied``.

A worker killed at any point thus leaves nothing (killed before the intent:
nothing was sent), a complete pair, or an intent that the retry completes or
the report shows as ``outcome unknown``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Protocol

from airflow_provider_kip848.changecontrol.approvals import is_approving
from airflow_provider_kip848.changecontrol.audit import (
    APPLIED,
    FAILED,
    FOUND_IN_PLACE,
    INTENT,
    NOT_APPLIED,
    NOTE_OF,
    OUTCOME,
    UNKNOWN,
    AuditRecord,
    append,
    change_id,
    read_audit,
)
from airflow_provider_kip848.kafka.errors import GroupNotFound, Kip848Error
from airflow_provider_kip848.kafka.model import (
    ClusterFeatures,
    ClusterInfo,
    GroupConfig,
    GroupDescription,
    GroupListing,
    GroupOffsets,
)
from airflow_provider_kip848.kafka.rules.conditions import TaskLog

#: One change: ``(kind, target, before, after)``; in an intent as planned, in an outcome read back.
Change = tuple[str, str, Any, Any]


class ReadsCluster(Protocol):
    """What completing a change's record reads: the hooks and both backends have it."""

    def describe_cluster(self) -> ClusterInfo: ...

    def describe_features(self) -> ClusterFeatures: ...

    def describe_group_config(self, group_id: str) -> GroupConfig: ...

    def group_offsets(self, group_id: str) -> GroupOffsets: ...

    def describe_group(self, group_id: str) -> GroupDescription: ...

    def group_listing(self, group_id: str) -> GroupListing: ...


def read_target(admin: ReadsCluster,  # Any: an intent record (JSON); the value now is any JSON value
                intent: Mapping[str, Any]) -> tuple[Any, bool | None]:
    """What ``intent``'s target holds now, and whether that is what the intent planned (None: its kind is not a
    change this reader knows, nothing is concluded)."""
    kind, target, before, after = intent.get("kind"), str(intent.get("target")), intent.get("before"), intent.get(
        "after")
    if kind == "feature":
        level = admin.describe_features().level(target)
        return level, level == after
    if kind == "group_config":
        group_id, _, key = target.rpartition(":")
        value = admin.describe_group_config(group_id).dynamic.get(key)
        return value, value == after
    if kind == "offsets":
        try:
            committed = {str(tp): o for tp, o in admin.group_offsets(target).committed.items()}
        except GroupNotFound:
            committed = {}
        now = {tp: committed.get(tp) for tp in (after or {})}
        return now, all(now[tp] == offset for tp, offset in (after or {}).items())
    if kind == "members":
        named = {*((before or {}).get("members") or []), *((before or {}).get("static_members") or [])}
        try:
            members = admin.describe_group(target).members
        except GroupNotFound:
            return {"members": []}, True
        present = {m.member_id for m in members} | {i for m in members if (i := getattr(m, "instance_id", None))}
        return {"members": sorted(m.member_id for m in members)}, not named & present
    if kind == "group":
        try:
            admin.group_listing(target)
        except GroupNotFound:
            return {"listed": False}, True
        return {"listed": True}, False
    return None, None


class TaskAudit:
    """The audit of one try of one task (``task_id``: the task, or the task a hook acts for).

    :param context: the task's Airflow context (its TaskInstance: DAG, run, try, map index; the approvals'
        XComs; the run's triggering user and start).
    :param location: where the records go (:func:`~.audit.audit_location`).
    :param admin: reads the cluster's id and, to complete an intent, its target.
    :param approval_task_ids: tasks whose ``decision`` XCom authorised the change (quoted in each intent).
    """

    def __init__(self, context: Mapping[str, Any], task_id: str, *, location: str,  # Any: a task's Context
                 admin: ReadsCluster, approval_task_ids: Sequence[str] = ("approval", "recheck_approval"),
                 log: TaskLog | None = None) -> None:
        ti = context["ti"]
        self._ti = ti
        self.task_id, self.location, self.admin = task_id, location, admin
        self.approval_task_ids = tuple(approval_task_ids)
        self.dag_id: str | None = getattr(ti, "dag_id", None)
        self.run_id: str | None = getattr(ti, "run_id", None)
        self.map_index: int | None = getattr(ti, "map_index", None)
        self.try_number: int | None = getattr(ti, "try_number", None)
        dag_run = context.get("dag_run")
        self.triggered_by: str | None = getattr(dag_run, "triggering_user_name", None)
        started = getattr(dag_run, "start_date", None)
        self.since_day = started.astimezone(UTC).date().isoformat() if isinstance(started, datetime) else None
        self.log = log
        #: this try's intents no outcome completed yet
        self.open: list[AuditRecord] = []
        #: the intents earlier tries of this task wrote (read by :meth:`complete_earlier`)
        self.earlier: list[dict[str, Any]] = []  # Any: JSON records
        #: every record this try wrote, with where (the task's XCom ``audit``)
        self.written: list[dict[str, Any]] = []  # Any: JSON records
        self._cluster: tuple[str | None] | None = None
        self._approvals: dict[str, Any] | None = None  # Any: JSON of several shapes

    # -- what every record of this try says --------------------------------------------------------

    def cid(self, kind: str, target: str) -> str:
        return change_id(self.dag_id, self.run_id, self.task_id, self.map_index, kind, target)

    def _cluster_id(self) -> str | None:
        if self._cluster is None:
            try:
                self._cluster = (self.admin.describe_cluster().cluster_id,)
            except Kip848Error:
                self._cluster = (None,)
        return self._cluster[0]

    def _authorisation(self) -> dict[str, Any]:  # Any: JSON of several shapes
        if self._approvals is None:
            pull = self._ti.xcom_pull
            decisions = [(t, d) for t in self.approval_task_ids if (d := pull(task_ids=t, key="decision"))]
            approving: dict[str, Any] = next((d for _, d in reversed(decisions) if is_approving(d.get("decision"))),
                                             {})
            self._approvals = {
                "approvals": [{"task_id": t, **{k: d.get(k) for k in ("decision", "by", "by_id", "at", "plan_hash",
                                                                      "reused")}} for t, d in decisions],
                "plan_hash": approving.get("plan_hash"), "plan": approving.get("plan"),
                "change_control": approving.get("change_control")}
        return self._approvals

    def _record(self, change: Change, *, phase: str, outcome: str | None = None,  # Any: JSON values
                intent_ids: Sequence[str] = (), error: str | None = None) -> AuditRecord:
        kind, target, before, after = change
        said: dict[str, Any] = self._authorisation() if phase == INTENT else {}
        return AuditRecord(kind=kind, target=target, before=before, after=after, cluster_id=self._cluster_id(),
                           triggered_by=self.triggered_by, approvals=said.get("approvals") or [],
                           plan_hash=said.get("plan_hash"), plan=said.get("plan"),
                           change_control=said.get("change_control"), dag_id=self.dag_id, run_id=self.run_id,
                           task_id=self.task_id, try_number=self.try_number, map_index=self.map_index, phase=phase,
                           change_id=self.cid(kind, target), outcome=outcome, intent_ids=list(intent_ids),
                           error=error)

    def _write(self, records: list[AuditRecord]) -> None:
        where = append(self.location, records)
        self.written += [{**r.to_dict(), "written_to": w} for r, w in zip(records, where, strict=True)]

    def _say(self, message: str, *args: object) -> None:
        if self.log is not None:
            self.log.info(message, *args)

    # -- a change of this try ----------------------------------------------------------------------

    def intend(self, changes: Sequence[Change]) -> None:
        """Record ``changes`` as intended (before as planned, after as planned), durably, before they are sent."""
        records = [self._record(c, phase=INTENT) for c in changes]
        self._write(records)
        self.open += records
        self._say("Audit: %d intended change(s) recorded at %s before sending them: %s", len(records),
                  self.location, ", ".join(f"{r.kind} {r.target}" for r in records))

    def applied(self, changes: Sequence[Change]) -> None:
        """The outcome ``applied`` of each change (before/after read back from the cluster), completing its intent;
        a change without an intent of this try gets one now, in the same write (never a change without a record)."""
        covered = {r.change_id for r in self.open}
        late = [self._record(c, phase=INTENT) for c in changes if self.cid(c[0], c[1]) not in covered]
        waiting = [*self.open, *late]
        outcomes = []
        for change in changes:
            kind, target = change[0], change[1]
            cid = self.cid(kind, target)
            intents = [r for r in waiting if r.change_id == cid]
            if kind in NOTE_OF or not intents:
                continue  # a note shares its change's outcome
            outcomes.append(self._record(change, phase=OUTCOME, outcome=APPLIED,
                                         intent_ids=[r.record_id for r in intents]))
            waiting = [r for r in waiting if r.change_id != cid]
        self._write([*late, *outcomes])
        self.open = [r for r in self.open if r in waiting]
        if late and self.log is not None:
            self.log.warning("Audit: %d change(s) recorded after they were made (no intent before them).", len(late))
        self._say("Audit: %d outcome(s) recorded at %s", len(outcomes), self.location)

    def failed(self, error: BaseException) -> None:
        """The outcome of each intent of this try still open when the task failed with ``error``: ``applied``
        (with the error) when the cluster shows the change in place, else ``failed``."""
        outcomes = []
        for group in self._groups([r.to_dict() for r in self.open]):
            main = group[-1]
            why = f"{type(error).__name__}: {error}"
            try:
                now, in_place = read_target(self.admin, main)
            except Exception as exc:  # noqa: BLE001 - what is known is recorded; the task's own error is raised
                now, in_place = None, False
                why += f"; the value could not be read back ({type(exc).__name__}: {exc})"
            outcome = APPLIED if in_place else FAILED
            if in_place:
                why = f"the task failed after the change: {why}"
            outcomes.append(self._record((main["kind"], main["target"], main["before"], now), phase=OUTCOME,
                                         outcome=outcome, intent_ids=[r["record_id"] for r in group], error=why))
        self._write(outcomes)
        self.open = []

    def settle(self) -> None:
        """Intents of this try that no outcome completed although the task went on (a member that left on its
        own before the removal ...): completed from what the cluster shows."""
        self._complete(self._groups([r.to_dict() for r in self.open]), unknown_only=False)
        self.open = []

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Around a change: an error inside records this try's open intents as failed (:meth:`failed`)."""
        try:
            yield
        except Exception as exc:
            if self.open:
                try:
                    self.failed(exc)
                except Kip848Error as unwritable:  # the task's own error is what it fails with
                    if self.log is not None:
                        self.log.warning("Audit: the failed outcome could not be recorded: %s", unwritable)
            raise

    # -- earlier tries ------------------------------------------------------------------------------

    def complete_earlier(self) -> list[dict[str, Any]]:  # Any: JSON records
        """Complete the intents earlier tries of this task left without an outcome (or with ``failed``): from
        what the cluster shows now, ``found in place`` (by this try) or ``not applied``. Returns every intent
        the earlier tries wrote (also in :attr:`earlier`). Called before this try plans anything."""
        mine = [r for r in read_audit(self.location, since_day=self.since_day) if r.get("phase") == INTENT
                and (r.get("dag_id"), r.get("run_id"), r.get("task_id"), r.get("map_index"))
                == (self.dag_id, self.run_id, self.task_id, self.map_index)]
        self.earlier = mine
        self._complete(self._groups([r for r in mine if r.get("outcome") in (UNKNOWN, FAILED)]), unknown_only=True)
        return mine

    def _complete(self, groups: list[list[dict[str, Any]]], *, unknown_only: bool) -> None:  # Any: JSON records
        outcomes = []
        for group in groups:
            main = group[-1]
            try:
                now, in_place = read_target(self.admin, main)
            except Kip848Error as exc:  # left open: the next try, or the report (outcome unknown)
                if self.log is not None:
                    self.log.warning("Audit: %s %s of try %s not completed: its target cannot be read (%s)",
                                     main["kind"], main["target"], main.get("try_number"), exc)
                continue
            if in_place is None or (not in_place and unknown_only and main.get("outcome") == FAILED):
                continue
            outcome = FOUND_IN_PLACE if in_place else NOT_APPLIED
            outcomes.append(self._record((main["kind"], main["target"], main["before"], now), phase=OUTCOME,
                                         outcome=outcome, intent_ids=[r["record_id"] for r in group]))
            self._say("Audit: %s %s intended by try %s: %s (read now: %s)", main["kind"], main["target"],
                      main.get("try_number"), outcome, now)
        self._write(outcomes)

    @staticmethod
    def _groups(intents: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:  # Any: JSON records
        """Intents by change, each group's change last (the notes before it)."""
        by_change: dict[str, list[dict[str, Any]]] = {}
        for r in intents:
            by_change.setdefault(str(r.get("change_id")), []).append(r)
        return [sorted(g, key=lambda r: r.get("kind") not in NOTE_OF) for g in by_change.values()]

    def push(self) -> None:
        """This try's records as the task's XCom ``audit`` (the run report's fallback where the trail is out of
        reach), when it wrote any."""
        if self.written:
            self._ti.xcom_push(key="audit", value=self.written)


__all__ = ["Change", "ReadsCluster", "TaskAudit", "read_target"]
