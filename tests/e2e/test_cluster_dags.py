"""The two migration DAGs end to end on the 3-node cluster, the group's coordinator killed while the DAG waits.

The verdicts the reports give ("migrated", offsets preserved, validation passed) must be the truth after
the failover, checked here with a fresh client independent of the DAG's.
"""

from __future__ import annotations

import threading
import time

from airflow.models import TaskInstance
from airflow.utils.session import create_session
from airflow.utils.state import TaskInstanceState

from airflow_provider_kip848.kafka.model import GroupType, MemberProtocol
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.rules.conditions import is_live
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import produce
from kip848_harness.faults import coordinator_node, kill_coordinator
from tests.conftest import set_kafka_connection, wait_until
from tests.e2e.helpers import (
    Feeder,
    application_down,
    approve,
    check_downtime_against_output,
    read_since,
    report_folder,
    run_dag,
    state,
)
from tests.e2e.test_consumer_offline_migration import INSTANCES, live_protocols, running_classic
from tests.e2e.test_consumer_offline_migration import conf as consumer_offline_conf
from tests.e2e.test_rolling_upgrade import conf as rolling_conf
from tests.e2e.test_rolling_upgrade import scenario
from tests.e2e.test_streams_offline_migration import classic_wordcount
from tests.e2e.test_streams_offline_migration import conf as offline_conf


def test_rolling_upgrade_with_the_coordinator_killed_mid_rollout(airflow_db, cluster, monkeypatch, unique, tmp_path):
    set_kafka_connection(monkeypatch, "kafka_admin_default", cluster.bootstrap_servers, request_timeout_ms=15000)
    topic, output, group, app, admin = scenario(cluster.bootstrap_servers, unique, tmp_path)
    watcher = KafkaAdmin(ClientSettings(cluster.bootstrap_servers, request_timeout_ms=15000))  # the roll's own
    killed: list[int] = []
    rollout_errors: list[BaseException] = []

    def rolled(n: int) -> bool:
        """The group is Stable with the first ``n`` instances (app-0 ..) back as live consumer-protocol members."""
        try:
            d = watcher.describe_group(group)
        except Exception:  # noqa: BLE001 - converting, or its coordinator moving after the kill: ask again
            return False
        on_consumer = {m.client_id for m in d.members if m.protocol is MemberProtocol.CONSUMER and is_live(m)}
        return d.state == "Stable" and {f"app-{i}" for i in range(n)} <= on_consumer

    def roll(detail):
        dag_id, run_id = detail["task_instance"]["dag_id"], detail["task_instance"]["dag_run_id"]

        def go():
            try:
                # the DAG snapshots first, then waits (deferred) for the rollout: the roll starts once it waits
                wait_until(lambda: wait_deferred(dag_id, run_id), timeout=120, interval=0.2,
                           what="the DAG's wait_migrated deferred")
                feeder = threading.Thread(target=produce, args=(cluster.bootstrap_servers, topic,
                                                                (f"v{i}" for i in range(200, 400))),
                                          kwargs={"keys": (str(i) for i in range(200, 400))})
                feeder.start()
                for i in range(len(app.members)):
                    app.restart(i, "consumer")
                    if i == 0:
                        killed.append(kill_coordinator(cluster, group))  # mid-rollout, the wait's coordinator dies
                    # the next instance rolls once this one is back in the group (after the failover, for the first)
                    wait_until(lambda n=i + 1: rolled(n), timeout=120, what=f"instance app-{i} rolled and joined")
                feeder.join()
            except BaseException as exc:  # noqa: BLE001 - asserted by the test
                rollout_errors.append(exc)
        threading.Thread(target=go, daemon=True).start()

    try:
        run, _answers, report = run_dag("kip848_consumer_rolling_upgrade", rolling_conf(group, output, tmp_path),
                                        decide=approve, before_answer=roll)
        assert not rollout_errors, rollout_errors
        assert state(run) == "success", report
        assert report["outcome"] == "migrated"
        assert killed and report["results"]["migration"]["mode"] == "deferred"
        assert report["results"]["validation"]["passed"]
        # the verdict is true: a fresh client sees the 3 instances on the consumer protocol
        with KafkaAdmin(ClientSettings(cluster.bootstrap_servers)) as fresh:
            desc = fresh.describe_group(group)
            assert desc.type is GroupType.CONSUMER and len(desc.members) == 3
            assert all(m.protocol is MemberProtocol.CONSUMER for m in desc.members)
        assert coordinator_node(cluster.bootstrap_servers, group) != killed[0]
    finally:
        app.stop()
        admin.close()
        watcher.close()


def wait_deferred(dag_id: str, run_id: str) -> bool:
    """Whether the run's wait_migrated task has deferred (its trigger polls the group now): ``dag.test()`` runs the
    trigger inline with the task queued, so the deferral is the trigger and resume method the task left in the DB."""
    with create_session() as session:
        ti = session.query(TaskInstance).filter(
            TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id,
            TaskInstance.task_id == "wait_migrated").one_or_none()
        return ti is not None and (ti.next_method is not None or ti.state == TaskInstanceState.DEFERRED)


