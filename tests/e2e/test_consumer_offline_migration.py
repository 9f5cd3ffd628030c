"""kip848_consumer_offline_migration end to end with real librdkafka consumers on cooperative-sticky.

librdkafka's cooperative-sticky assignor writes userData into its classic assignments, so the broker refuses
the online upgrade of such a group: these groups move offline. The DAG stops the application (through its
controller), waits for Empty, restarts it on the consumer protocol and proves nothing was lost; when the
restarted application does not come in, it goes back to classic by the same road and never leaves it down.
"""

from __future__ import annotations

import pytest

from airflow_provider_kip848.kafka.model import GroupType, MemberProtocol
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.rules.conditions import is_live
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.appcontrol import LocalConsumerAppController
from kip848_harness.clients import ConsumerProcess, create_topics, produce
from kip848_harness.supervised import SupervisedConsumerApp
from kip848_harness.windows import open_window
from tests.conftest import set_kafka_connection, wait_until
from tests.e2e.helpers import (
    Feeder,
    application_down,
    approve,
    check_downtime_against_output,
    read_since,
    report_folder,
    run_dag,
    shown,
    state,
)

DAG = "kip848_consumer_offline_migration"
INSTANCES = 2
#: a classic member's own session on the test broker: the way back's liveness window is this session (45 s by
#: default) plus a heartbeat, when no progress shows first
CLASSIC_SESSION = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "500"}


def controller_args(tmp_path, bootstrap, group, topic, output, **extra) -> dict:
    return {"workdir": str(tmp_path / "apps"), "bootstrap_servers": bootstrap, "group_id": group, "topics": [topic],
            "instances": INSTANCES, "classic_assignor": "cooperative-sticky", "output_topic": output, **extra}


def conf(tmp_path, group, output, controller, **extra) -> dict:
    return {"group_id": group, "client": "librdkafka", "client_version": "2.12.1",
            "client_properties": {"enable.auto.commit": "false"},
            "app_controller": controller, "remove_members_after": 2, "empty_settle_seconds": 2,
            "empty_timeout_minutes": 2, "start_timeout_minutes": 1.5, "poll_seconds": 0.5,
            "output_topic": output, "id_source": "key", "allowed_duplicates": 1000, "reader": "python",
            **open_window(), **extra}


def running_classic(bootstrap, unique, tmp_path, admin, controllers, *, with_user_data=False, supervisor=None,
                    **controller_extra):
    """A classic cooperative-sticky application of two librdkafka instances, caught up, registered in the
    deployment's controller registry; ``with_user_data``: wait until its assignments carry userData (what makes
    the broker refuse the online upgrade). With ``supervisor``: the instances are programs of that real
    supervisord, driven by the ``command`` controller (supervisorctl on the worker), as an operator's hosts run
    them; else the demo's ``local-consumer-app`` processes."""
    topic, output, group = unique("coop-orders"), unique("coop-out"), unique("coop-app")
    create_topics(bootstrap, {topic: 4, output: 4})
    produce(bootstrap, topic, (f"v{i}" for i in range(200)), keys=(str(i) for i in range(200)))
    if supervisor is not None:
        controller = SupervisedConsumerApp(
            supervisor, group, tmp_path / "app", bootstrap_servers=bootstrap, group_id=group, topics=[topic],
            instances=INSTANCES, output_topic=output,
            classic_properties={"partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": "8000"})
        controller.install("classic")
        name = controllers.add(group, "command", controller.target(),
                               description="the test's consumer application under supervisord")
    else:
        args = controller_args(tmp_path, bootstrap, group, topic, output, **controller_extra)
        controller = LocalConsumerAppController(**args)
        name = controllers.add(group, "local-consumer-app", args, description="the test's consumer application")
    controller.start("classic")

    def stable(members: int) -> bool:
        return (d := admin.describe_group(group)).state == "Stable" and len(d.members) == members

    wait_until(lambda: stable(INSTANCES), timeout=120, what="classic cooperative-sticky app Stable")
    # Instances that joined together own nothing from an earlier generation, and librdkafka writes no
    # userData then (seen on the 3-node cluster). An application that has run for a while has rebalanced:
    # one more instance joining and leaving gives the group that history.
    extra = ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id="app-extra",
                                  assignor="cooperative-sticky", log_file=str(tmp_path / "extra.log"))
    wait_until(lambda: stable(INSTANCES + 1), timeout=120, what="a third instance joined")
    extra.stop()
    seen: list[str] = []

    def settled() -> bool:
        desc, offsets = admin.describe_group(group), admin.group_offsets(group)
        user_data = any(admin.classic_assignment_user_data(group).values())
        seen[:] = [f"{desc.state} with {len(desc.members)} members, lag {offsets.total_lag}, uncommitted "
                   f"{offsets.uncommitted_with_records}, userData {user_data}"]
        return (desc.state == "Stable" and len(desc.members) == INSTANCES and caught_up(offsets)
                and (user_data or not with_user_data))

    try:
        wait_until(settled, timeout=120, what="classic cooperative-sticky app Stable and caught up"
                   + (", its assignments carrying userData" if with_user_data else ""))
    except pytest.fail.Exception as exc:
        pytest.fail(f"{exc}; last seen: {seen}")
    return topic, output, group, name, controller


