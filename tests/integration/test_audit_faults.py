"""The audit record of a change when its worker is killed, on a real broker (issue 45, item 5).

A change's record is a pair: the intent, written before the change is sent, then its outcome. The task runs
in a process of its own (as in ``test_faults.py``) that is SIGKILLed at one point of the write: before the
intent, between the intent and the change, between the change and the outcome, after the outcome. Then its
retry runs (try 2). Whatever the point:

* the cluster ends in the approved state, the change applied once;
* the audit holds a complete pair, or an intent the retry completed (``found in place`` by try 2, or ``not
  applied`` before the retry's own pair): never a change without a record, never an intent left open;
* before the retry, the run report's reading of the audit shows a change whose intent is alone as
  ``outcome unknown``.

The same for the fleet move's restore (its intent is on disk when the offsets are committed; the move taken up
by a retry completes it), for the Empty wait's forced removal (its retry completes it), and for a member
removal: a retry after the removal succeeds, while a typo'd ``group.instance.id`` is refused with nothing
removed.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol import audit
from airflow_provider_kip848.changecontrol import report as run_reports
from airflow_provider_kip848.engine.move import ApplicationMove, MoveSettings, Unit
from airflow_provider_kip848.engine.offsets import write_snapshot
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.api import take_snapshot
from airflow_provider_kip848.kafka.errors import MemberNotFound
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.group_config import KafkaGroupConfigOperator
from airflow_provider_kip848.operators.members import KafkaRemoveGroupMembersOperator
from airflow_provider_kip848.operators.offsets import KafkaRestoreGroupOffsetsOperator
from airflow_provider_kip848.sensors.group import KafkaGroupEmptySensor
from kip848_harness.clients import ConsumerProcess, consume, create_topics, produce
from tests.conftest import REPO, set_kafka_connection, wait_until

CONN = "kafka_audit_faults"
KEY = "consumer.session.timeout.ms"
DECISION = {"decision": "Approve", "by": "bob", "by_id": "bob", "at": "2025-01-01T00:00:00+00:00",
            "plan_hash": "0123456789abcdef"}
KILL_POINTS = ("before_intent", "after_intent", "before_outcome", "after_outcome")

ATTEMPT = r'''
import importlib, json, logging, os, signal, sys

spec = json.loads(sys.argv[1])
from airflow_provider_kip848.changecontrol import audit_trail

real = audit_trail.append


def dying_append(location, records):  # the worker dies at spec["die"] of the audit write
    phase = records[0].phase if records else None
    if spec["die"] == f"before_{phase}":
        print("KILLED", spec["die"], flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    written = real(location, records)
    if spec["die"] == f"after_{phase}":
        print("KILLED", spec["die"], flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    return written


audit_trail.append = dying_append


class TI:
    def __init__(self, ident):
        self.__dict__.update(ident)

    def xcom_push(self, key, value):
        pass

    def xcom_pull(self, task_ids=None, key="return_value", **_):
        return spec["decision"] if key == "decision" and task_ids == spec["approval_task"] else None


context = {"ti": TI(spec["ti"])}
if spec["what"] == "operator":
    module, name = spec["operator"].rsplit(".", 1)
    getattr(importlib.import_module(module), name)(task_id=spec["ti"]["task_id"], **spec["kwargs"]).execute(context)
elif spec["what"] == "force_out":  # the Empty wait's (and the fleet move's) forced removal
    from airflow_provider_kip848.hooks.members import force_out_members
    force_out_members(context, spec["ti"]["task_id"], spec["conn"], spec["group_id"], None, 0, [],
                      logging.getLogger("wait"))
else:
    from airflow_provider_kip848.engine.move import ApplicationMove, MoveSettings, Unit
    unit = Unit.from_dict(spec["unit"])
    move = ApplicationMove(unit, "migrate", MoveSettings(**spec["settings"]), context=context,
                           task_id=spec["ti"]["task_id"], log=logging.getLogger("move"))
    move._restore(unit.group_ids)
print("FINISHED", flush=True)
'''


class TI:
    """A task instance of a DAG run as the Task SDK gives it: its identity, the approval's decision, XComs."""

    def __init__(self, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int = -1,
                 approval_task: str = "approval") -> None:
        self.dag_id, self.run_id, self.task_id = dag_id, run_id, task_id
        self.try_number, self.map_index, self.approval_task = try_number, map_index, approval_task
        self.xcom: dict[str, object] = {}

    def ident(self) -> dict[str, object]:
        return {"dag_id": self.dag_id, "run_id": self.run_id, "task_id": self.task_id,
                "try_number": self.try_number, "map_index": self.map_index}

    def xcom_push(self, key: str, value: object) -> None:
        self.xcom[key] = value

    def xcom_pull(self, task_ids: object = None, key: str = "return_value", **_: object) -> object:
        return DECISION if key == "decision" and task_ids == self.approval_task else None


