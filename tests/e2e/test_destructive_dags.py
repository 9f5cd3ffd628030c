"""The destructive DAGs end to end on real brokers, with a real Kafka Streams application (WordCountDemo):
kafka_disable_group_feature (a cluster of its own: a feature change on the shared broker would break the tests
running beside it) and kip1071_delete_streams_group (the shared broker, a group of its own). Each test runs the
refusal (a live streams group: nothing asked, nothing changed) and then the approved change on the same group."""

from __future__ import annotations

from airflow_provider_kip848.changecontrol.audit import APPLIED, changes, read_audit
from airflow_provider_kip848.engine.offsets import load_snapshot
from airflow_provider_kip848.kafka.errors import GroupNotFound
from airflow_provider_kip848.kafka.model import GroupState, GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import create_topics, produce
from tests.conftest import set_kafka_connection, wait_until
from tests.e2e.helpers import approve, run_dag, shown, state


def _live_streams_app(broker, admin: KafkaAdmin, app_id: str):
    """WordCountDemo on the streams protocol, Stable with its input offsets committed."""
    create_topics(broker.bootstrap_servers, {WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    produce(broker.bootstrap_servers, WORDCOUNT_INPUT_TOPIC, [f"the quick fox {i}" for i in range(20)])
    app = broker.start_wordcount(app_id, group_protocol="streams")

    def committed() -> bool:
        try:
            desc = admin.describe_group(app_id)
            offsets = admin.group_offsets(app_id).committed
        except GroupNotFound:
            return False
        return desc.state is GroupState.STABLE and any(tp.topic == WORDCOUNT_INPUT_TOPIC for tp in offsets)

    wait_until(committed, timeout=120, what=f"{app_id} Stable with committed offsets")
    return app


def _stop(app, admin: KafkaAdmin, app_id: str) -> None:
    app.stop()
    wait_until(lambda: admin.describe_group(app_id).is_empty, timeout=90, what=f"{app_id} Empty")


def test_disabling_streams_version_is_refused_under_a_live_group_and_lands_over_an_empty_one(
        airflow_db, fresh_kafka, monkeypatch, run_files):
    broker = fresh_kafka()
    conn = set_kafka_connection(monkeypatch, "kafka_disable", broker.bootstrap_servers)
    app_id = "wc-disable"
    audit = run_files.audit
    conf = {"kafka_conn_id": conn, "feature": "streams.version", "level": 0}
    with KafkaAdmin(ClientSettings(broker.bootstrap_servers)) as admin:
        app = _live_streams_app(broker, admin, app_id)
        try:
            # refused: the live streams group's member would fail at its next heartbeat; nobody is asked
            run, answers, report = run_dag("kafka_disable_group_feature",
                                           conf, decide=approve)
            assert state(run) == "failed" and answers == [] and report["outcome"] == "failed", report
            assert report["failed_tasks"] == ["preflight"]
            assert report["results"]["preflight"]["failures"] == ["dependent_groups"]
            assert f"'{app_id}' (1 member(s))" in str(report["results"]["preflight"]["checks"])
            assert admin.describe_features().level("streams.version") == 1
            assert admin.describe_group(app_id).state is GroupState.STABLE
        finally:
            _stop(app, admin, app_id)
        offsets = admin.group_offsets(app_id).committed

        # the group is empty now: listed as staying, the broker's verdict in the plan, approved, applied
        run, answers, report = run_dag("kafka_disable_group_feature",
                                       conf, decide=approve)
        assert state(run) == "success" and report["outcome"] == "changed", report
        assert [a["option"] for a in answers] == ["Approve"]
        body = answers[0]["body"]
        assert "| feature | `streams.version` | 1 | 0 | broker (validate only): streams.version can be disabled. |" \
            in body, body
        assert f"| dependent_groups | WARN | 1 empty streams group(s) stay: '{app_id}' (empty) |" in body, body
        assert admin.describe_features().level("streams.version") == 0
        assert report["after"] == {"feature": "streams.version", "finalized_level": 0}
        records = {r["kind"]: r for r in changes(read_audit(str(audit)))}
        assert (records["feature"]["before"], records["feature"]["after"], records["feature"]["outcome"]) == (
            1, 0, APPLIED)
        assert records["feature_override_dependent_groups"]["after"] == {app_id: 0}
        assert records["feature"]["approvals"] and records["feature"]["plan_hash"] == report["plan"]["hash"]

        # a rerun: nothing to do, nobody asked
        run, answers, report = run_dag("kafka_disable_group_feature",
                                       conf, decide=approve)
        assert state(run) == "success" and report["outcome"] == "nothing_to_do" and answers == [], report

        # what the plan says of the empty group: raising the feature again brings it back, offsets and all
        admin.update_feature("streams.version", 1)
        assert admin.describe_group(app_id).state is GroupState.EMPTY
        assert admin.group_offsets(app_id).committed == offsets

        # group.version: its dependants are consumer-protocol groups, and the controller validates its disable
        # with streams.version finalized and a streams group present (a dry run: nothing changes)
        run, answers, report = run_dag("kafka_disable_group_feature",
                                       {**conf, "feature": "group.version", "dry_run": True}, decide=approve)
        assert state(run) == "success" and report["outcome"] == "dry_run" and answers == [], report
        markdown = report["plan"]["markdown"]
        assert "| feature | `group.version` | 1 | 0 | broker (validate only): group.version can be disabled. |" \
            in markdown and "| dependent_groups | PASS | no consumer group exists |" in markdown, markdown
        assert admin.describe_features().level("group.version") == 1


def test_deleting_a_live_streams_group_is_refused_and_an_empty_one_is_deleted_after_its_snapshot(
        airflow_db, kafka, kafka_conn, unique, run_files):
    app_id = unique("wc-delete")
    conf = {"kafka_conn_id": kafka_conn, "group_id": app_id}
    with KafkaAdmin(ClientSettings(kafka.bootstrap_servers)) as admin:
        app = _live_streams_app(kafka, admin, app_id)
        try:
            run, answers, report = run_dag("kip1071_delete_streams_group",
                                           conf, decide=approve)
            assert state(run) == "failed" and answers == [] and report["outcome"] == "failed", report
            assert report["failed_tasks"] == ["preflight"]
            assert report["results"]["preflight"]["failures"] == ["group_empty"]
            desc = admin.describe_group(app_id)
            assert desc.type is GroupType.STREAMS and len(desc.members) == 1
            assert not list(run_files.root.glob("*/*/snapshots/*.json")), "no snapshot before the checks pass"
        finally:
            _stop(app, admin, app_id)
        offsets = admin.group_offsets(app_id).committed
        internal = {f"{app_id}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog",
                    f"{app_id}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"}

        run, answers, report = run_dag("kip1071_delete_streams_group",
                                       conf, decide=approve)
        assert state(run) == "success" and report["outcome"] == "changed", report
        assert [a["option"] for a in answers] == ["Approve"]
        body = answers[0]["body"]
        assert all(f"`{t}`" in shown(body) for t in internal) and "NOT deleted with the group" in body, body
        [snapshot_path] = run_files.root.rglob("offsets-before-delete.json")
        assert f"`{snapshot_path}`" in body, body
        assert load_snapshot(str(snapshot_path)).committed == offsets and offsets

        assert app_id not in admin.group_ids()  # the delete task read it back gone before it ended
        assert report["after"]["listed"] is False
        assert set(report["after"]["internal_topics_left"]) == internal  # group deletion leaves them
        [record] = [r for r in changes(read_audit(str(run_files.audit))) if r["kind"] == "group"]
        assert record["target"] == app_id and record["after"] == {"listed": False} and record["outcome"] == APPLIED
        assert record["before"] == {"type": "streams", "state": "Empty", "members": 0}

        run, answers, report = run_dag("kip1071_delete_streams_group",
                                       conf, decide=approve)
        assert state(run) == "success" and report["outcome"] == "nothing_to_do" and answers == [], report