def caught_up(offsets) -> bool:
    """Every assigned partition committed and no lag (total_lag alone says nothing of a partition that
    was handed over in a rebalance and not consumed yet: it has no commit)."""
    return offsets.total_lag == 0 and not offsets.uncommitted_with_records


def live_protocols(admin, group) -> list[MemberProtocol]:
    return [m.protocol for m in admin.describe_group(group).members if is_live(m)]


def test_cooperative_sticky_group_moves_offline_to_consumer(airflow_db, kafka_conn, bootstrap, unique, tmp_path,
                                                           controllers, supervisor):
    """The application runs under a real supervisord; its controller is the deployment's ``command`` entry
    (supervisorctl on the worker, its config files read by the config command): what the approval shows and what
    the lint checked is the configuration the application runs with."""
    admin = KafkaAdmin(ClientSettings(bootstrap))
    topic, output, group, args, controller = running_classic(bootstrap, unique, tmp_path, admin, controllers,
                                                             supervisor=supervisor)
    watcher = KafkaAdmin(ClientSettings(bootstrap))  # the feeder's own (it runs in another thread)
    out_before: dict[int, int] = {}

    feeder = Feeder(bootstrap, topic, lambda: application_down(watcher, group), first=200)

    def keep_producing(detail):  # input at 20 records/s from the approval until the application is down
        if not feeder.is_alive() and not feeder.written:
            out_before.update({tp.partition: hi for tp, (_, hi) in watcher.topic_offsets([output]).items()})
            feeder.start()

    try:
        run, answers, report = run_dag(DAG, conf(tmp_path, group, output, args), decide=approve,
                                       before_answer=keep_producing)
        written = feeder.finish()
        assert state(run) == "success", report
        assert report["outcome"] == "migrated", report
        assert [a["option"] for a in answers] == ["Approve"]
        # the approval named the controller, its exact commands and the instances the platform showed, and the
        # lint's input was the deployed config read by the controller (its assignor), not what a form said
        body = answers[0]["body"]
        assert f"application controller: {group} (kind command)" in body, body
        assert f"controller stop: `{supervisor.ctl} stop {group}:*`" in shown(body).replace("'", ""), body
        assert "instances now (the platform): 2 instance(s) running" in body, body
        assert f"client config linted: controller '{group}': `cat " in shown(body), body
        assert "group.remote.assignor=uniform (controller)" in body and "enable.auto.commit=false" not in body
        # the session timeout the application runs with on classic (its config file, read by the controller): the
        # consumer protocol refuses it in the client, so it is carried over to the group's config, in the approval
        assert "consumer.session.timeout.ms: 8000 from the application config (session.timeout.ms)" in body, body
        assert "consumer.heartbeat.interval.ms: unset, kept (broker default (group.consumer.heartbeat.interval.ms=" \
               "500))" in body, body
        assert admin.describe_group_config(group).dynamic.get("consumer.session.timeout.ms") == "8000"
        assert report["results"]["group_configs"]["changed"] == {"consumer.session.timeout.ms": [None, "8000"]}
        lint = report["results"]["lint"]
        assert lint["checked"] and lint["linted"]["enable.auto.commit"] == {"value": "false",
                                                                             "from": "form (overrides the controller's)"}
        assert report["before"]["group"]["type"] == "classic" and report["before"]["expected_instances"] == INSTANCES
        # the same group, now KIP-848, every expected instance live on the consumer protocol
        assert admin.group_listing(group).type is GroupType.CONSUMER
        assert live_protocols(admin, group) == [MemberProtocol.CONSUMER] * INSTANCES
        assert report["results"]["emptied"]["summary"].startswith("0 member(s)")
        # nothing lost: offsets never went back, the lag drained, every input record reached the output
        assert report["results"]["offsets_vs_snapshot"]["counts"].get("lost", 0) == 0
        validation = report["results"]["validation"]
        assert validation["passed"], validation
        assert [v["check"] for v in validation["verdicts"]] == ["offsets_preserved", "lag", "record_continuity",
                                                                 "output_timing"]
        continuity = validation["verdicts"][2]["counts"]
        assert continuity["missing_ids"] == 0 and continuity["records"] >= written, continuity
        # the downtime, from the group's own records and the output the validation read: the conversion, its
        # rebalances, and the processing gap, which the test reads itself from the output topic
        downtime = report["downtime"]
        assert downtime["source"] == "group records" and downtime["types"] == ["classic", "consumer"], downtime
        assert downtime["rebalances"] >= 2 and downtime["first_member_left"] is not None
        assert not [p for p in downtime["partitions"] if p["open"]], downtime
        ends = {tp.partition: hi for tp, (_, hi) in admin.topic_offsets([output]).items()}
        gap = check_downtime_against_output(downtime, read_since(bootstrap, output, out_before, ends),
                                            report_folder(DAG, run))
        assert gap.seconds > 1, gap  # the stop, the Empty wait and the restart: seconds, not the feeder's 50 ms
        # the lint read the real brokers' assignors: cooperative-sticky -> uniform, their default
        assert not [f for f in report["results"]["lint"]["findings"] if f["severity"] == "error"]

        run, answers, report = run_dag(DAG, conf(tmp_path, group, output, args), decide=approve)
        assert state(run) == "success" and report["outcome"] == "nothing_to_do" and answers == []
    finally:
        controller.remove()
        admin.close()