@dataclass(frozen=True)
class DagRun:
    dag_id: str
    run_id: str
    triggering_user_name: str = "alice"
    start_date: datetime | None = None


@pytest.fixture
def conn(kafka, monkeypatch, tmp_path):
    monkeypatch.setenv("KIP848_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    return set_kafka_connection(monkeypatch, CONN, kafka.bootstrap_servers, request_timeout_ms=15000)


def _admin(kafka) -> KafkaAdmin:
    return KafkaAdmin(ClientSettings(kafka.bootstrap_servers, request_timeout_ms=15000))


def _killed(spec: dict, tmp_path) -> subprocess.CompletedProcess:
    """Run one try of the task in its own process; it is SIGKILLed at ``spec["die"]`` (a point it must reach)."""
    script = tmp_path / "attempt.py"
    script.write_text(ATTEMPT)
    proc = subprocess.run([sys.executable, str(script), json.dumps({"decision": DECISION, **spec})],
                          capture_output=True, text=True, timeout=240, cwd=REPO, env=os.environ.copy())
    assert proc.returncode == -9, f"the try was to be SIGKILLed at {spec['die']}: {proc.stdout}\n{proc.stderr[-3000:]}"
    assert f"KILLED {spec['die']}" in proc.stdout and "FINISHED" not in proc.stdout
    return proc


def _records(tmp_path) -> list[dict]:
    return audit.read_audit(str(tmp_path / "audit.jsonl"))


def _report_markdown(tmp_path, ti: TI) -> tuple[dict, str]:
    """The run report's change-control section, read from the audit trail as the report task reads it."""
    context = {"ti": ti, "dag_run": DagRun(ti.dag_id, ti.run_id, start_date=datetime.now(UTC))}
    control = run_reports.change_control(context, (), audit_log=str(tmp_path / "audit.jsonl"))
    built = run_reports.build_report(title="t", outcome="changed", context=context, change_control=control)
    return control, run_reports.render_markdown(built)


def _group_with_commits(kafka, unique, records: int = 20) -> tuple[str, str]:
    topic, group = unique("t"), unique("g")
    create_topics(kafka.bootstrap_servers, {topic: 2})
    produce(kafka.bootstrap_servers, topic, (f"v{i}" for i in range(records)), keys=(f"k{i}" for i in range(records)))
    consume(kafka.bootstrap_servers, group, [topic], records, group_protocol="consumer")
    return topic, group


def _config_case(kafka, unique, tmp_path):
    _, group = _group_with_commits(kafka, unique)
    kwargs = {"kafka_conn_id": CONN, "group_id": group, "set_configs": {KEY: 30000}}

    def state(admin):
        return admin.describe_group_config(group).dynamic.get(KEY)

    return KafkaGroupConfigOperator, kwargs, state, None, "30000", f"{group}:{KEY}", "kafka_group_config_change"


def _restore_case(kafka, unique, tmp_path):
    _, group = _group_with_commits(kafka, unique)
    path = tmp_path / "snapshot.json"
    with _admin(kafka) as admin:
        snapshot = take_snapshot(admin, group)
        path.write_text(snapshot.to_json())
        admin.alter_group_offsets(group, {tp: 0 for tp in snapshot.committed})
    kwargs = {"kafka_conn_id": CONN, "group_id": group, "snapshot_path": str(path)}

    def state(admin):
        return {str(tp): o for tp, o in admin.group_offsets(group).committed.items()}

    lost = {str(tp): 0 for tp in snapshot.committed}
    return (KafkaRestoreGroupOffsetsOperator, kwargs, state, lost, {str(tp): o for tp, o in snapshot.committed.items()},
            group, "kip1071_streams_offline_migration")


@pytest.mark.parametrize("point", KILL_POINTS)
@pytest.mark.parametrize("case", [pytest.param(_config_case, id="group-config"),
                                  pytest.param(_restore_case, id="offsets-restore")])
def test_a_worker_killed_at_any_point_of_a_change_leaves_a_pair_or_an_intent_its_retry_completes(
        kafka, conn, unique, tmp_path, case, point):
    def named(prefix: str) -> str:  # the test's name is cut short in ``unique``: the case and point said here
        return unique(f"{prefix}-{case.__name__.strip('_')}-{point}".replace("_", "-"))

    operator_cls, kwargs, state, before, wanted, target, dag_id = case(kafka, named, tmp_path)
    first = TI(dag_id, named("run"), "apply", try_number=1)
    with _admin(kafka) as admin:
        assert state(admin) == before != wanted
        _killed({"die": point, "what": "operator", "ti": first.ident(), "approval_task": "approval",
                 "operator": f"{operator_cls.__module__}.{operator_cls.__name__}", "kwargs": kwargs}, tmp_path)
        sent = point in ("before_outcome", "after_outcome")
        assert state(admin) == (wanted if sent else before), "the change reached the broker only once it was intended"

        # what the killed try left, and what the run report reads in it
        left = _records(tmp_path)
        intents = [r for r in left if r["phase"] == audit.INTENT]
        if point == "before_intent":
            assert left == [], "killed before its intent: no record, and nothing was sent"
        else:
            [intent] = intents
            assert (intent["kind"], intent["target"], intent["after"]) == (intent["kind"], target, wanted)
            assert intent["before"] == before, "the intent holds the value before, as planned"
            assert (intent["dag_id"], intent["run_id"], intent["task_id"], intent["try_number"],
                    intent["map_index"]) == (dag_id, first.run_id, "apply", 1, -1)
            assert [a["by"] for a in intent["approvals"]] == ["bob"] and intent["plan_hash"] == DECISION["plan_hash"]
        control, markdown = _report_markdown(tmp_path, first)
        if point in ("after_intent", "before_outcome"):
            assert intents[0]["outcome"] == audit.UNKNOWN and intents[0]["completed_by"] is None
            assert [(a["target"], a["outcome"]) for a in control["audit"]] == [(target, audit.UNKNOWN)]
            assert f"`{target}`" in markdown and "**outcome unknown**" in markdown
        else:
            assert "outcome unknown" not in markdown

        # Airflow's retry of the task: try 2 of the same task instance
        retry_ti = TI(dag_id, first.run_id, "apply", try_number=2)
        result = operator_cls(task_id="apply", **kwargs).execute({"ti": retry_ti})
        assert state(admin) == wanted, "the cluster holds the approved change"
        records = _records(tmp_path)
        assert all(r["outcome"] != audit.UNKNOWN for r in records if r["phase"] == audit.INTENT), records
        assert len({r["change_id"] for r in records}) == 1, "one change: every record shares its id"
        outcomes = [(e["outcome"], e["outcome_try"]) for e in audit.changes(records)]
        applied_by_retry = point in ("before_intent", "after_intent")
        assert bool(result.get("restored") or result.get("applied")) == applied_by_retry, result
        assert outcomes == {"before_intent": [(audit.APPLIED, 2)],
                            "after_intent": [(audit.NOT_APPLIED, 2), (audit.APPLIED, 2)],
                            "before_outcome": [(audit.FOUND_IN_PLACE, 2)],
                            "after_outcome": [(audit.APPLIED, 1)]}[point]
        assert audit.changes(records)[-1]["after"] == wanted, "the last outcome states the value read back"
        if point == "after_outcome":
            assert records == left, "a complete pair: the retry finds nothing to complete and writes nothing"
        assert "outcome unknown" not in _report_markdown(tmp_path, retry_ti)[1]


def test_a_typod_instance_id_is_refused_and_the_static_member_stays(kafka, conn, unique, tmp_path):
    topic, group = unique("t"), unique("g")
    create_topics(kafka.bootstrap_servers, {topic: 1})
    member = ConsumerProcess.start(kafka.bootstrap_servers, group, [topic], protocol="classic", client_id="c0",
                                   instance_id="static-0", session_timeout_ms=60000, log_file=str(tmp_path / "c0.log"))
    try:
        with _admin(kafka) as admin:
            wait_until(lambda: [m.instance_id for m in admin.describe_group(group).members] == ["static-0"],
                       what="the static member in the group")
            for try_number in (1, 2):  # a retry does not make a typo pass: no earlier try removed it
                ti = TI("kip1071_streams_offline_migration", "run-1", "remove_members", try_number=try_number)
                task = KafkaRemoveGroupMembersOperator(task_id="remove_members", kafka_conn_id=CONN, group_id=group,
                                                       instance_ids=["static-O"])
                with pytest.raises(AirflowFailException) as failed:
                    task.execute({"ti": ti})
                cause = failed.value.__cause__
                assert isinstance(cause, MemberNotFound) and not cause.retriable
                assert "'static-O'" in str(cause) and "similar ids: 'static-0'" in str(cause)
                assert "nothing was removed" in str(cause)
            assert [(m.instance_id, m.client_id) for m in admin.describe_group(group).members] == [("static-0", "c0")]
        assert _records(tmp_path) == [], "nothing was intended, nothing recorded"
    finally:
        member.stop()


def test_a_member_removal_killed_before_its_outcome_is_retried_and_succeeds(kafka, conn, unique, tmp_path):
    topic, group = unique("t"), unique("g")
    create_topics(kafka.bootstrap_servers, {topic: 1})
    produce(kafka.bootstrap_servers, topic, (f"v{i}" for i in range(5)))
    member = ConsumerProcess.start(kafka.bootstrap_servers, group, [topic], protocol="classic", client_id="c0",
                                   instance_id="static-0", session_timeout_ms=60000, log_file=str(tmp_path / "c0.log"))
    with _admin(kafka) as admin:
        # a commit keeps the group once it is empty (an empty classic group without offsets may be deleted)
        wait_until(lambda: len(admin.describe_group(group).members) == 1 and admin.group_offsets(group).committed,
                   what="the static member in the group, its offsets committed")
        member.kill()  # crashed: its member stays for the 60 s session, holding static-0
        kwargs = {"kafka_conn_id": CONN, "group_id": group, "instance_ids": ["static-0"]}
        first = TI("kip1071_streams_offline_migration", unique("run"), "remove_members", try_number=1)
        _killed({"die": "before_outcome", "what": "operator", "ti": first.ident(), "approval_task": "approval",
                 "operator": f"{KafkaRemoveGroupMembersOperator.__module__}.KafkaRemoveGroupMembersOperator",
                 "kwargs": kwargs}, tmp_path)
        assert admin.describe_group(group).members == (), "the killed try removed it"
        [intent] = _records(tmp_path)
        assert intent["before"]["members"] == ["static-0"] and intent["outcome"] == audit.UNKNOWN

        retry = TI(first.dag_id, first.run_id, "remove_members", try_number=2)
        result = KafkaRemoveGroupMembersOperator(task_id="remove_members", **kwargs).execute({"ti": retry})
        assert result["removed"] == [] and result["not_found"] == ["static-0"] and result["failed"] == {}
        assert [(e["outcome"], e["outcome_try"]) for e in audit.changes(_records(tmp_path))] == [
            (audit.FOUND_IN_PLACE, 2)]


def test_a_wait_killed_after_forcing_members_out_is_completed_by_its_retry(kafka, conn, unique, tmp_path):
    """The Empty wait's ``remove_members_after`` (the offline DAGs' wait_empty, the fleet move's Empty stage): the
    worker dies after LeaveGroup, before the outcome; the wait's retry completes the intent, then sees Empty."""
    topic, group = unique("t"), unique("g")
    create_topics(kafka.bootstrap_servers, {topic: 1})
    produce(kafka.bootstrap_servers, topic, (f"v{i}" for i in range(5)))
    members = [ConsumerProcess.start(kafka.bootstrap_servers, group, [topic], protocol="classic", client_id=f"c{i}",
                                     session_timeout_ms=60000, log_file=str(tmp_path / f"c{i}.log")) for i in range(2)]
    with _admin(kafka) as admin:
        wait_until(lambda: len(admin.describe_group(group).members) == 2 and admin.group_offsets(group).committed,
                   what="two classic members, offsets committed")
        for m in members:
            m.kill()  # crashed: their members stay for the 60 s session
        first = TI("kip848_consumer_offline_migration", unique("run"), "wait_empty", try_number=1)
        _killed({"die": "before_outcome", "what": "force_out", "ti": first.ident(), "approval_task": "approval",
                 "conn": CONN, "group_id": group}, tmp_path)
        assert admin.describe_group(group).members == ()
        [intent] = _records(tmp_path)
        assert len(intent["before"]["members"]) == 2 and intent["outcome"] == audit.UNKNOWN

        retry = TI(first.dag_id, first.run_id, "wait_empty", try_number=2)
        wait = KafkaGroupEmptySensor(task_id="wait_empty", kafka_conn_id=CONN, group_id=group, deferrable=False,
                                     poll_interval=0.5, remove_members_after=0, settle_seconds=0,
                                     instances_gone=True, timeout_minutes=2)
        assert wait.execute({"ti": retry})["removed_members"] == [], "nobody left to force out"
    [entry] = audit.changes(_records(tmp_path))
    assert (entry["outcome"], entry["outcome_try"], entry["after"]) == (audit.FOUND_IN_PLACE, 2, {"members": []})


def _move(unit: dict, tmp_path, ti: TI) -> ApplicationMove:
    return ApplicationMove(Unit.from_dict(unit), "migrate",
                           MoveSettings(kafka_conn_id=CONN, snapshot_dir=str(tmp_path / "snapshots")),
                           context={"ti": ti}, task_id=ti.task_id, log=logging.getLogger("move"))


def _lost_application(kafka, unique, tmp_path) -> tuple[dict, str, dict]:
    """An application whose one group lost its committed offsets after the move's snapshot."""
    _, group = _group_with_commits(kafka, unique)
    unit = {"app": "orders", "team": "commerce", "path": "offline", "app_controller": "none",
            "groups": [{"group_id": group, "type": "consumer", "live_members": 1}]}
    with KafkaGroupAdminHook(CONN) as hook:
        path = _move(unit, tmp_path, TI("kip848_fleet_migration", "r", "wave_1.migrate", 1)).snapshot_path(group)
        taken = write_snapshot(hook, group, path, logging.getLogger("snapshot"))
        committed = {str(tp): o for tp, o in hook.group_offsets(group).committed.items()}
        hook.alter_group_offsets(group, {tp: 0 for tp in hook.group_offsets(group).committed})
    assert taken["committed_partitions"] == 2
    return unit, group, committed


def test_the_fleet_moves_restore_is_on_record_before_its_commit(kafka, conn, unique, tmp_path, monkeypatch):
    unit, group, committed = _lost_application(kafka, unique, tmp_path)
    seen_at_commit: list[list[dict]] = []
    real = KafkaAdmin._send_offsets

    def committing(self, group_id, offsets, desc):  # the real commit, the audit trail looked at first
        seen_at_commit.append(_records(tmp_path))
        return real(self, group_id, offsets, desc)

    monkeypatch.setattr(KafkaAdmin, "_send_offsets", committing)
    ti = TI("kip848_fleet_migration", unique("run"), "wave_1.migrate", try_number=1, map_index=3,
            approval_task="wave_1.approval")
    with _move(unit, tmp_path, ti) as move:
        assert move._restore([group]) == f"{group}: restored 2 partition(s)"
    [[intent]] = seen_at_commit
    assert (intent["phase"], intent["kind"], intent["target"], intent["after"]) == (audit.INTENT, "offsets", group,
                                                                                     committed)
    assert (intent["map_index"], intent["task_id"], [a["by"] for a in intent["approvals"]]) == (
        3, "wave_1.migrate", ["bob"])
    [entry] = audit.changes(_records(tmp_path))
    assert (entry["outcome"], entry["after"], entry["outcome_try"]) == (audit.APPLIED, committed, 1)


def test_a_fleet_move_killed_after_its_restore_is_completed_by_its_retry(kafka, conn, unique, tmp_path):
    unit, group, committed = _lost_application(kafka, unique, tmp_path)
    first = TI("kip848_fleet_migration", unique("run"), "wave_1.migrate", try_number=1, map_index=0,
               approval_task="wave_1.approval")
    _killed({"die": "before_outcome", "what": "move_restore", "ti": first.ident(), "approval_task": "wave_1.approval",
             "unit": unit, "settings": {"kafka_conn_id": CONN, "snapshot_dir": str(tmp_path / "snapshots")}}, tmp_path)
    with _admin(kafka) as admin:
        assert {str(tp): o for tp, o in admin.group_offsets(group).committed.items()} == committed
    assert [r["outcome"] for r in _records(tmp_path)] == [audit.UNKNOWN]

    retry = TI(first.dag_id, first.run_id, "wave_1.migrate", try_number=2, map_index=0, approval_task="wave_1.approval")
    with _move(unit, tmp_path, retry) as move:
        move.begin()  # the retry takes the move up: the killed try's intent is completed first
        assert move._restore([group]) == f"{group}: nothing lost", "nothing restored twice"
    [entry] = audit.changes(_records(tmp_path))
    assert (entry["outcome"], entry["after"], entry["outcome_try"]) == (audit.FOUND_IN_PLACE, committed, 2)
