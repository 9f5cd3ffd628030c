"""kip1071_streams_rollback_to_classic end to end with Kafka's WordCountDemo: streams -> classic, offline."""

from __future__ import annotations

import time

from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.appcontrol import LocalWordCountController
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import create_topics, produce
from kip848_harness.supervised import SupervisedWordCount
from kip848_harness.windows import open_window
from tests.conftest import wait_until
from tests.e2e.helpers import approve, run_dag, state
from tests.e2e.test_streams_offline_migration import count_of

DAG = "kip1071_streams_rollback_to_classic"


def streams_wordcount(kafka, admin, app_id, word, controllers, *, supervisor=None, **controller_extra):
    """A WordCountDemo application running on a streams group, every input record committed; the group
    has one standby replica per task as a group config (what a migration carried over). Registered in the
    deployment's registry under ``app_id`` (``controller_extra`` added to its target). With ``supervisor``: a
    program of that real supervisord, driven by the ``command`` controller on the worker."""
    create_topics(kafka.bootstrap_servers, {WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    admin.alter_group_config(app_id, {"streams.num.standby.replicas": "1"}, allow_absent_group=True)
    if supervisor is not None:
        # its classic consumers' own session: the liveness window of the way back (45 s by default)
        controller = SupervisedWordCount(supervisor, app_id, kafka.workdir / "supervised" / app_id, kafka=kafka,
                                         application_id=app_id,
                                         protocol_properties={"classic": {"session.timeout.ms": "6000",
                                                                          "heartbeat.interval.ms": "500"}})
        controller.install("streams")
        controllers.add(app_id, "command", controller.target(), description="WordCountDemo under supervisord")
    else:
        controller = LocalWordCountController(str(kafka.workdir), app_id, **controller_extra)
        controllers.add(app_id, "local-wordcount", {"kafka_workdir": str(kafka.workdir), "application_id": app_id,
                                                    **controller_extra})
    controller.start("streams")
    produce(kafka.bootstrap_servers, WORDCOUNT_INPUT_TOPIC, [f"{word} a", f"{word} b"])
    assert count_of(kafka.bootstrap_servers, word, 2) == 2
    wait_until(lambda: (d := admin.describe_group(app_id)).state == "Stable" and d.type is GroupType.STREAMS
               and admin.group_offsets(app_id).total_lag == 0, timeout=90, what="streams app committed everything")
    return controller


def conf(kafka, app_id, tmp_path, **extra):
    return {"application_id": app_id, "app_controller": app_id,
            "remove_members_after": 2, "empty_settle_seconds": 3, "poll_seconds": 0.5, "empty_timeout_minutes": 3,
            "start_timeout_minutes": 3, "reader": "python", "source_topics": WORDCOUNT_INPUT_TOPIC, **open_window(),
            **extra}


def test_a_streams_application_goes_back_to_classic(airflow_db, kafka, kafka_conn, unique, tmp_path, controllers,
                                                    supervisor):
    """The way back after a migration: the streams application (under a real supervisord, the deployment's
    ``command`` controller) is stopped, its group empties, and it restarts on classic from its committed offsets
    (equal to the snapshot), processing again. The approval showed that its standby replica (a streams group
    config the application config lacks) goes away; a second run finds nothing to do."""
    app_id, word = unique("wc-back"), f"b{time.time_ns()}"
    admin = KafkaAdmin(ClientSettings(kafka.bootstrap_servers))
    controller = streams_wordcount(kafka, admin, app_id, word, controllers, supervisor=supervisor)
    try:
        run, answers, report = run_dag(DAG, conf(kafka, app_id, tmp_path, client_version="4.3.1"), decide=approve)
        assert state(run) == "success", report
        assert report["outcome"] == "back_on_classic", report
        assert len(answers) == 1 and "back to classic" in answers[0]["subject"]
        body = answers[0]["body"]
        assert "num.standby.replicas" in body and "client default (num.standby.replicas=0)" in body, body
        results = report["results"]
        checks = {c["name"]: c["status"] for c in results["preflight"]["checks"]}
        assert checks["group_type"] == "pass" and checks["source_topics"] == "pass", checks
        standby = {s["config"]: s for s in results["settings_on_classic"]["settings"]}["num.standby.replicas"]
        assert (standby["current"], standby["value"], standby["changes"]) == ("1", "0", True)
        assert results["stopped"]["platform"]["exit_code"] == 0 and results["stopped"]["instances_gone"] is True
        assert results["restored"]["restored"] == {}
        assert results["started"]["group_protocol"] == "classic"
        assert results["back"]["summary"].startswith("type classic, 1 of 1 live member(s)"), results["back"]
        comparison = results["offsets_vs_snapshot"]
        assert comparison["preserved"] and comparison["counts"]["equal"] == len(comparison["partitions"]) > 0
        assert results["validation"]["passed"]
        assert report["after"]["type"] == "classic"
        assert admin.describe_group(app_id).type is GroupType.CLASSIC and controller.pids()
        produce(kafka.bootstrap_servers, WORDCOUNT_INPUT_TOPIC, [f"{word} c"])
        assert count_of(kafka.bootstrap_servers, word, 3) == 3, "the classic app continued from the commits: 2 -> 3"

        run, answers, report = run_dag(DAG, conf(kafka, app_id, tmp_path), decide=approve)
        assert state(run) == "success" and report["outcome"] == "nothing_to_do" and answers == []
    finally:
        controller.remove()
        admin.close()


def test_a_classic_application_that_does_not_come_up_is_restarted_on_streams(airflow_db, kafka, kafka_conn, unique,
                                                                               tmp_path, controllers):
    """The classic start fails (a bad processing.guarantee in the classic config: the application exits at
    once). Past the deadline the DAG restarts it on streams, where it started, and shows the offsets equal
    to the snapshot: the application is not left down."""
    app_id, word = unique("wc-back-fails"), f"x{time.time_ns()}"
    admin = KafkaAdmin(ClientSettings(kafka.bootstrap_servers))
    controller = streams_wordcount(kafka, admin, app_id, word, controllers,
                                   protocol_properties={"classic": {"processing.guarantee": "bogus"}})
    try:
        run_conf = conf(kafka, app_id, tmp_path, start_timeout_minutes=0.5, validate_with_spark=False)
        run, _answers, report = run_dag(DAG, run_conf, decide=approve)
        assert state(run) == "failed", "a rolled-back change marks the run failed"
        assert report["outcome"] == "rolled_back", report
        assert report["failed_tasks"] == ["wait_classic"], report["failed_tasks"]
        rollback = report["results"]["rollback"]
        assert rollback["restarted"]["group_protocol"] == "streams"
        assert rollback["back"]["summary"].startswith("type streams, 1 of 1 live member(s)"), rollback
        comparison = rollback["offsets_vs_snapshot"]
        assert comparison["preserved"] and comparison["counts"]["equal"] == len(comparison["partitions"]) > 0
        wait_until(lambda: admin.describe_group(app_id).state == "Stable", timeout=90, what="streams group Stable")
        assert admin.describe_group(app_id).type is GroupType.STREAMS and controller.running_pids()
        produce(kafka.bootstrap_servers, WORDCOUNT_INPUT_TOPIC, [f"{word} c"])
        assert count_of(kafka.bootstrap_servers, word, 3) == 3
    finally:
        controller.stop()
        admin.close()
