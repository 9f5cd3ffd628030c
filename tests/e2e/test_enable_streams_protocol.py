"""kafka_enable_streams_protocol end to end: dry run, approve, nothing to do, reject."""

from __future__ import annotations

from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from tests.conftest import set_kafka_connection
from tests.e2e.helpers import approve, reject, run_dag, state


def test_enable_streams_protocol_paths(airflow_db, fresh_kafka, monkeypatch, tmp_path):
    broker = fresh_kafka()
    conn = set_kafka_connection(monkeypatch, "kafka_enable", broker.bootstrap_servers)
    admin = KafkaAdmin(ClientSettings(broker.bootstrap_servers))
    admin.update_feature("streams.version", 0, action="downgrade")
    # the release the broker runs (declared: a 4.2 broker cannot tell 4.2.0 from 4.2.1 over the protocol)
    base = {"kafka_conn_id": conn, "feature": "streams.version", "level": 1, "declared_broker_version": broker.version}
    try:
        run, answers, report = run_dag("kafka_enable_streams_protocol",
                                       {**base, "dry_run": True}, decide=approve)
        assert state(run) == "success" and report["outcome"] == "dry_run" and answers == []
        assert admin.describe_features().level("streams.version") == 0
        assert "| feature | `streams.version` | 0 | 1 |" in report["plan"]["markdown"]

        run, answers, report = run_dag("kafka_enable_streams_protocol",
                                       base, decide=reject)
        assert state(run) == "success" and report["outcome"] == "rejected"
        assert [a["option"] for a in answers] == ["Reject"] and answers[0]["status"] == 200
        assert admin.describe_features().level("streams.version") == 0

        run, answers, report = run_dag("kafka_enable_streams_protocol",
                                       base, decide=approve)
        assert state(run) == "success" and report["outcome"] == "changed"
        assert admin.describe_features().level("streams.version") == 1
        assert "streams.version=1" in answers[0]["subject"] and "| feature | `streams.version` | 0 | 1 |" in answers[0]["body"]
        assert report["approvals"]["approval"]["decision"] == "Approve" and report["approvals"]["approval"]["by"]
        assert report["after"] == {"feature": "streams.version", "finalized_level": 1}

        run, answers, report = run_dag("kafka_enable_streams_protocol",
                                       base, decide=approve)
        assert state(run) == "success" and report["outcome"] == "nothing_to_do" and answers == []
        assert "already" in report["plan"]["markdown"] or report["plan"]["nothing_to_do"]
    finally:
        admin.close()


def test_the_brokers_protocol_list_is_checked_and_the_lock_names_the_feature(airflow_db, fresh_kafka, monkeypatch,
                                                                              tmp_path):
    """Brokers that do not list ``streams`` in group.coordinator.rebalance.protocols do not serve it even with
    streams.version finalized: the DAG refuses before asking anyone. Finalizing group.version takes the lock
    of group.version, not of streams.version."""
    broker = fresh_kafka(overrides={"group.coordinator.rebalance.protocols": "classic,consumer"})
    conn = set_kafka_connection(monkeypatch, "kafka_no_streams", broker.bootstrap_servers)
    admin = KafkaAdmin(ClientSettings(broker.bootstrap_servers))
    try:
        admin.update_feature("streams.version", 0, action="downgrade")
        run, answers, report = run_dag("kafka_enable_streams_protocol",
                                       {"kafka_conn_id": conn, "feature": "streams.version", "level": 1}, decide=approve)
        assert state(run) == "failed" and answers == [] and report["outcome"] == "failed", report
        assert report["failed_tasks"] == ["preflight"]
        assert admin.describe_features().level("streams.version") == 0

        run, answers, report = run_dag("kafka_enable_streams_protocol",
                                       {"kafka_conn_id": conn, "feature": "group.version", "level": 1,
                                        "dry_run": False}, decide=approve)
        assert state(run) == "success" and report["outcome"] == "nothing_to_do", report
        assert report["lock"]["resource"] == "feature:group.version", report["lock"]
    finally:
        admin.close()
