"""Real-broker tests for the docs/checklist.md rows that no other test exercised on a broker.

Each test names the checklist rows it backs. A lint finding is shown next to what the real client or
broker does with the same setting (the client refuses it, the broker fences, full-matches, refuses the
assignor ...); a preflight check is judged on facts read from a running cluster, and where it refuses,
the broker is shown refusing the same thing.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException
from confluent_kafka import Consumer, KafkaException

from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.errors import GroupNotEmpty, GroupNotFound
from airflow_provider_kip848.kafka.model import GroupState, GroupType, MemberProtocol
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.rules.lint import server_assignor_names
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.group_config import KafkaGroupConfigOperator
from airflow_provider_kip848.operators.lint import KafkaClientConfigLintOperator
from airflow_provider_kip848.operators.preflight import KafkaMigrationPreflightOperator
from kip848_harness import dagrun
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import ConsumerProcess, consume, create_topics, produce
from kip848_harness.windows import open_window
from tests.conftest import REPO, set_kafka_connection, wait_until

#: settings a librdkafka client refuses with group.protocol=consumer (the lint's errors), as an application has them
REFUSED_UNDER_CONSUMER = {"session.timeout.ms": "30000", "heartbeat.interval.ms": "3000",
                          "partition.assignment.strategy": "range", "group.protocol.type": "consumer"}
#: client settings the streams protocol ignores (the lint's warnings for target streams)
IGNORED_BY_STREAMS = {"session.timeout.ms": "10000", "acceptable.recovery.lag": "5000", "max.warmup.replicas": "3",
                      "probing.rebalance.interval.ms": "300000", "rack.aware.assignment.tags": "zone",
                      "rack.aware.assignment.strategy": "min_traffic", "rack.aware.assignment.traffic_cost": "10",
                      "rack.aware.assignment.non_overlap_cost": "1"}


def run_dag(dag_id: str, conf: dict, **kwargs):
    return dagrun.run_dag(dag_id, conf, dags_folder=REPO / "dags", **kwargs)


def lint(context, properties: dict, **kwargs) -> dict:
    """The lint operator's report, failing on nothing (the test judges the findings)."""
    kwargs = {"client": "librdkafka", "client_version": "2.12.1", **kwargs}
    return KafkaClientConfigLintOperator(task_id="lint", properties=properties, fail_on="never", **kwargs).execute(context)


def findings(report: dict) -> dict[str, dict]:
    """key -> its most severe finding."""
    order = {"info": 0, "warn": 1, "error": 2}
    out: dict[str, dict] = {}
    for f in report["findings"]:
        if f["key"] not in out or order[f["severity"]] > order[out[f["key"]]["severity"]]:
            out[f["key"]] = f
    return out


def preflight(conn: str, mode: str, group: str | None = None, **kwargs) -> KafkaMigrationPreflightOperator:
    return KafkaMigrationPreflightOperator(task_id=f"pre-{mode}", kafka_conn_id=conn, mode=mode, group_id=group, **kwargs)