def test_a_new_application_that_does_not_come_in_is_rolled_back_to_classic(airflow_db, kafka_conn, bootstrap, unique,
                                                                           tmp_path, controllers):
    """The consumer-protocol instances are started with a property the client rejects at start (one no lint
    knows: a setting the protocol rejects, failure mode 1 of the guides, is caught by the lint of the deployed
    config before the approval): they exit at once. Past the start deadline the DAG stops them, waits for
    Empty, restarts the application on classic and shows the offsets equal to the snapshot. Before it, a dry run of
    the same application (it needs one as any run does, and changes nothing)."""
    admin = KafkaAdmin(ClientSettings(bootstrap))
    topic, output, group, args, controller = running_classic(
        bootstrap, unique, tmp_path, admin, controllers,
        properties={"consumer": {"no.such.property": "10000"}, "classic": CLASSIC_SESSION})
    try:
        # first a dry run on a connection without metrics_url (the session broker's): the DAG runs, the samples say
        # why they are empty, nothing is asked, nothing changes (its run's own report and snapshot folders)
        run, answers, report = run_dag(DAG, conf(tmp_path, group, output, args, dry_run=True), decide=approve)
        assert state(run) == "success" and report["outcome"] == "dry_run" and answers == []
        assert [(s["label"], s["note"]) for s in report["metrics"]["samples"]] == [
            ("before", "no metrics_url on the connection")]  # the change's own points were not reached
        folder = report_folder(DAG, run)
        assert (folder / "report.md").is_file() and not (folder / "metrics.svg").exists()

        run, answers, report = run_dag(DAG, conf(tmp_path, group, output, args, start_timeout_minutes=0.5,
                                                 validate_with_spark=False), decide=approve)
        assert state(run) == "failed", "a rolled-back migration marks the run failed"
        assert report["outcome"] == "rolled_back", report
        assert "wait_migrated" in report["failed_tasks"]
        rollback = report["results"]["rollback"]
        assert rollback["restarted"]["group_protocol"] == "classic"
        assert rollback["back"]["summary"].startswith(f"type classic, {INSTANCES} of {INSTANCES} live member(s)")
        assert rollback["offsets_vs_snapshot"]["counts"].get("lost", 0) == 0, rollback
        # back on classic, served by its coordinator with every member, its records judged (apache/kafka#23514)
        loads = rollback["group_load"]
        assert loads["checked"] and loads["type"] == "classic" and len(loads["members"]) == INSTANCES, loads
        assert loads["load"]["status"] in ("loads", "exposed"), loads
        # the application runs again, on classic, and is never left down by the DAG
        assert admin.group_listing(group).type is GroupType.CLASSIC
        assert live_protocols(admin, group) == [MemberProtocol.CLASSIC] * INSTANCES
        assert len(controller.running_pids()) == INSTANCES
    finally:
        controller.stop()
        admin.close()