def test_offline_streams_migration_with_the_coordinator_killed_while_emptying(airflow_db, cluster, monkeypatch,
                                                                               unique, tmp_path, controllers):
    set_kafka_connection(monkeypatch, "kafka_admin_default", cluster.bootstrap_servers, request_timeout_ms=15000)
    app_id, word = unique("wc-cluster"), f"w{time.time_ns()}"
    admin = KafkaAdmin(ClientSettings(cluster.bootstrap_servers, request_timeout_ms=15000))
    controller = classic_wordcount(cluster, admin, app_id, word, controllers)
    killed: list[int] = []

    def kill_when_stopped(detail):
        def go():
            wait_until(lambda: not controller.running_pids(), timeout=120, what="the application stopped")
            killed.append(kill_coordinator(cluster, app_id))  # the Empty wait's coordinator dies
        threading.Thread(target=go, daemon=True).start()

    try:
        conf = offline_conf(cluster, app_id, tmp_path, empty_settle_seconds=3, standby_replicas=0)
        conf["app_controller_args"] = {"stop_mode": "kill"}
        run, _answers, report = run_dag("kip1071_streams_offline_migration", conf, decide=approve,
                                        before_answer=kill_when_stopped)
        assert state(run) == "success", report
        assert report["outcome"] == "migrated" and killed
        results = report["results"]
        comparison = results["offsets_vs_snapshot"]
        assert comparison["preserved"] and comparison["counts"]["equal"] == len(comparison["partitions"]) > 0
        assert results["output_records_written_during_run"] == 0
        assert results["validation"]["passed"]
        with KafkaAdmin(ClientSettings(cluster.bootstrap_servers)) as fresh:
            desc = fresh.describe_group(app_id)
            assert desc.type is GroupType.STREAMS and desc.state == "Stable" and len(desc.members) == 1
    finally:
        controller.stop()
        admin.close()


def test_offline_consumer_migration_with_the_coordinator_killed_while_emptying(airflow_db, cluster, monkeypatch,
                                                                                unique, tmp_path, controllers):
    """The cooperative-sticky group moved offline on 3 nodes; the group's coordinator is killed once the
    application is stopped, while the DAG waits for Empty. The verdicts hold after the failover, and so does
    the downtime measured from the group's records (read from the partition's new leader) and the output."""
    set_kafka_connection(monkeypatch, "kafka_admin_default", cluster.bootstrap_servers, request_timeout_ms=15000)
    admin = KafkaAdmin(ClientSettings(cluster.bootstrap_servers, request_timeout_ms=15000))
    topic, output, group, args, controller = running_classic(cluster.bootstrap_servers, unique, tmp_path, admin,
                                                             controllers)
    watcher = KafkaAdmin(ClientSettings(cluster.bootstrap_servers, request_timeout_ms=15000))  # the feeder's own
    killed: list[int] = []
    out_before: dict[int, int] = {}

    feeder = Feeder(cluster.bootstrap_servers, topic, lambda: application_down(watcher, group), first=200)

    def at_approval(detail):
        if feeder.is_alive() or feeder.written:
            return
        out_before.update({tp.partition: hi for tp, (_, hi) in watcher.topic_offsets([output]).items()})
        feeder.start()  # input at 20 records/s from the approval until the application is down

        def go():
            wait_until(lambda: not controller.running_pids(), timeout=120, what="the application stopped")
            killed.append(kill_coordinator(cluster, group))  # the Empty wait's coordinator dies
        threading.Thread(target=go, daemon=True).start()

    try:
        run, _answers, report = run_dag("kip848_consumer_offline_migration",
                                        consumer_offline_conf(tmp_path, group, output, args, empty_settle_seconds=3),
                                        decide=approve, before_answer=at_approval)
        written = feeder.finish()
        assert state(run) == "success", report
        assert report["outcome"] == "migrated" and killed
        assert report["results"]["offsets_vs_snapshot"]["counts"].get("lost", 0) == 0
        validation = report["results"]["validation"]
        assert validation["passed"], validation
        continuity = validation["verdicts"][2]["counts"]
        assert continuity["missing_ids"] == 0 and continuity["records"] >= written, continuity
        with KafkaAdmin(ClientSettings(cluster.bootstrap_servers)) as fresh:  # the truth, from a fresh client
            assert fresh.group_listing(group).type is GroupType.CONSUMER
            assert live_protocols(fresh, group) == [MemberProtocol.CONSUMER] * INSTANCES
            ends = {tp.partition: hi for tp, (_, hi) in fresh.topic_offsets([output]).items()}
        downtime = report["downtime"]
        assert downtime["source"] == "group records" and downtime["types"] == ["classic", "consumer"], downtime
        assert downtime["rebalances"] >= 2 and downtime["first_member_left"] is not None
        gap = check_downtime_against_output(downtime, read_since(cluster.bootstrap_servers, output, out_before, ends),
                                            report_folder("kip848_consumer_offline_migration", run))
        assert gap.seconds > 1, gap
    finally:
        feeder.stopping.set()
        controller.stop()
        admin.close()
        watcher.close()