def checks(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


def stable_members(admin: KafkaAdmin, group: str, count: int) -> bool:
    try:
        desc = admin.describe_group(group)
    except GroupNotFound:
        return False
    return desc.state == "Stable" and len(desc.members) == count


def member(bootstrap: str, group: str, topics: list[str], protocol: str, client_id: str, tmp_path: Path,
           **kwargs) -> ConsumerProcess:
    return ConsumerProcess.start(bootstrap, group, topics, protocol=protocol, client_id=client_id,
                                 log_file=str(tmp_path / f"{client_id}-{time.time_ns()}.log"), **kwargs)


def log_of(process: ConsumerProcess) -> str:
    return Path(process.log_file).read_text(errors="replace")


# -- preflight: the facts come from the cluster -------------------------------------------------------------


def test_preflight_judges_a_live_classic_group_on_facts_read_from_the_cluster(kafka_conn, native, bootstrap, unique,
                                                                             tmp_path, context):
    """G000-02, G001-01, G001-11, G002-01..03, G004-01, G004-26: release, protocols, feature, group type,
    policy and size are read from the broker; a release the brokers do not run is refused; the offline path
    refuses live members and, once they are gone, the empty group converts on its first consumer-protocol
    join; a consumer group is refused as a streams migration's source."""
    topic, group = unique("pre"), unique("pre-app")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, (f"v{i}" for i in range(10)))
    members = [member(bootstrap, group, [topic], "classic", f"pre-{i}", tmp_path) for i in range(2)]
    try:
        wait_until(lambda: stable_members(native, group, 2), timeout=90, what="two classic members Stable")
        (broker,) = native.broker_versions()
        coordinator = native.group_coordinator_config()
        report = preflight(kafka_conn, "classic_to_consumer", group, rollback="fail").execute(context)
        assert report["passed"], report
        found = checks(report)
        assert found["broker_version"]["status"] == "pass"
        # the release comes from the metadata.version the broker advertises: a KRaft-only fact
        assert found["broker_version"]["evidence"].startswith(
            f"broker {broker.node_id}: {broker.release} (metadata.version up to "), found["broker_version"]
        assert (found["protocol_enabled"]["status"], found["protocol_enabled"]["evidence"]) == (
            "pass", f"group.coordinator.rebalance.protocols={','.join(coordinator.rebalance_protocols)} "
                    f"(broker {coordinator.broker_id})")
        assert "consumer" in coordinator.rebalance_protocols
        assert (found["feature_finalized"]["status"], found["feature_finalized"]["evidence"]) == (
            "pass", "group.version finalized at 1")
        assert found["group_type"]["evidence"] == "classic group (Stable)"
        assert found["migration_policy"]["evidence"] == "group.consumer.migration.policy=bidirectional"
        assert found["rollback_policy"]["status"] == "pass"
        assert found["group_size"]["evidence"] == (
            f"2 member(s), group.consumer.max.size={coordinator.int_value('group.consumer.max.size')}")
        assert found["static_membership"]["evidence"] == "no static members"

        # a declared release the brokers do not run is refused, naming what they report
        with pytest.raises(AirflowFailException, match=rf"broker_version: declared 4\.0\.0, but the brokers report "
                                                       rf"{re.escape(broker.release)} "):
            preflight(kafka_conn, "classic_to_consumer", group, declared_broker_version="4.0.0").execute(context)

        # offline: live members are refused ...
        with pytest.raises(AirflowFailException, match=r"group_empty: 2 active member\(s\), state Stable"):
            preflight(kafka_conn, "classic_to_consumer_offline", group).execute(context)
        assert context["ti"].xcom["report"]["failures"] == ["group_empty"]
    finally:
        for m in members:
            m.stop()
    # ... and once every instance has stopped the group is Empty and the offline migration may go on
    wait_until(lambda: native.describe_group(group).is_empty, timeout=60, what="the classic group Empty")
    offline = preflight(kafka_conn, "classic_to_consumer_offline", group).execute(context)
    found = checks(offline)
    assert offline["passed"] and found["group_empty"]["evidence"] == "no members (Empty)", offline
    assert found["group_type"]["evidence"] == "classic group (Empty)"
    # what that path relies on, on the broker: an empty classic group converts on the first consumer-protocol join
    produce(bootstrap, topic, ["after"])
    assert len(consume(bootstrap, group, [topic], 1, group_protocol="consumer")) == 1
    assert native.group_listing(group).type is GroupType.CONSUMER
    # a KIP-848 consumer group is not taken over by a streams application
    with pytest.raises(AirflowFailException, match=r"group_type: a consumer \(KIP-848\) group"):
        preflight(kafka_conn, "classic_to_streams", group).execute(context)


