"""kip848_consumer_rolling_upgrade refused at its preflight for the client library its instances run (issue 48,
item 3), through the DAG: two Java consumers built against kafka-clients 3.9.1 under supervisord, the ``command``
controller's target and the run's Params both declaring 4.4.0. Nobody is asked to approve, nothing is restarted,
and the run's report names each instance, the release it runs and that its own log said so. And the plan an
approver reads shows each instance's release and where it came from."""

from __future__ import annotations

from confluent_kafka import libversion

from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import create_topics, produce
from kip848_harness.java_consumer import SupervisedJavaConsumer
from kip848_harness.supervised import SupervisedConsumerApp
from tests.conftest import wait_until
from tests.e2e.helpers import approve, run_dag, state

DAG = "kip848_consumer_rolling_upgrade"


def test_instances_on_an_old_client_library_are_refused_at_the_preflight(
        airflow_db, kafka_conn, bootstrap, unique, tmp_path, controllers, supervisor):
    topic, group = unique("cr-in"), unique("cr-app")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, (f"v{i}" for i in range(20)), keys=(str(i) for i in range(20)))
    app = SupervisedJavaConsumer(supervisor, group, tmp_path / "supervised" / group, bootstrap_servers=bootstrap,
                                 group_id=group, topics=[topic], instances=2, release="3.9.1",
                                 declared_version="4.4.0")
    app.install("classic")
    name = controllers.add(group, "command", app.target(by_instance=True))
    admin = KafkaAdmin(ClientSettings(bootstrap))
    try:
        app.start("classic")
        wait_until(lambda: (d := admin.describe_group(group)).state.value == "Stable" and len(d.members) == 2,
                   timeout=90, what=f"2 classic members: {app.log_tails(8)}")
        pids = app.pids()
        run, answers, report = run_dag(DAG, {"group_id": group, "app_controller": name, "client": "java",
                                             "client_version": "4.4.0", "poll_seconds": 0.5, "reader": "python",
                                             "validate_with_spark": False}, decide=approve)
        assert state(run) == "failed" and answers == [], report  # nobody was asked to approve it
        assert "preflight" in report["failed_tasks"], report["failed_tasks"]
        checks = {c["name"]: c for c in report["results"]["preflight"]["checks"]}
        release = checks["client_release"]
        print("client_release:", release)
        assert release["status"] == "fail", release
        for process in sorted(pids):
            assert f"{app.name}:{process}: java 3.9.1 (the instance's log: '" in release["evidence"], release
        assert [c for c, v in checks.items() if v["status"] == "fail"] == ["client_release"], checks
        assert app.pids() == pids  # nothing restarted
    finally:
        app.remove()
        admin.close()


def test_the_plan_shows_each_instances_release_and_its_source(airflow_db, kafka_conn, bootstrap, unique, tmp_path,
                                                             controllers, supervisor):
    """A dry run of the same DAG over two confluent-kafka instances, nothing declared (neither the target nor the
    Params): the plan's preflight table (the approval's body) passes client_release with each instance's librdkafka
    release and the line of its own log it was read from."""
    topic, group = unique("cr-in"), unique("cr-app")
    create_topics(bootstrap, {topic: 2})
    app = SupervisedConsumerApp(supervisor, group, tmp_path / "supervised" / group, bootstrap_servers=bootstrap,
                                group_id=group, topics=[topic], instances=2)
    app.install("classic")
    target = app.target(by_instance=True)
    target.pop("client_version")
    name = controllers.add(group, "command", target)
    admin = KafkaAdmin(ClientSettings(bootstrap))
    try:
        app.start("classic")
        wait_until(lambda: (d := admin.describe_group(group)).state.value == "Stable" and len(d.members) == 2,
                   timeout=90, what=f"2 classic members: {app.log_tails(8)}")
        run, answers, report = run_dag(DAG, {"group_id": group, "app_controller": name, "client": "librdkafka",
                                             "dry_run": True, "reader": "python", "validate_with_spark": False},
                                       decide=approve)
        assert state(run) == "success" and report["outcome"] == "dry_run" and answers == [], report
        markdown = report["plan"]["markdown"]
        row = next(line for line in markdown.splitlines() if line.startswith("| client_release |"))
        print(row)
        assert row.startswith("| client_release | PASS | "), row
        for process in sorted(app.pids()):
            assert (f"{app.name}:{process}: librdkafka {libversion()[0]} (the instance's log: 'client library: "
                    "confluent-kafka ") in row, row
    finally:
        app.remove()
        admin.close()
