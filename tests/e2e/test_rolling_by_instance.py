"""kip848_consumer_rolling_upgrade rolling instance by instance through a command controller over a real
supervisord: the first-instance gate, the static members' leave (a crashed one removed, audited), and the online
way back to classic (completed where the brokers' migration policy allows it, refused where it does not)."""

from __future__ import annotations

import json
import os
import signal

from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import create_topics, produce
from kip848_harness.supervised import SupervisedConsumerApp
from tests.conftest import set_kafka_connection, wait_until
from tests.e2e.helpers import approve, run_dag, state

DAG = "kip848_consumer_rolling_upgrade"


def conf(group, tmp_path, controller, **extra):
    return {"group_id": group, "app_controller": controller, "client": "librdkafka", "poll_seconds": 0.5,
            "rollout_timeout_minutes": 3, "rollback_timeout_minutes": 3, "reader": "python",
            "validate_with_spark": False, **extra}


def application(supervisor, bootstrap, unique, tmp_path, *, instances, **kwargs):
    topic, group = unique("roll-in"), unique("roll-app")
    create_topics(bootstrap, {topic: 4})
    produce(bootstrap, topic, (f"v{i}" for i in range(40)), keys=(str(i) for i in range(40)))
    app = SupervisedConsumerApp(supervisor, group, tmp_path / "supervised" / group, bootstrap_servers=bootstrap,
                                group_id=group, topics=[topic], instances=instances, **kwargs)
    return app, group


def settled(admin, group, protocol, count):
    try:
        d = admin.describe_group(group)
        return (d.state.value == "Stable" and len(d.members) == count
                and {m.protocol.value for m in d.members} == {protocol} and admin.group_offsets(group).total_lag == 0)
    except Exception:  # noqa: BLE001 - still converging
        return False


def test_a_group_that_does_not_convert_stops_the_rollout_at_the_first_instance(
        airflow_db, kafka_conn, bootstrap, unique, tmp_path, controllers, supervisor, capfd):
    """The deployment's launcher never reads the protocol switch (the config the platform shows says consumer):
    the first instance restarted comes back on classic. The roll stops there, naming it, before any other
    instance restarts (not at the rollout's deadline), and the way back leaves every instance on classic."""
    app, group = application(supervisor, bootstrap, unique, tmp_path, instances=3, stale_launcher=True,
                             consumer_properties={"enable.auto.commit": "true"})
    app.install("classic")
    name = controllers.add(group, "command", app.target(by_instance=True))
    admin = KafkaAdmin(ClientSettings(bootstrap))
    try:
        app.start("classic")
        wait_until(lambda: settled(admin, group, "classic", 3), timeout=90, what="3 classic instances caught up")
        pids = {f"{app.name}:{process}": str(pid) for process, pid in app.pids().items()}
        capfd.readouterr()
        run, answers, report = run_dag(DAG, conf(group, tmp_path, name, rollout_timeout_minutes=60,
                                                 first_instance_timeout_minutes=5), decide=approve)
        out, err = capfd.readouterr()
        assert state(run) == "failed" and report["outcome"] == "timed_out_rolled_back", report
        assert "roll_application" in report["failed_tasks"], report["failed_tasks"]
        assert "the first one must run consumer within 5 min before any other restarts" in answers[0]["body"]
        # the lint's auto-commit note (a shutdown may take up to the session timeout) is in the approval too
        assert "client config (info): enable.auto.commit: " in answers[0]["body"], answers[0]["body"]
        first, *others = sorted(pids)
        # stopped on what the first instance did, not on a deadline (the rollout's is 60 minutes, the gate's 5)
        assert (f"the first-instance gate: instance {first} restarted with group.protocol=consumer but its new "
                "member joined on another protocol") in out + err, (out + err)[-3000:]
        assert "the other instances were not restarted" in out + err
        # the way back (instance by instance, to classic) found the others as they were before the run: never
        # restarted by the roll that stopped at the first one
        back = report["results"]["rolled_back"]
        assert back["mode"] == "by_instance" and back["group_protocol"] == "classic", back
        assert [r["instance"] for r in back["instances"]] == [first, *others]
        assert {r["instance"]: r["before"]["incarnation"] for r in back["instances"][1:]} == {
            o: pids[o] for o in others}
        assert admin.describe_group(group).type is GroupType.CLASSIC
        assert report["after"]["type"] == "classic"
    finally:
        app.remove()
        admin.close()