def test_with_a_producer_running_throughout_the_report_shows_the_brokers_group_metrics_over_the_change(
        airflow_db, fresh_kafka, monkeypatch, unique, tmp_path, controllers):
    """Live traffic is the normal case (issue 32): a producer writes ~50 records/s from before the trigger until the
    run has ended, through the stop (a backlog builds while the application is down) and the restart. The lag wait
    ends by its rule once the backlog is consumed (the lag back at its level in the snapshot before the stop, or not
    growing while the group commits), never waiting for a lag of 0 the producer never allows; the validation's lag
    check compares the lag after with the lag before. No output topic is checked (input still flows when the DAG
    reads the output range: see the rolling upgrade's test with a producer running throughout).

    The brokers serve their metrics (the JMX exporter) and the connection names them: the DAG samples the group
    metrics before, during and after the change and the report tables and charts them. (Two tests of the same
    migration before, one with the producer and one with the metrics: one run carries both.)"""
    broker = fresh_kafka(metrics=True)
    bootstrap = broker.bootstrap_servers
    set_kafka_connection(monkeypatch, "kafka_admin_default", bootstrap, metrics_url=broker.metrics_url)
    admin = KafkaAdmin(ClientSettings(bootstrap))
    # the metrics and the traffic are the point here, not the assignor's userData (a fresh broker's group may not
    # have it yet)
    topic, _, group, args, controller = running_classic(bootstrap, unique, tmp_path, admin, controllers,
                                                        with_user_data=False)
    feeder = Feeder(bootstrap, topic, lambda: False, first=200, every_s=0.02, limit=1_000_000)
    feeder.start()
    try:
        run, _, report = run_dag(DAG, conf(tmp_path, group, None, args), decide=approve)
        assert feeder.is_alive() and feeder.error is None, "the producer ran throughout"
        assert state(run) == "success" and report["outcome"] == "migrated", report
        assert admin.group_listing(group).type is GroupType.CONSUMER
        lag = report["results"]["lag"]
        assert lag["detail"]["rule"] in ("baseline", "not_growing") and "caught up by the" in lag["summary"], lag
        verdicts = {v["check"]: v for v in report["results"]["validation"]["verdicts"]}
        assert verdicts["lag"]["passed"] and "the lag before the change" in verdicts["lag"]["summary"], verdicts
        print(f"figures: consumer offline migration lag wait ended "
              f"{lag['met_at'] - report['results']['migration']['met_at']:.1f} s after the group was migrated, by the "
              f"{lag['detail']['rule']} rule; {lag['summary']}")
        metrics = report["metrics"]
        assert [s["label"] for s in metrics["samples"]] == ["before", "during", "after"]
        for sample in metrics["samples"]:
            assert sample["taken_at"] and set(sample["groups_by_protocol"]) >= {"classic", "consumer"}, sample
        # the restarted instances joined a consumer-protocol group: the brokers counted its rebalances
        assert metrics["rebalances_during_change"]["consumer"] >= 1, metrics
        folder = report_folder(DAG, run)
        chart = (folder / "metrics.svg").read_text()
        assert chart.startswith("<svg") and "consumer groups" in chart
        assert "![group metrics over the change](metrics.svg)" in (folder / "report.md").read_text()
    finally:
        feeder.stop()
        controller.stop()
        admin.close()