def test_preflight_reads_the_brokers_size_limits_protocols_and_migration_policy(fresh_kafka, monkeypatch, unique,
                                                                                tmp_path, context):
    """G001-12, G004-08 (group_size), G001-01, G002-03, G004-05 (protocol_enabled), G000-18, G001-13
    (migration_policy): brokers with group.consumer.max.size=1, group.streams.max.size=1, no streams protocol
    and migration policy ``upgrade``. The broker refuses the online upgrade the preflight refuses."""
    broker = fresh_kafka(overrides={"group.consumer.max.size": "1", "group.streams.max.size": "1",
                                    "group.coordinator.rebalance.protocols": "classic,consumer",
                                    "group.consumer.migration.policy": "upgrade"})
    bootstrap = broker.bootstrap_servers
    conn = set_kafka_connection(monkeypatch, "kafka_restricted", bootstrap)
    topic, classic, modern = unique("lim"), unique("lim-classic"), unique("lim-consumer")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, (f"v{i}" for i in range(10)))
    members = [member(bootstrap, classic, [topic], "classic", f"lim-{i}", tmp_path) for i in range(2)]
    members.append(member(bootstrap, modern, [topic], "consumer", "lim-new", tmp_path))
    try:
        with KafkaAdmin(ClientSettings(bootstrap)) as admin:
            wait_until(lambda: stable_members(admin, classic, 2) and stable_members(admin, modern, 1), timeout=90,
                       what="two classic members and one consumer-protocol member")

            # too many members for a consumer group on these brokers: refused, and by the broker too
            with pytest.raises(AirflowFailException, match=r"group_size: 2 member\(s\), group.consumer.max.size=1"):
                preflight(conn, "classic_to_consumer", classic).execute(context)
            report = context["ti"].xcom["report"]
            assert report["failures"] == ["group_size"], report
            assert checks(report)["migration_policy"]["evidence"] == "group.consumer.migration.policy=upgrade"
            produce(bootstrap, topic, ["one more"])
            with pytest.raises(KafkaException, match="group id does not exist"):
                consume(bootstrap, classic, [topic], 1, group_protocol="consumer", timeout=30)
            assert admin.group_listing(classic).type is GroupType.CLASSIC

            # streams: not served by these brokers, and the group is larger than group.streams.max.size
            with pytest.raises(AirflowFailException, match="protocol_enabled: group.coordinator.rebalance.protocols="
                                                           "classic,consumer "):
                preflight(conn, "classic_to_streams", classic, expect_empty=False).execute(context)
            report = context["ti"].xcom["report"]
            assert sorted(report["failures"]) == ["group_size", "protocol_enabled"], report
            assert checks(report)["group_size"]["evidence"] == "2 member(s), group.streams.max.size=1"
            with pytest.raises(AirflowFailException, match="protocol_enabled"):
                preflight(conn, "enable_feature", feature="streams.version", feature_level=1).execute(context)
            assert context["ti"].xcom["report"]["failures"] == ["protocol_enabled"]

            # policy upgrade: the online rollback of a live consumer group to classic is refused
            with pytest.raises(AirflowFailException, match="migration_policy: group.consumer.migration.policy=upgrade "
                                                           "forbids an online downgrade"):
                preflight(conn, "consumer_to_classic", modern).execute(context)
            assert context["ti"].xcom["report"]["failures"] == ["migration_policy"]
    finally:
        for m in members:
            m.stop()


# -- static membership ----------------------------------------------------------------------------------------


def test_static_membership_is_flagged_and_the_fencing_it_warns_of_is_real(kafka_conn, native, bootstrap, unique,
                                                                         tmp_path, context):
    """G000-12, G000-13, G002-13, G002-28, G003-04, G004-16: the lint and the preflight let static members
    through with a warning (streams: refused); on the broker, a second live instance with the same
    group.instance.id is fenced under the consumer protocol, and a graceful stop lets the replacement in."""
    topic, group, fenced = unique("static"), unique("static-app"), unique("static-fence")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, (f"v{i}" for i in range(10)))
    members = [member(bootstrap, group, [topic], "classic", "dyn", tmp_path),
               member(bootstrap, group, [topic], "classic", "static", tmp_path, instance_id="inst-0")]
    try:
        wait_until(lambda: stable_members(native, group, 2), timeout=90, what="two classic members Stable")
        online = preflight(kafka_conn, "classic_to_consumer", group).execute(context)
        check = checks(online)["static_membership"]
        assert online["passed"] and check["status"] == "warn", online
        assert check["evidence"] == "1 static member(s): inst-0"
        assert "UNRELEASED_INSTANCE_ID" in check["remedy"] and "graceful shutdown" in check["remedy"]
        release = max(tuple(int(x) for x in b.release.split(".")) for b in native.broker_versions())
        if release < (4, 4):  # streams groups reject static membership before 4.4
            with pytest.raises(AirflowFailException, match=r"static_membership: 1 static member\(s\): inst-0"):
                preflight(kafka_conn, "classic_to_streams", group, expect_empty=False).execute(context)
        else:
            report = preflight(kafka_conn, "classic_to_streams", group, expect_empty=False).execute(context)
            assert checks(report)["static_membership"]["status"] == "warn"
    finally:
        for m in members:
            m.stop()

    properties = {"group.protocol": "consumer", "enable.auto.commit": "false", "group.instance.id": "inst-0"}
    finding = findings(lint(context, properties, kafka_conn_id=kafka_conn, group_id=group))["group.instance.id"]
    assert finding["severity"] == "warn" and "UNRELEASED_INSTANCE_ID" in finding["message"], finding
    streams = findings(lint(context, {**properties, "group.protocol": "streams"}, target="streams", client="java",
                            client_version="4.3.1"))
    assert streams["group.instance.id"]["severity"] == "error"

    # what the warning is about, on the broker: the newcomer with a live instance id is fenced, fatally
    first = member(bootstrap, fenced, [topic], "consumer", "first", tmp_path, instance_id="inst-0")
    second: ConsumerProcess | None = None
    replacement: ConsumerProcess | None = None
    try:
        wait_until(lambda: stable_members(native, fenced, 1), timeout=90, what="the first static member")
        second = member(bootstrap, fenced, [topic], "consumer", "second", tmp_path, instance_id="inst-0")
        wait_until(lambda: not second.running, timeout=60, what="the second instance fenced")
        assert second.process.returncode != 0
        assert "The instance ID is still used by another member" in log_of(second), log_of(second)[-2000:]
        assert first.running
        assert [(m.client_id, m.instance_id) for m in native.describe_group(fenced).members] == [("first", "inst-0")]
        # a graceful shutdown releases the id: the replacement joins (no wait for the session to expire)
        first.stop()
        replacement = member(bootstrap, fenced, [topic], "consumer", "replacement", tmp_path, instance_id="inst-0")
        wait_until(lambda: [(m.client_id, m.instance_id) for m in native.describe_group(fenced).members]
                   == [("replacement", "inst-0")], timeout=60, what="the replacement in the group")
        assert replacement.running
    finally:
        for process in (first, second, replacement):
            if process is not None:
                process.stop()