def test_a_crashed_static_member_is_removed_and_the_upgrade_and_the_way_back_complete(
        airflow_db, kafka_conn, bootstrap, unique, tmp_path, controllers, supervisor, run_files):
    """Two static instances, half-way through an earlier rollout: instance 0 already runs the consumer protocol
    and was then killed (SIGKILL: no leave), so its member holds its group.instance.id until its session expires
    (60 s here) and a successor on the consumer protocol would be fenced (UNRELEASED_INSTANCE_ID). The upgrade
    removes that member once the controller confirms the instance gone (audited), rolls both instances instance
    by instance, and completes; then the online way back (target_protocol=classic, policy bidirectional)
    completes too."""
    app, group = application(supervisor, bootstrap, unique, tmp_path, instances=2, static=True)
    app.install("classic")
    name = controllers.add(group, "command", app.target(by_instance=True))
    admin = KafkaAdmin(ClientSettings(bootstrap))
    first, second = app.process_names
    try:
        admin.alter_group_config(group, set_configs={"consumer.session.timeout.ms": "60000"},
                                 allow_absent_group=True)
        app.start("classic")
        wait_until(lambda: settled(admin, group, "classic", 2), timeout=90, what="2 static classic instances")
        # the earlier rollout: instance 0 restarted on the consumer protocol, then killed
        app.protocol_path.write_text("consumer")
        supervisor.run_ctl("restart", first, check=True)
        wait_until(lambda: sorted(m.protocol.value for m in admin.describe_group(group).members)
                   == ["classic", "consumer"], timeout=60, what="instance 0 on the consumer protocol")
        os.kill(app.pids()[first.split(":")[1]], signal.SIGKILL)
        wait_until(lambda: first.split(":")[1] not in app.pids(), timeout=30, what="instance 0 gone")
        crashed = f"{group}-0"
        held = [m for m in admin.describe_group(group).members if m.instance_id == crashed]
        assert held and held[0].member_epoch >= 0, "the killed instance's member still holds its id"

        run, answers, report = run_dag(DAG, conf(group, tmp_path, name), decide=approve)
        assert state(run) == "success" and report["outcome"] == "migrated", report
        assert report["results"]["group_load"]["checked"] is False  # an upgrade: no way back to prove
        assert "remove the static members whose instance the controller shows gone" in answers[0]["body"]
        assert report["results"]["departed"]["removed"] == [crashed], report["results"]["departed"]
        rolled = report["results"]["rolled"]
        assert rolled["mode"] == "by_instance" and [r["instance"] for r in rolled["instances"]] == [first, second]
        upgraded = admin.describe_group(group)
        assert upgraded.type is GroupType.CONSUMER
        assert sorted((m.instance_id, m.protocol.value) for m in upgraded.members) == [
            (f"{group}-0", "consumer"), (f"{group}-1", "consumer")]
        audit = [json.loads(line) for line in run_files.audit.read_text().splitlines()]
        removal = [a for a in audit if a["kind"] == "members" and a["task_id"] == "remove_departed_static_members"]
        # the intent (before the removal) and its outcome (read back after it)
        assert [a["phase"] for a in removal] == ["intent", "outcome"] and removal[1]["outcome"] == "applied", audit
        assert removal[0]["before"]["members"] == removal[1]["before"]["members"] == [crashed], audit

        # the online way back, after the run: the same DAG rolled to classic
        run, answers, report = run_dag(DAG, conf(group, tmp_path, name, target_protocol="classic"), decide=approve)
        assert state(run) == "success" and report["outcome"] == "migrated", report
        body = answers[0]["body"]
        assert "online way back to classic" in body
        # the plan names the path it takes, the known risk of each, and the safer one here (4.x brokers not
        # declared fixed: offline) with why
        assert "this run takes the online way back" in body and "KAFKA-21176" in body and "downtime" in body
        assert "Safer here: offline" in body and "prove the group still loads" in body
        assert report["results"]["preflight"]["warnings"].count("way_back_path") == 1, report["results"]["preflight"]
        # after the roll: served by its coordinator as classic with both members, its records judged (#23514)
        loads = report["results"]["group_load"]
        assert loads["checked"] and loads["type"] == "classic" and len(loads["members"]) == 2, loads
        assert loads["load"]["status"] == "exposed" and "#23514" in loads["load"]["evidence"], loads
        back = report["results"]["rolled"]
        assert back["mode"] == "by_instance" and back["group_protocol"] == "classic", back
        final = admin.describe_group(group)
        assert final.type is GroupType.CLASSIC and len(final.members) == 2
    finally:
        app.remove()
        admin.close()


def test_the_way_back_is_refused_where_the_migration_policy_forbids_it(airflow_db, fresh_kafka, monkeypatch, unique,
                                                                      tmp_path, controllers, supervisor):
    """Brokers with group.consumer.migration.policy=upgrade: the online way back of a live consumer group is
    refused by the preflight (consumer_to_classic), before the approval; nothing is rolled, the group stays."""
    broker = fresh_kafka(overrides={"group.consumer.migration.policy": "upgrade"})
    conn = set_kafka_connection(monkeypatch, "kafka_upgrade_only", broker.bootstrap_servers)
    app, group = application(supervisor, broker.bootstrap_servers, unique, tmp_path, instances=1)
    app.install("consumer")
    name = controllers.add(group, "command", app.target(by_instance=True))
    admin = KafkaAdmin(ClientSettings(broker.bootstrap_servers))
    try:
        app.start("consumer")
        wait_until(lambda: settled(admin, group, "consumer", 1), timeout=90, what="a consumer instance")
        pids = app.pids()
        run, answers, report = run_dag(DAG, conf(group, tmp_path, name, kafka_conn_id=conn,
                                                 target_protocol="classic"), decide=approve)
        assert state(run) == "failed" and answers == [], report
        assert report["failed_tasks"] == ["preflight"], report
        assert report["results"]["preflight"]["failures"] == ["migration_policy"]
        assert admin.describe_group(group).type is GroupType.CONSUMER and app.pids() == pids
    finally:
        app.remove()
        admin.close()
