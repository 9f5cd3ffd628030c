"""kip1071_streams_offline_migration end to end with Kafka's WordCountDemo: classic -> streams, offline."""

from __future__ import annotations

import os
import re
import signal
import time

from airflow_provider_kip848.changecontrol.audit import APPLIED, changes, read_audit
from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.appcontrol import LocalWordCountController
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import (
    create_topics,
    decode_long,
    latest_by_key,
    produce,
    read_topic,
    set_topic_configs,
)
from kip848_harness.supervised import SupervisedWordCount
from kip848_harness.windows import closed_window, open_window
from tests.conftest import wait_until
from tests.e2e.helpers import (
    Feeder,
    application_down,
    approve,
    check_downtime_against_output,
    read_since,
    run_dag,
    shown,
    state,
)


def count_of(bootstrap, word, expected, timeout=90):
    def count(records):
        value = latest_by_key(records).get(word.encode())
        return decode_long(value) if value is not None else None

    return count(read_topic(bootstrap, WORDCOUNT_OUTPUT_TOPIC, timeout=timeout, until=lambda rs: count(rs) == expected))


def classic_wordcount(kafka, admin, app_id, word, controllers=None, *, supervisor=None, ssh_conn_id=None, **target):
    """WordCountDemo on classic, caught up; registered in the deployment's registry under ``app_id`` (the name the
    runs give as app_controller) with ``target`` added to its controller's target. With ``supervisor``: a program
    of that real supervisord driven by the ``command`` controller (over SSH with ``ssh_conn_id``), as an
    operator's hosts run it; else the demo's ``local-wordcount`` processes."""
    create_topics(kafka.bootstrap_servers, {WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    if supervisor is not None:
        controller = SupervisedWordCount(supervisor, app_id, kafka.workdir / "supervised" / app_id, kafka=kafka,
                                         application_id=app_id, properties=target.get("properties"))
        controller.install("classic")
        controllers.add(app_id, "command", controller.target(ssh_conn_id=ssh_conn_id),
                        description="WordCountDemo under supervisord" + (" (over SSH)" if ssh_conn_id else ""))
    else:
        controller = LocalWordCountController(str(kafka.workdir), app_id)
        if controllers is not None:
            controllers.add(app_id, "local-wordcount", {"kafka_workdir": str(kafka.workdir), "application_id": app_id,
                                                        **target})
    controller.start("classic")
    produce(kafka.bootstrap_servers, WORDCOUNT_INPUT_TOPIC, [f"{word} a", f"{word} b"])
    assert count_of(kafka.bootstrap_servers, word, 2) == 2
    wait_until(lambda: (d := admin.describe_group(app_id)).state == "Stable" and d.type is GroupType.CLASSIC
               and admin.group_offsets(app_id).total_lag == 0, timeout=90, what="classic app committed everything")
    return controller


def conf(kafka, app_id, tmp_path, **extra):
    return {"application_id": app_id, "app_controller": app_id,
            "remove_members_after": 2, "poll_seconds": 0.5, "empty_timeout_minutes": 3, "stable_timeout_minutes": 3,
            "standby_replicas": 1, "session_timeout_ms": 6000, "heartbeat_interval_ms": 500,
            "output_topic": WORDCOUNT_OUTPUT_TOPIC, "reader": "python",
            # the release the session's broker runs: a 4.2 broker cannot tell 4.2.0 from 4.2.1 over the protocol
            "declared_broker_version": kafka.version, **open_window(), **extra}


def test_offline_migration_end_to_end(airflow_db, kafka, kafka_conn, unique, tmp_path, controllers, supervisor, sshd,
                                      monkeypatch, run_files):
    """WordCountDemo runs under a real supervisord on an application host reached over SSH (a real sshd): the
    deployment's ``command`` controller stops, starts and inspects it through Airflow's SSH connection."""
    app_id, word = unique("wc-offline"), f"w{time.time_ns()}"
    monkeypatch.setenv("AIRFLOW_CONN_APP_HOSTS", sshd.connection_uri("app_hosts"))
    admin = KafkaAdmin(ClientSettings(kafka.bootstrap_servers))
    # the session settings in the application's own files: the lint reads them through the controller's config
    controller = classic_wordcount(kafka, admin, app_id, word, controllers, supervisor=supervisor,
                                   ssh_conn_id="app_hosts",
                                   properties={"session.timeout.ms": "6000", "heartbeat.interval.ms": "500"})
    bootstrap = kafka.bootstrap_servers
    # the output carries the broker's append time: its gaps are the application's processing gaps
    set_topic_configs(bootstrap, WORDCOUNT_OUTPUT_TOPIC, {"message.timestamp.type": "LogAppendTime"})
    watcher = KafkaAdmin(ClientSettings(bootstrap))  # the feeder's own (it runs in another thread)
    out_before: dict[int, int] = {}

    # one new word per line (each line gives exactly one output record, a count of 1), 20 lines/s from the
    # approval until the application is down: the lines written meanwhile are counted at the restart
    feeder = Feeder(bootstrap, WORDCOUNT_INPUT_TOPIC, lambda: application_down(watcher, app_id), value=lambda i: f"{word}f{i}")

    def approve_and_feed(detail) -> str:
        if not feeder.written and feeder.ident is None:
            out_before.update({tp.partition: hi for tp, (_, hi) in watcher.topic_offsets([WORDCOUNT_OUTPUT_TOPIC]).items()})
            feeder.start()
        return "Approve"

    try:
        # supervisorctl stop (SIGTERM): a classic Streams app closes without leaving its group, so its members stay
        # until the session times out; the platform confirms the instance gone (no settle window), but a member is
        # forced out only when paired with a stopped instance, never before its session ran out. The restart's streams.initial.rebalance.delay.ms is set for the restart and put back after.
        killed = conf(kafka, app_id, tmp_path, restart_rebalance_delay_ms=0)
        run, answers, report = run_dag("kip1071_streams_offline_migration", killed, decide=approve_and_feed)
        written = feeder.finish()
        assert state(run) == "success", report
        assert report["outcome"] == "migrated"
        assert len(answers) == 1 and "Downtime" in answers[0]["subject"]
        assert "| protocol | `" in answers[0]["body"] and "streams" in answers[0]["body"]
        assert "streams.initial.rebalance.delay.ms" in answers[0]["body"] and "put back" in answers[0]["body"]
        body = answers[0]["body"]
        text = shown(body)  # the notes as the approver reads them (inert text: their backticks are shown)
        assert f"runs_on=SSH connection 'app_hosts' ({sshd.user}@127.0.0.1:{sshd.port})" in text, body
        assert "controller start: `printf " in text and "instances now (the platform): 1 instance(s)" in body, body
        assert f"client config linted: controller '{app_id}': `cat " in text, body
        assert ("linted: group.protocol=streams (the start (group.protocol it sets)), session.timeout.ms=6000 "
                "(controller), heartbeat.interval.ms=500 (controller)") in body, body
        results = report["results"]
        # supervisorctl prints program names only and this entry has no member_identity: the members cannot be
        # paired with the instances, so none is forced out on the platform's word (it could be a consumer the
        # platform does not run); the member the stopped classic Streams app left behind expires through the broker
        # (its 6 s session), said from the wait's start
        assert results["stopped"]["platform"]["exit_code"] == 0
        emptied = results["emptied"]
        assert emptied["members_removed"] == [], "nothing forced out: the members cannot be paired with instances"
        assert any("members not forced out: its 1 instance(s) carry no group.instance.id, client.id or host "
                   "address" in n and "session times out" in n for n in emptied["notes"]), emptied["notes"]
        assert f"{sshd.user}@127.0.0.1:{sshd.port}" in results["stopped"]["platform"]["where"]
        assert results["stopped"]["instances_gone"] and emptied["condition"]["settle_s"] == 0, \
            "confirmed gone: no settle wait once the member expired"
        assert results["restored"]["restored"] == {}, "no committed offset was lost"
        comparison = results["offsets_vs_snapshot"]
        counts = comparison["counts"]
        assert comparison["preserved"] and comparison["partitions"], comparison
        assert not counts.get("regressed") and not counts.get("missing"), \
            "offsets after at or past the snapshot for every partition (the input went on during the move)"
        # one count per new line; a line processed but not committed when the instance was killed is counted
        # again by the new application (at least once): never fewer
        assert results["output_records_written_during_run"] >= written
        assert results["validation"]["passed"]
        assert report["after"] == {"type": "streams", "state": "Stable", "members": 1}
        assert report["approvals"]["approval"]["decision"] == "Approve"
        dynamic = admin.describe_group_config(app_id).dynamic
        assert dynamic == {
            "streams.heartbeat.interval.ms": "500", "streams.num.standby.replicas": "1",
            "streams.session.timeout.ms": "6000"}, "the restart's rebalance delay was put back (deleted)"
        restored = results["restart_rebalance_delay_restored"]["changed"]
        assert {k: list(v) for k, v in restored.items()} == {"streams.initial.rebalance.delay.ms": ["0", None]}

        # the processing gap, read back from the report and held against the output the test reads itself
        ends = {tp.partition: hi for tp, (_, hi) in admin.topic_offsets([WORDCOUNT_OUTPUT_TOPIC]).items()}
        ours = read_since(bootstrap, WORDCOUNT_OUTPUT_TOPIC, out_before, ends)
        assert len(ours) == results["output_records_written_during_run"] and all(r.log_append_time for r in ours)
        downtime = report["downtime"]
        assert downtime["types"] == ["classic", "streams"] and downtime["rebalances"] >= 1
        assert downtime["output_timestamps"] == {"LogAppendTime": len(ours)}
        gap = check_downtime_against_output(downtime, ours,
                                            run_files.folder("kip1071_streams_offline_migration", run.run_id))
        assert gap.seconds > 1, gap  # the kill, the Empty wait and the restart: seconds, not the feeder's 50 ms

        # the audit trail: a pair per change (the intent, then the outcome read back from the broker)
        records = changes(read_audit(str(run_files.audit)))
        assert {r["outcome"] for r in records} == {APPLIED}
        delay = f"{app_id}:streams.initial.rebalance.delay.ms"
        configs = {r["target"]: r for r in records if r["kind"] == "group_config" and r["target"] != delay}
        assert set(configs) == {f"{app_id}:{key}" for key in dynamic}
        for key, value in dynamic.items():
            record = configs[f"{app_id}:{key}"]
            assert (record["before"], record["after"]) == (None, value), "broker default before, read back after"
            assert record["task_id"] == "set_group_configs"
        delays = [(r["task_id"], r["before"], r["after"]) for r in records if r["target"] == delay]
        assert delays == [("set_group_configs", None, "0"), ("restore_rebalance_delay", "0", None)]
        assert not [r for r in records if r["kind"] == "members"], "no member forced out: no removal audited"
        assert not [r for r in records if r["kind"] == "offsets"], "no offsets restore was needed: none audited"
        assert len(records) == len(dynamic) + 2
        cluster_id = admin.describe_cluster().cluster_id
        for record in records:
            assert record["plan_hash"] == report["plan"]["hash"] and record["run_id"] == report["run_id"]
            assert record["cluster_id"] == cluster_id and record["triggered_by"] == report["triggered_by"]
            assert [a["decision"] for a in record["approvals"]] == ["Approve", "Approve"]
            assert record["approvals"][1]["reused"] == "approval"
        assert [a["record_id"] for a in report["change_control"]["audit"]] == [r["record_id"] for r in records]

        produce(kafka.bootstrap_servers, WORDCOUNT_INPUT_TOPIC, [f"{word} c"])
        assert count_of(kafka.bootstrap_servers, word, 3) == 3, "the streams app continued from the commits: 2 -> 3"

        run, answers, report = run_dag("kip1071_streams_offline_migration", conf(kafka, app_id, tmp_path),
                                       decide=approve)
        assert state(run) == "success" and report["outcome"] == "nothing_to_do" and answers == []
    finally:
        controller.remove()
        admin.close()


def test_a_wordcount_app_with_a_missing_repartition_topic_is_refused_before_the_stop(
        airflow_db, kafka, kafka_conn, unique, tmp_path, controllers):
    """WordCountDemo on classic, its repartition topic deleted. A running classic application recreates it at its
    next rebalance, within seconds, so the instance is frozen (SIGSTOP) first: it still exists on the platform and
    in the group, but cannot. The topology comes from the demo's controller (WordCountDemo's real
    Topology#describe()); the run is refused by check_topology before the approval: nothing stopped, nothing
    set, nothing started, the topic still missing."""
    app_id, word = unique("wc-topology"), f"t{time.time_ns()}"
    repartition = f"{app_id}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"
    admin = KafkaAdmin(ClientSettings(kafka.bootstrap_servers))
    controller = classic_wordcount(kafka, admin, app_id, word, controllers)
    [pid] = controller.running_pids()
    try:
        os.kill(pid, signal.SIGSTOP)
        admin.delete_topic(repartition)
        run, answers, report = run_dag("kip1071_streams_offline_migration",
                                       conf(kafka, app_id, tmp_path, validate_with_spark=False), decide=approve)
        assert state(run) == "failed" and report["failed_tasks"] == ["check_topology"], report
        assert answers == [], "refused before the approval"
        topology = report["results"]["topology"]
        assert topology["topology_source"] == f"controller {app_id!r}"
        assert topology["failures"] == ["topology_repartition_topics"], topology
        checks = {c["name"]: c for c in topology["checks"]}
        assert f"{repartition} (missing), needs 2" in checks["topology_repartition_topics"]["evidence"]
        assert checks["topology_source_topics"]["status"] == "pass"
        assert checks["topology_changelog_topics"]["status"] == "pass"
        assert report["results"]["stopped"] is None and report["results"]["started"] is None
        assert controller.running_pids() == [pid], "the application was not stopped (nor another started)"
        assert admin.describe_group(app_id).type is GroupType.CLASSIC
        assert admin.describe_group_config(app_id).dynamic == {}, "no group config was set"
        assert admin.topic_partition_counts([repartition]) == {repartition: None}
    finally:
        os.kill(pid, signal.SIGCONT)
        controller.stop()
        admin.close()


def test_an_application_with_standbys_keeps_them(airflow_db, kafka, kafka_conn, unique, tmp_path, controllers):
    """The application runs with num.standby.replicas=1 (a client setting the streams protocol ignores) and the
    run names no standby value: the DAG carries the application's value over as the group config, shows it in
    the approval, and the streams group ends with one standby replica per task. Before it, the same application's
    run outside the maintenance window and its dry run change nothing (they ran on an application of their own
    before: one carries all three runs now)."""
    app_id, word = unique("wc-standby"), f"s{time.time_ns()}"
    admin = KafkaAdmin(ClientSettings(kafka.bootstrap_servers))
    controller = classic_wordcount(kafka, admin, app_id, word, controllers)
    try:
        run, answers, report = run_dag("kip1071_streams_offline_migration",
                                       conf(kafka, app_id, tmp_path, **closed_window()), decide=approve)
        assert state(run) == "failed" and report["failed_tasks"] == ["window_guard"] and answers == []
        run, answers, report = run_dag("kip1071_streams_offline_migration",
                                       conf(kafka, app_id, tmp_path, dry_run=True),
                                       decide=approve)
        assert state(run) == "success" and report["outcome"] == "dry_run" and answers == []
        assert "Dry run" in report["plan"]["markdown"] and "stopped" in report["plan"]["markdown"]
        assert controller.running_pids(), "the application was not stopped"
        desc = admin.describe_group(app_id)
        assert desc.type is GroupType.CLASSIC and desc.state == "Stable"
        assert admin.describe_group_config(app_id).dynamic == {}

        run_conf = conf(kafka, app_id, tmp_path, standby_replicas=None, session_timeout_ms=None,
                        application_properties={"num.standby.replicas": "1", "heartbeat.interval.ms": "500",
                                                "commit.interval.ms": "200"},
                        client_version="4.3.1", source_topics=WORDCOUNT_INPUT_TOPIC, heartbeat_interval_ms=None)
        run, answers, report = run_dag("kip1071_streams_offline_migration", run_conf, decide=approve)
        assert state(run) == "success" and report["outcome"] == "migrated", report
        settings = {s["config"]: s for s in report["results"]["group_settings"]["settings"]}
        assert settings["streams.num.standby.replicas"]["source"] == "application config (num.standby.replicas)"
        assert settings["streams.heartbeat.interval.ms"]["value"] == "500"
        assert settings["streams.session.timeout.ms"]["source"].startswith("broker default (")
        # the approver saw it, as a change from the broker default to 1
        assert "streams.num.standby.replicas" in answers[0]["body"] and "application config" in answers[0]["body"]
        dynamic = admin.describe_group_config(app_id).dynamic
        assert dynamic == {"streams.num.standby.replicas": "1", "streams.heartbeat.interval.ms": "500"}
        # the lint saw the ignored client settings (warnings, not failures)
        lint = {f["key"]: f["severity"] for f in report["results"]["lint"]["findings"]}
        assert lint["num.standby.replicas"] == "warn" and "client.version" not in lint
        checks = {c["name"]: c["status"] for c in report["results"]["preflight"]["checks"]}
        assert checks["source_topics"] == "pass" and checks["topology"] == "pass"
        # WordCountDemo's real topology, from its controller, against the real topics: every check passes
        topology = {c["name"]: c["status"] for c in report["results"]["topology"]["checks"]}
        assert set(topology.values()) == {"pass"} and len(topology) == 4, topology
        assert "topology_repartition_topics" in answers[0]["body"], "the approval shows the topology checks"
    finally:
        controller.stop()
        admin.close()


def test_a_streams_application_that_does_not_come_up_is_restarted_on_classic(airflow_db, kafka, kafka_conn, unique,
                                                                               tmp_path, controllers):
    """Started on the streams protocol with a setting Kafka Streams refuses at start (an application.server that is
    not host:port; static membership, which streams groups reject before 4.4, is caught by the lint of the
    deployed config before the approval) the application exits without ever joining. Past the deadline the DAG
    restarts it on classic, waits for it and shows the offsets equal to the snapshot: not left down."""
    app_id, word = unique("wc-fallback"), f"f{time.time_ns()}"
    admin = KafkaAdmin(ClientSettings(kafka.bootstrap_servers))
    controller = classic_wordcount(kafka, admin, app_id, word, controllers,
                                   protocol_properties={"streams": {"application.server": "no-port-here"},
                                                        "classic": {"session.timeout.ms": "6000",
                                                                    "heartbeat.interval.ms": "500"}})
    try:
        run_conf = conf(kafka, app_id, tmp_path, stable_timeout_minutes=0.5, validate_with_spark=False)
        run, answers, report = run_dag("kip1071_streams_offline_migration", run_conf, decide=approve)
        assert state(run) == "failed", "a rolled-back migration marks the run failed"
        assert report["outcome"] == "rolled_back", report
        assert "wait_streams_group" in report["failed_tasks"]
        fallback = report["results"]["fallback"]
        assert fallback["stopped"]["diagnosis"]["reason"].startswith("no streams member joined"), fallback
        assert fallback["restarted"]["group_protocol"] == "classic"
        assert fallback["back"]["summary"].startswith("type classic, 1 of 1 live member(s)"), fallback
        comparison = fallback["offsets_vs_snapshot"]
        assert comparison["preserved"] and comparison["counts"]["equal"] == len(comparison["partitions"]) > 0
        assert admin.describe_group(app_id).type is GroupType.CLASSIC and controller.running_pids()
        # and it processes again, from its commits
        produce(kafka.bootstrap_servers, WORDCOUNT_INPUT_TOPIC, [f"{word} c"])
        assert count_of(kafka.bootstrap_servers, word, 3) == 3
    finally:
        controller.stop()
        admin.close()


def test_a_rogue_classic_instance_outside_the_platform_keeps_the_group_from_empty(
        airflow_db, kafka, kafka_conn, unique, tmp_path, controllers, supervisor, run_files, capfd):
    """WordCountDemo under a real supervisord, its ``command`` controller pairing the program with its member by
    client.id (``member_identity``), and a second WordCountDemo of the same application id started by hand outside
    the platform (a rogue: a debugging copy, another deployment). The run stops the platform's instance and the
    platform confirms it gone, but the rogue still heartbeats: its member is no instance of the platform, so it is
    never forced out on the platform's word, the Empty wait does not meet, and the run fails in wait_empty naming
    the rogue's member. Nothing is started on streams; the rogue is still a member of the classic group.
    (Before issue 46 the wait forced the rogue out on the stop's word and met Empty within a second.)"""
    app_id, word = unique("wc-rogue"), f"r{time.time_ns()}"
    admin = KafkaAdmin(ClientSettings(kafka.bootstrap_servers))
    session = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "500"}
    controller = classic_wordcount(kafka, admin, app_id, word, controllers, supervisor=supervisor,
                                   properties={**session, "client.id": f"{app_id}-platform"})
    # the platform's one program (the status names it "<app>") runs with client.id <app>-platform
    target = controller.target()
    target["member_identity"] = {"match": rf"^(?P<app>{re.escape(app_id)})$", "client_id": "{app}-platform"}
    controllers.add(app_id, "command", target, description="WordCountDemo under supervisord, paired by client.id")
    rogue = kafka.start_wordcount(app_id, group_protocol="classic", properties=session)
    try:
        def both_in() -> bool:
            desc = admin.describe_group(app_id)
            clients = [m.client_id for m in desc.members]
            return (desc.state == "Stable" and len(clients) == 2
                    and sum(c.startswith(f"{app_id}-platform-") for c in clients) == 1)

        wait_until(both_in, timeout=120, what="the platform's instance and the rogue both members, Stable")
        [stray] = [m for m in admin.describe_group(app_id).members
                   if not m.client_id.startswith(f"{app_id}-platform-")]
        capfd.readouterr()
        run, answers, report = run_dag("kip1071_streams_offline_migration",
                                       conf(kafka, app_id, tmp_path, empty_timeout_minutes=0.75,
                                            validate_with_spark=False), decide=approve)
        out, err = capfd.readouterr()
        logs = out + err
        (tmp_path / "run.log").write_text(logs)  # the whole run's log, for a failure's diagnosis
        assert state(run) == "failed" and "wait_empty" in report["failed_tasks"], report
        results = report["results"]
        assert results["stopped"]["instances_gone"] is True, "the platform confirmed its instance stopped"
        assert results["started"] is None, "nothing was started on streams"
        # the approval said how members pair with the instances
        assert "members are paired with the platform's instances by client.id" in answers[0]["body"], answers
        # the wait named the rogue's member as no instance of the platform, left it to the broker, and its timeout
        # names it (not a bare count)
        [failure] = [line for line in logs.splitlines() if "AirflowSensorTimeout: Group" in line][-1:]
        assert "not forced out, waiting for the broker to expire them" in failure, failure
        assert f"{stray.client_id} on " in failure and stray.member_id in failure, failure
        assert "no instance of the platform carries its client.id" in failure, failure
        assert f"Still listed: {stray.client_id}" in failure and "is no instance of the platform" in failure, failure
        removals = [r for r in changes(read_audit(str(run_files.audit))) if r["kind"] == "members"]
        assert removals == [], "nobody forced out: no removal in the audit trail"
        still = {m.member_id: m.client_id for m in admin.describe_group(app_id).members}
        assert still == {stray.member_id: stray.client_id}, "the rogue was never forced out: still its member"
        assert admin.describe_group(app_id).type is GroupType.CLASSIC
        assert controller.pids() == {}, "the platform's instance stays stopped"
    finally:
        rogue.stop()
        controller.remove()
        admin.close()