# -- the consumer lint against the real client and broker -----------------------------------------------------


def test_consumer_lint_errors_are_the_settings_the_client_refuses(kafka_conn, native, bootstrap, unique, tmp_path,
                                                                  context):
    """G000-04..08, G000-11, G000-15, G001-02, G001-05, G001-09, G001-15, G001-16, G002-08..12, G003-01..03:
    what the lint calls an error the librdkafka client refuses under group.protocol=consumer; its fix (remove
    them, set the session and heartbeat as the group's configs on the broker) joins; client.rack is only warned
    about and the broker takes it; auto-commit gets its shutdown-budget note."""
    topic, group = unique("lint"), unique("lint-app")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, (f"v{i}" for i in range(10)))
    application = {"group.protocol": "consumer", **REFUSED_UNDER_CONSUMER, "client.rack": "rack-a",
                   "enable.auto.commit": "true"}
    found = findings(lint(context, application, kafka_conn_id=kafka_conn, group_id=group))
    assert {key: found[key]["severity"] for key in REFUSED_UNDER_CONSUMER} == dict.fromkeys(REFUSED_UNDER_CONSUMER,
                                                                                           "error"), found
    assert "consumer.session.timeout.ms=30000" in found["session.timeout.ms"]["fix"]
    assert "consumer.heartbeat.interval.ms=3000" in found["heartbeat.interval.ms"]["fix"]
    assert "group.remote.assignor=range" in found["partition.assignment.strategy"]["fix"]
    assert found["client.rack"]["severity"] == "warn" and "KAFKA-19387" in found["client.rack"]["message"]
    auto = found["enable.auto.commit"]
    assert auto["severity"] == "info" and "session timeout" in auto["message"]
    assert "terminationGracePeriodSeconds" in auto["fix"]
    # a custom client assignor has no place under the consumer protocol
    custom = findings(lint(context, {"group.protocol": "consumer", "partition.assignment.strategy": "com.acme.Mine"},
                           kafka_conn_id=kafka_conn))["partition.assignment.strategy"]
    assert custom["severity"] == "error" and "custom client assignor" in custom["message"]

    # the real client refuses each of those settings with group.protocol=consumer, naming it
    for key, value in REFUSED_UNDER_CONSUMER.items():
        with pytest.raises(KafkaException, match=rf"`{re.escape(key)}` is not supported"):
            Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer", key: value})

    # the lint's fix: the settings go; the session and heartbeat become the group's configs on the broker
    carried = KafkaGroupConfigOperator(task_id="carry", kafka_conn_id=kafka_conn, group_id=group,
                                       set_configs={"consumer.session.timeout.ms": 30000,
                                                    "consumer.heartbeat.interval.ms": 3000},
                                       allow_absent_group=True).execute(context)
    assert carried["applied"]
    fixed = {k: v for k, v in application.items() if k not in REFUSED_UNDER_CONSUMER}
    assert not [f for f in lint(context, fixed, kafka_conn_id=kafka_conn)["findings"] if f["severity"] == "error"]
    app = member(bootstrap, group, [topic], "consumer", "fixed", tmp_path, properties={"client.rack": "rack-a"})
    try:
        desc = wait_until(lambda: (d := native.describe_consumer_group(group)).state == "Stable"
                          and [(m.client_id, m.protocol) for m in d.members] == [("fixed", MemberProtocol.CONSUMER)]
                          and len(d.members[0].assignment) == 2 and d, timeout=90,
                          what="the fixed application in a consumer group, owning both partitions")
        assert desc.type is GroupType.CONSUMER
        assert native.describe_group_config(group).dynamic == {"consumer.session.timeout.ms": "30000",
                                                               "consumer.heartbeat.interval.ms": "3000"}
    finally:
        app.stop()


def test_an_unset_group_protocol_means_classic_and_the_lint_asks_for_it(kafka_conn, native, bootstrap, unique,
                                                                       context):
    """G000-03, G001-06, G001-14, G002-07: a client that does not set group.protocol joins a classic group; the
    lint says to set it (for Java: the default moves in 5.0); with it set, the group becomes a consumer group."""
    topic, group = unique("unset"), unique("unset-app")
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, ["a", "b"])
    report = findings(lint(context, {"enable.auto.commit": "false"}, kafka_conn_id=kafka_conn))
    assert report["group.protocol"]["severity"] == "error", report
    assert report["group.protocol"]["fix"] == "Set group.protocol=consumer."
    java = findings(lint(context, {"enable.auto.commit": "false"}, client="java", client_version="4.1.0",
                         kafka_conn_id=kafka_conn))
    assert java["group.protocol"]["severity"] == "error"  # not consumer now ...
    assert any(f["key"] == "group.protocol" and f["severity"] == "warn" and "from 5.0 on" in f["message"]
               for f in lint(context, {"enable.auto.commit": "false"}, client="java",
                             client_version="4.1.0")["findings"])  # ... and the default moves in 5.0
    rollback = findings(lint(context, {}, target="classic", client="java", client_version="5.0.0"))
    assert rollback["group.protocol"]["severity"] == "error"
    assert "(this is 5.0.0)" in rollback["group.protocol"]["message"]

    # on the broker: no group.protocol is the classic protocol
    client = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                       "enable.auto.commit": False})
    try:
        client.subscribe([topic])
        wait_until(lambda: (msg := client.poll(0.5)) is not None and msg.error() is None, timeout=60,
                   what="a record read without group.protocol")
        client.commit(asynchronous=False)
        assert native.group_listing(group).type is GroupType.CLASSIC
    finally:
        client.close()
    # with the lint's fix, the same (now empty) group converts to a consumer group
    assert len(consume(bootstrap, group, [topic], 1, group_protocol="consumer")) == 1
    assert native.group_listing(group).type is GroupType.CONSUMER


def test_a_remote_assignor_the_brokers_do_not_offer_is_an_error_and_the_broker_refuses_it(kafka_conn, native,
                                                                                          bootstrap, unique, tmp_path,
                                                                                          context):
    """G000-04, G001-03, G002-08: the lint reads the brokers' group.consumer.assignors; a name they do not offer
    is an error, and the broker rejects such a member fatally; one they offer is used."""
    topic, refused, ranged = unique("asg"), unique("asg-refused"), unique("asg-range")
    create_topics(bootstrap, {topic: 2})
    offered = server_assignor_names(native.group_coordinator_config().values.get("group.consumer.assignors"))
    assert "range" in offered and "sticky" not in offered, offered
    report = findings(lint(context, {"group.protocol": "consumer", "group.remote.assignor": "sticky"},
                           kafka_conn_id=kafka_conn))
    finding = report["group.remote.assignor"]
    assert finding["severity"] == "error", finding
    assert f"the brokers' group.consumer.assignors ({', '.join(offered)})" in finding["message"], finding
    assert "group.remote.assignor" not in findings(lint(context, {"group.protocol": "consumer",
                                                                  "group.remote.assignor": "range"},
                                                        kafka_conn_id=kafka_conn))
    bad = member(bootstrap, refused, [topic], "consumer", "bad-assignor", tmp_path, assignor="sticky")
    good = member(bootstrap, ranged, [topic], "consumer", "range-assignor", tmp_path, assignor="range")
    try:
        wait_until(lambda: not bad.running, timeout=60, what="the member with an unknown assignor refused")
        assert "The assignor or its version range is not supported" in log_of(bad), log_of(bad)[-2000:]
        desc = wait_until(lambda: (d := native.describe_consumer_group(ranged)).state == "Stable"
                          and len(d.members) == 1 and d, timeout=90, what="the range member Stable")
        assert desc.assignor == "range" and good.running
    finally:
        bad.stop()
        good.stop()


def test_a_regex_subscription_is_full_matched_by_the_broker(kafka_conn, native, bootstrap, unique, tmp_path, context):
    """G001-07: the lint warns that the broker evaluates a regex subscription with RE2/J full-match semantics.
    On the broker: a prefix pattern that librdkafka's classic consumer matches client-side matches nothing
    under the consumer protocol; the full-match pattern the lint asks for gets the partitions."""
    base = unique("rx")
    topic = f"{base}-orders"
    create_topics(bootstrap, {topic: 2})
    found = [f for f in lint(context, {"group.protocol": "consumer"}, subscription_pattern=f"^{base}",
                             kafka_conn_id=kafka_conn)["findings"] if f["key"] == "subscription"]
    assert [f["severity"] for f in found] == ["warn", "info"], found
    assert "full-match semantics" in found[0]["message"] and "full match of the topic name" in found[0]["fix"]
    wildcard = [f for f in lint(context, {"group.protocol": "consumer"}, subscription_pattern=f"^{base}*",
                                kafka_conn_id=kafka_conn)["findings"] if f["severity"] == "error"]
    assert [f["key"] for f in wildcard] == ["subscription"], wildcard

    group, classic_group = unique("rx-app"), unique("rx-classic")
    classic = member(bootstrap, classic_group, [f"^{base}"], "classic", "classic-prefix", tmp_path)
    prefix = member(bootstrap, group, [f"^{base}"], "consumer", "prefix", tmp_path)
    full: ConsumerProcess | None = None
    try:
        # the prefix member first: the broker resolves its regex no later than the full-match one's
        wait_until(lambda: [m.client_id for m in native.describe_consumer_group(group).members] == ["prefix"],
                   timeout=60, what="the prefix member joined")
        full = member(bootstrap, group, [f"^{base}-.*"], "consumer", "full", tmp_path)
        both = {(topic, 0), (topic, 1)}

        def owned(desc) -> dict:
            return {m.client_id: {(tp.topic, tp.partition) for tp in m.assignment} for m in desc.members}

        desc = wait_until(lambda: (d := native.describe_consumer_group(group)).state == "Stable"
                          and owned(d).get("full") == both
                          and all(m.assignment == m.target_assignment for m in d.members) and d,
                          timeout=120, what="the full-match member owning both partitions")
        assert owned(desc)["prefix"] == set(), "the broker full-matches: the prefix pattern matched no topic"
        wait_until(lambda: owned(native.describe_consumer_group(classic_group)).get("classic-prefix") == both,
                   timeout=60, what="librdkafka's classic consumer matching the prefix client-side")
    finally:
        for m in (classic, prefix, full):
            if m is not None:
                m.stop()


# -- streams ---------------------------------------------------------------------------------------------------


def test_a_streams_group_goes_back_to_classic_only_empty_and_is_deleted_by_the_hook(kafka, kafka_conn, native,
                                                                                     bootstrap, unique, context):
    """G004-24 (streams_to_classic preflight), G004-30 (delete_group): a live streams group is refused by the
    rollback preflight and by the delete; once the application has stopped, both go through."""
    app_id = unique("wc-back")
    create_topics(bootstrap, {WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    app = kafka.start_wordcount(app_id, group_protocol="streams")
    try:
        wait_until(lambda: (d := native.describe_group(app_id)).type is GroupType.STREAMS and d.state == "Stable",
                   timeout=120, what="the streams application Stable")
        with pytest.raises(AirflowFailException, match=r"group_empty: 1 active member\(s\), state Stable"):
            preflight(kafka_conn, "streams_to_classic", app_id).execute(context)
        report = context["ti"].xcom["report"]
        assert report["failures"] == ["group_empty"] and checks(report)["group_type"]["evidence"] == \
            "streams group (Stable)", report
        again = preflight(kafka_conn, "classic_to_streams", app_id, expect_empty=False).execute(context)
        assert checks(again)["group_type"]["evidence"] == "already a streams group: nothing to migrate"
        with KafkaGroupAdminHook(kafka_conn) as hook, pytest.raises(GroupNotEmpty):
            hook.delete_group(app_id)
    finally:
        app.stop()
    wait_until(lambda: native.describe_group(app_id).is_empty, timeout=90, what="the streams group Empty")
    back = preflight(kafka_conn, "streams_to_classic", app_id).execute(context)
    assert back["passed"] and checks(back)["group_empty"]["evidence"] == "no members (Empty)", back
    with KafkaGroupAdminHook(kafka_conn) as hook:
        hook.delete_group(app_id)
        with pytest.raises(GroupNotFound):
            hook.group_listing(app_id)


def test_a_streams_group_whose_source_topic_is_missing_is_described_not_ready(fresh_kafka, monkeypatch, unique):
    """G004-28, G004-27: the streams-specific describe reports NOT_READY, with no task assigned, while a source
    topic is missing (Kafka Streams then gives up and shuts its client down); once the topic exists the
    application, started again, forms the same group Stable with its tasks."""
    broker = fresh_kafka()  # a cluster of its own: the WordCount input topic must not exist yet
    conn = set_kafka_connection(monkeypatch, "kafka_not_ready", broker.bootstrap_servers)
    app_id = unique("wc-not-ready")
    create_topics(broker.bootstrap_servers, {WORDCOUNT_OUTPUT_TOPIC: 1})
    with KafkaGroupAdminHook(conn) as hook:
        # The client shuts itself down about a second after the broker reports the missing topic, and the group
        # is NOT_READY only while it has members: on a busy machine one start may not be seen in time, so the
        # application is started again (a few times at most) until a describe catches the group with its member.
        desc = None
        for _attempt in range(5):
            app = broker.start_wordcount(app_id, group_protocol="streams")
            try:
                desc = wait_until(lambda a=app: (d := hook.describe_streams_group(app_id)).state is GroupState.NOT_READY
                                  and d.members and d or (not a.running() and "stopped"), timeout=120,
                                  interval=0.05, what="the streams group NOT_READY (or the client shut down)")
                assert app.wait_for_log("Source topics streams-plaintext-input are missing", timeout=60)
            finally:
                app.stop()
            if desc != "stopped":
                break
        assert desc not in (None, "stopped"), "no describe caught the NOT_READY group in 5 starts"
        assert all(not m.assignment.active for m in desc.members), desc
        assert hook.group_listing(app_id).type is GroupType.STREAMS
        create_topics(broker.bootstrap_servers, {WORDCOUNT_INPUT_TOPIC: 2})
        app = broker.start_wordcount(app_id, group_protocol="streams")
        try:
            ready = wait_until(lambda: (d := hook.describe_streams_group(app_id)).state is GroupState.STABLE
                               and d.members and any(m.assignment.active for m in d.members) and d, timeout=120,
                               what="the streams group Stable with its tasks")
            assert {t.partition for m in ready.members for t in m.assignment.active} == {0, 1}
        finally:
            app.stop()


def test_streams_group_configs_are_held_to_the_brokers_bounds_and_set_by_the_dag(airflow_db, kafka_conn, native,
                                                                                unique, tmp_path, context):
    """G004-06, G004-07 (streams session and heartbeat bounds, read from the brokers), G004-10 (the initial
    rebalance delay, through the kafka_group_config_change DAG)."""
    group = unique("wc-cfg")
    minimum = native.group_coordinator_config().int_value("group.streams.min.session.timeout.ms")
    assert minimum is not None

    def configure(**set_configs):
        return KafkaGroupConfigOperator(task_id="cfg", kafka_conn_id=kafka_conn, group_id=group,
                                        set_configs=set_configs, allow_absent_group=True).execute(context)

    with pytest.raises(AirflowFailException, match=rf"is below the minimum \(broker group.streams.min.session.timeout"
                                                   rf".ms={minimum}\)"):
        configure(**{"streams.session.timeout.ms": minimum - 1})
    with pytest.raises(AirflowFailException, match="streams.session.timeout.ms=6000 must be greater than "
                                                   "streams.heartbeat.interval.ms=6000"):
        configure(**{"streams.session.timeout.ms": 6000, "streams.heartbeat.interval.ms": 6000})
    with pytest.raises(AirflowFailException, match="streams.initial.rebalance.delay.ms=-1 is below the minimum"):
        configure(**{"streams.initial.rebalance.delay.ms": -1})
    assert native.describe_group_config(group).dynamic == {}

    run, answers, report = run_dag("kafka_group_config_change", {
        "group_id": group, "key": "streams.initial.rebalance.delay.ms", "value": "1500", "action": "set",
        "allow_absent_group": True}, decide=lambda detail: "Approve")
    assert dagrun.run_state(run) == "success" and report["outcome"] == "changed", report
    assert [a["option"] for a in answers] == ["Approve"]
    assert native.describe_group_config(group).dynamic == {"streams.initial.rebalance.delay.ms": "1500"}


def test_the_streams_dags_lint_shows_ignored_settings_in_the_approval_and_stops_on_unsupported_ones(
        airflow_db, kafka_conn, native, bootstrap, unique, tmp_path, context, controllers):
    """G004-12..15: the streams DAG's lint step, on an application's real config: the settings the streams
    protocol ignores are warnings shown in the approval; task.assignor.class stops the run before any change.
    G004-01, G004-04, G004-18, G004-21: the streams lint's other verdicts, through the same operator (the DAG
    fixes client=java and takes no subscription pattern)."""
    app_id, topic = unique("wc-lint"), unique("wc-lint-in")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, (f"v{i}" for i in range(10)))
    application = member(bootstrap, app_id, [topic], "classic", "wc-lint-app", tmp_path)
    # a controller that reports no config (no config command): only the form's properties are linted, and the
    # lint says the deployed config was not checked; the runs never reach a stop or a start
    controller = controllers.add(app_id, "command", {"commands": {"stop": "true", "start": "true"}})
    base = {"application_id": app_id, "app_controller": controller, "client_version": "4.3.1", "poll_seconds": 0.5,
            "reader": "python", **open_window()}
    try:
        wait_until(lambda: stable_members(native, app_id, 1) and native.group_offsets(app_id).total_lag == 0
                   and not native.group_offsets(app_id).uncommitted_with_records, timeout=90,
                   what="the classic application caught up")
        run, answers, report = run_dag("kip1071_streams_offline_migration",
                                       {**base, "application_properties": IGNORED_BY_STREAMS},
                                       decide=lambda detail: "Reject")
        assert dagrun.run_state(run) == "success" and report["outcome"] == "rejected", report
        severities = {f["key"]: f["severity"] for f in report["results"]["lint"]["findings"]}
        assert {key: severities.get(key) for key in IGNORED_BY_STREAMS} == dict.fromkeys(IGNORED_BY_STREAMS, "warn")
        [asked] = answers
        for key in IGNORED_BY_STREAMS:  # the approver sees each of them
            assert f"client config (warn): {key}: " in asked["body"], key
        assert "streams.session.timeout.ms" in asked["body"]  # the ignored client value, carried over as a config
        assert "(the deployed config was NOT checked)" in asked["body"] and severities["(deployed config)"] == "warn"

        run, answers, report = run_dag("kip1071_streams_offline_migration",
                                       {**base, "application_properties": {**IGNORED_BY_STREAMS,
                                                                           "task.assignor.class": "com.acme.Tasks"}},
                                       decide=lambda detail: "Approve")
        assert dagrun.run_state(run) == "failed" and answers == [], report
        assert "lint_client_config" in report["failed_tasks"], report
        # nothing changed: no group config, the application still runs in its classic group
        assert native.describe_group_config(app_id).dynamic == {}
        assert application.running
        assert native.group_listing(app_id).type is GroupType.CLASSIC and stable_members(native, app_id, 1)
    finally:
        application.stop()

    streams = findings(lint(context, {"group.protocol": "streams", "task.assignor.class": "com.acme.Tasks",
                                      "group.instance.id": "wc-1"}, target="streams", client="java",
                            client_version="4.1.0", subscription_pattern="orders-.*"))
    assert {k: streams[k]["severity"] for k in ("task.assignor.class", "group.instance.id", "subscription",
                                                "client.version")} == dict.fromkeys(
        ("task.assignor.class", "group.instance.id", "subscription", "client.version"), "error"), streams
    classic = findings(lint(context, {"group.protocol": "classic"}, target="streams", client="java",
                            client_version="4.3.1"))
    assert classic["group.protocol"]["fix"] == "Set group.protocol=streams."
    assert findings(lint(context, {"group.protocol": "streams"}, target="streams",
                         client="librdkafka"))["client"]["severity"] == "error"
