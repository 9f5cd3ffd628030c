"""Every operator against the real broker, run twice: the second run changes nothing and succeeds."""

from __future__ import annotations

import json
import threading

import pytest
from airflow.sdk.exceptions import AirflowFailException
from confluent_kafka import KafkaException

from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.features import KafkaFeatureOperator
from airflow_provider_kip848.operators.group_config import KafkaGroupConfigOperator
from airflow_provider_kip848.operators.lint import KafkaClientConfigLintOperator
from airflow_provider_kip848.operators.members import KafkaRemoveGroupMembersOperator
from airflow_provider_kip848.operators.offsets import (
    KafkaCompareGroupOffsetsOperator,
    KafkaRestoreGroupOffsetsOperator,
    KafkaSnapshotGroupOffsetsOperator,
)
from airflow_provider_kip848.operators.preflight import KafkaMigrationPreflightOperator
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import ConsumerProcess, consume, create_topics, produce
from kip848_harness.kafka_cluster import LocalKafka
from tests.conftest import set_kafka_connection, start_or_fail, wait_until


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory, kafka_version, pytestconfig):
    """Feature levels and the migration policy are cluster-wide: these tests get a broker of their own."""
    broker = LocalKafka(tmp_path_factory.mktemp("operators"), version=kafka_version, die_with_parent=True)
    start_or_fail(broker, pytestconfig)
    yield broker
    broker.stop()


def test_feature_operator_dry_run_change_and_noop(own_cluster, monkeypatch, context):
    conn = set_kafka_connection(monkeypatch, "kafka_own", own_cluster.bootstrap_servers)
    admin = KafkaAdmin(ClientSettings(own_cluster.bootstrap_servers))
    try:
        dry = KafkaFeatureOperator(task_id="dry", kafka_conn_id=conn, feature="streams.version", level=0,
                                   action="downgrade", dry_run=True).execute(context)
        assert dry["validation"] == "streams.version can be downgraded to 0." and not dry["applied"]
        assert admin.describe_features().level("streams.version") == 1
        for backend in ("native", "cli"):
            down = KafkaFeatureOperator(task_id="down", kafka_conn_id=conn, feature="streams.version", level=0,
                                        action="downgrade", backend=backend).execute(context)
            assert down["applied"] and admin.describe_features().level("streams.version") == 0
            up = KafkaFeatureOperator(task_id="up", kafka_conn_id=conn, feature="streams.version", level=1,
                                      backend=backend)
            assert up.execute(context)["applied"]
            again = up.execute(context)
            assert again["noop"] and not again["applied"] and "already at level 1" in again["message"]
        with pytest.raises(AirflowFailException, match="not supported"):
            KafkaFeatureOperator(task_id="bad", kafka_conn_id=conn, feature="streams.version", level=4).execute(context)
    finally:
        admin.update_feature("streams.version", 1)
        admin.close()


@pytest.mark.parametrize("backend", ["native", "cli"])
def test_group_config_operator_set_rerun_delete(kafka_conn, native, unique, context, backend):
    group = unique("cfg-op")
    op = KafkaGroupConfigOperator(task_id="set", group_id=group, backend=backend,
                                  set_configs={"streams.num.standby.replicas": 1, "streams.session.timeout.ms": 10000},
                                      allow_absent_group=True)
    first = op.execute(context)
    assert first["applied"] and first["changed"] == {"streams.num.standby.replicas": [None, "1"],
                                                     "streams.session.timeout.ms": [None, "10000"]}
    second = op.execute(context)
    assert not second["applied"] and second["changed"] == {}
    assert native.describe_group_config(group).dynamic == first["after"]
    with pytest.raises(AirflowFailException, match="group.streams.max.standby.replicas=2"):
        KafkaGroupConfigOperator(task_id="bad", group_id=group, backend=backend,
                                 set_configs={"streams.num.standby.replicas": 5},
                                     allow_absent_group=True).execute(context)
    deleted = KafkaGroupConfigOperator(task_id="del", group_id=group, backend=backend,
                                       delete_configs=["streams.session.timeout.ms"],
                                           allow_absent_group=True).execute(context)
    assert deleted["after"] == {"streams.num.standby.replicas": "1"}


def test_snapshot_compare_restore_cycle(kafka_conn, native, bootstrap, unique, tmp_path, context):
    topic, group = unique("snap"), unique("snap-group")
    create_topics(bootstrap, {topic: 3})
    produce(bootstrap, topic, (f"v{i}" for i in range(30)), keys=(f"k{i}" for i in range(30)))
    consume(bootstrap, group, [topic], 30, group_protocol="classic")
    path = str(tmp_path / "snapshots" / f"{group}.json")
    snap = KafkaSnapshotGroupOffsetsOperator(task_id="snap", group_id=group, path=path)
    first = snap.execute(context)
    assert first["committed_partitions"] == 3 and not first["reused"]
    assert json.loads(open(path).read())["group_id"] == group

    produce(bootstrap, topic, (f"w{i}" for i in range(6)))
    consume(bootstrap, group, [topic], 6, group_protocol="classic")
    assert snap.execute(context)["reused"], "a rerun keeps the baseline taken before anything changed"
    assert snap.execute(context)["sha256"] == first["sha256"]

    compare_op = KafkaCompareGroupOffsetsOperator(task_id="cmp", group_id=group, snapshot_path=path)
    advanced = compare_op.execute(context)
    assert advanced["preserved"] and advanced["counts"]["advanced"] >= 1
    with pytest.raises(AirflowFailException, match="advanced"):
        KafkaCompareGroupOffsetsOperator(task_id="cmp2", group_id=group, snapshot_path=path,
                                    allow_advanced=False).execute(context)

    # a conversion that lost the offsets: the group is gone ...
    native.delete_group(group)
    with pytest.raises(AirflowFailException, match="lost committed offsets on 3 partition"):
        compare_op.execute(context)
    # ... and a consumer came back from the earliest offsets and committed a little progress
    consume(bootstrap, group, [topic], 3, group_protocol="classic")
    with pytest.raises(AirflowFailException, match="lost committed offsets on 3 partition"):
        compare_op.execute(context)
    restore = KafkaRestoreGroupOffsetsOperator(task_id="restore", group_id=group, snapshot_path=path)
    restored = restore.execute(context)
    assert len(restored["restored"]) == 3
    assert compare_op.execute(context)["counts"]["equal"] == 3
    assert restore.execute(context)["restored"] == {}, "a rerun restores nothing"

    other = unique("other")
    consume(bootstrap, other, [topic], 1, group_protocol="consumer")
    with pytest.raises(AirflowFailException, match="refusing to overwrite"):
        KafkaSnapshotGroupOffsetsOperator(task_id="other", group_id=other, path=path).execute(context)
    with pytest.raises(AirflowFailException, match="does not exist"):
        KafkaSnapshotGroupOffsetsOperator(task_id="ghost", group_id=unique("ghost"), path=str(tmp_path / "g.json")).execute(context)
    with pytest.raises(AirflowFailException, match="not JSON"):
        (tmp_path / "broken.json").write_text("{")
        KafkaCompareGroupOffsetsOperator(task_id="x", group_id=group, snapshot_path=str(tmp_path / "broken.json")).execute(context)


def test_remove_members_operator_and_streams_refusal(kafka, kafka_conn, native, bootstrap, unique, tmp_path, context):
    topic, group = unique("rm"), unique("rm-group")
    create_topics(bootstrap, {topic: 2, WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    members = [ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id=f"c{i}",
                                     session_timeout_ms=60000, instance_id="static-0" if i == 0 else None,
                                     log_file=str(tmp_path / f"c{i}.log")) for i in range(2)]
    wait_until(lambda: len(native.describe_group(group).members) == 2, what="two members")
    for m in members:
        m.kill()
    op = KafkaRemoveGroupMembersOperator(task_id="rm", group_id=group, all_members=True)
    result = op.execute(context)
    assert len(result["removed"]) == 2 and "static-0" in result["removed"]
    assert native.describe_group(group).is_empty
    assert op.execute(context)["removed"] == []
    app_id = unique("rm-streams")
    app = kafka.start_wordcount(app_id)
    try:
        wait_until(lambda: native.describe_group(app_id).state == "Stable", what="streams app")
        with pytest.raises(AirflowFailException, match="rejects LeaveGroup for streams groups"):
            KafkaRemoveGroupMembersOperator(task_id="rm2", group_id=app_id, all_members=True).execute(context)
    finally:
        app.stop()


class CustomAssignorMember(threading.Thread):
    """A classic member whose assignor puts userData into assignments (kafka-python; a custom client assignor)."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.stop_flag = threading.Event()

    def run(self) -> None:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.abstract import ConsumerProtocolAssignment
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        class UserDataAssignor(RangePartitionAssignor):
            name = "kip848-custom-userdata"

            @classmethod
            def assign(cls, cluster, members):
                plain = RangePartitionAssignor.assign(cluster, members)
                return {m: ConsumerProtocolAssignment(a.version, a.assigned_partitions, b"custom-state")
                        for m, a in plain.items()}

        consumer = KafkaConsumer(self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
                                 partition_assignment_strategy=[UserDataAssignor], auto_offset_reset="earliest",
                                 session_timeout_ms=10000)
        try:
            while not self.stop_flag.is_set():
                consumer.poll(timeout_ms=200)
        finally:
            consumer.close()


def test_preflight_on_a_healthy_cluster_and_on_each_blocker(own_cluster, monkeypatch, unique, tmp_path, context,
                                                            kafka_version):
    bootstrap = own_cluster.bootstrap_servers
    conn = set_kafka_connection(monkeypatch, "kafka_own", bootstrap)
    admin = KafkaAdmin(ClientSettings(bootstrap))
    topic = unique("pre")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, [b"1", b"2"])

    def preflight(mode, group=None, **kw):
        # the release the brokers run, as a team reads it from their logs: 4.2.0 and 4.2.1 look alike over
        # the protocol, so on the 4.2 line (make test-matrix) an undeclared release is refused before anything
        kw.setdefault("declared_broker_version", kafka_version)
        return KafkaMigrationPreflightOperator(task_id=f"pre-{mode}", kafka_conn_id=conn, mode=mode, group_id=group, **kw)

    healthy = unique("healthy")
    member = ConsumerProcess.start(bootstrap, healthy, [topic], protocol="classic", client_id="h",
                                   log_file=str(tmp_path / "h.log"))
    custom = CustomAssignorMember(bootstrap, unique("userdata"), topic)
    try:
        wait_until(lambda: admin.describe_group(healthy).state == "Stable", what="healthy classic group")
        report = preflight("classic_to_consumer", healthy).execute(context)
        assert report["passed"] and report["failures"] == []

        # a non-empty group cannot be migrated offline
        with pytest.raises(AirflowFailException, match="group_empty: 1 active member"):
            preflight("classic_to_streams", healthy).execute(context)
        assert context["ti"].xcom["report"]["failures"] == ["group_empty"]

        # a classic group whose assignments carry userData (custom client assignor)
        custom.start()
        wait_until(lambda: admin.describe_group(custom.group).state == "Stable", what="custom-assignor group")
        with pytest.raises(AirflowFailException, match="custom_assignor: 1 member\\(s\\) carry assignment userData"):
            preflight("classic_to_consumer", custom.group).execute(context)
        # ... and the broker really refuses that upgrade: a consumer-protocol member cannot join
        with pytest.raises(KafkaException, match="GROUP_ID_NOT_FOUND|[Gg]roup"):
            consume(bootstrap, custom.group, [topic], 1, group_protocol="consumer", timeout=20)
        assert admin.group_listing(custom.group).type is GroupType.CLASSIC

        # streams.version at 0
        admin.update_feature("streams.version", 0, action="downgrade", override_dependent_groups=True)
        with pytest.raises(AirflowFailException, match="feature_finalized: streams.version finalized at 0"):
            preflight("classic_to_streams", unique("offline"), expect_empty=False).execute(context)
        with pytest.raises(AirflowFailException):
            preflight("enable_feature", feature="streams.version", feature_level=1, fail_on_warn=False,
                      declared_broker_version="4.1.0").execute(context)
        assert preflight("enable_feature", feature="streams.version", feature_level=1).execute(context)["passed"]
    finally:
        admin.update_feature("streams.version", 1)
        custom.stop_flag.set()
        member.stop()
        admin.close()


def test_preflight_catches_a_disabled_migration_policy(fresh_kafka, monkeypatch, unique, tmp_path, context):
    broker = fresh_kafka(overrides={"group.consumer.migration.policy": "disabled"})
    conn = set_kafka_connection(monkeypatch, "kafka_disabled", broker.bootstrap_servers)
    topic, group = unique("pol"), unique("pol-group")
    create_topics(broker.bootstrap_servers, {topic: 1})
    member = ConsumerProcess.start(broker.bootstrap_servers, group, [topic], protocol="classic", client_id="p",
                                   log_file=str(tmp_path / "p.log"))
    try:
        with KafkaAdmin(ClientSettings(broker.bootstrap_servers)) as admin:
            wait_until(lambda: admin.describe_group(group).state == "Stable", what="classic member")
        with pytest.raises(AirflowFailException, match="group.consumer.migration.policy=disabled forbids an online upgrade"):
            KafkaMigrationPreflightOperator(task_id="pre", kafka_conn_id=conn, mode="classic_to_consumer",
                                       group_id=group).execute(context)
    finally:
        member.stop()


def test_lint_operator_on_a_properties_file(tmp_path, context):
    props = tmp_path / "app.properties"
    props.write_text("group.protocol=classic\nsession.timeout.ms=30000\n")
    with pytest.raises(AirflowFailException, match="consumer.session.timeout.ms=30000"):
        KafkaClientConfigLintOperator(task_id="lint", properties=str(props), target="consumer").execute(context)
    ok = KafkaClientConfigLintOperator(task_id="lint2", properties={"group.protocol": "consumer",
                                                               "enable.auto.commit": "false",
                                                               "group.remote.assignor": "range"},
                                  target="consumer", client_version="4.1.0").execute(context)
    assert ok["errors"] == 0 and ok["findings"] == []


def test_preflight_refuses_a_rollback_the_upgrade_policy_cannot_carry(fresh_kafka, monkeypatch, unique, tmp_path,
                                                                     context):
    """Under group.consumer.migration.policy=upgrade the online rollback of the rolling upgrade can never finish:
    the broker converts the group up but never back down while it has members. Shown on the real broker, then
    refused (or warned about) by the preflight before anything starts."""
    broker = fresh_kafka(overrides={"group.consumer.migration.policy": "upgrade"})
    bootstrap = broker.bootstrap_servers
    conn = set_kafka_connection(monkeypatch, "kafka_upgrade_only", bootstrap)
    topic, group = unique("pol"), unique("pol-group")
    create_topics(bootstrap, {topic: 2})
    members = [ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id=f"p{i}",
                                     log_file=str(tmp_path / f"p{i}.log")) for i in range(2)]
    try:
        with KafkaAdmin(ClientSettings(bootstrap)) as admin:
            wait_until(lambda: len(admin.describe_group(group).members) == 2, what="two classic members")
            for rollback, outcome in (("fail", "refused"), ("warn", "warned"), (None, "unchecked")):
                op = KafkaMigrationPreflightOperator(task_id=f"pre-{outcome}", kafka_conn_id=conn, mode="classic_to_consumer",
                                                group_id=group, rollback=rollback)
                if rollback == "fail":
                    with pytest.raises(AirflowFailException, match="rollback_policy: group.consumer.migration.policy="
                                                                   "upgrade disables the online downgrade"):
                        op.execute(context)
                    continue
                report = op.execute(context)
                assert report["passed"]
                assert ("rollback_policy" in report["warnings"]) == (rollback == "warn")
                assert ("rollback_policy" in [c["name"] for c in report["checks"]]) == (rollback is not None)
            # what the check protects against: upgrade one instance, roll it back, the group stays a consumer group
            members[0].stop()
            members[0] = ConsumerProcess.start(bootstrap, group, [topic], protocol="consumer", client_id="p0",
                                               log_file=str(tmp_path / "p0-new.log"))
            wait_until(lambda: admin.describe_group(group).type is GroupType.CONSUMER, what="the online upgrade")
            members[0].stop()
            members[0] = ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id="p0",
                                               log_file=str(tmp_path / "p0-back.log"))
            desc = wait_until(lambda: (d := admin.describe_group(group)) and len(d.members) == 2
                              and all(m.protocol.value == "classic" for m in d.members) and d, timeout=60,
                              what="both instances back on classic")
            assert desc.type is GroupType.CONSUMER, "under policy=upgrade the group is never converted back online"
    finally:
        for m in members:
            m.stop()


def test_preflight_and_lint_read_the_real_assignors(kafka_conn, native, bootstrap, unique, tmp_path, context):
    """librdkafka's cooperative-sticky group is refused online (its assignments carry userData) and the
    remedy names the offline DAG; a range group is told that the brokers' default (read from the cluster)
    would replace range; declared source topics are checked against the cluster and the group's commits."""
    topic = unique("asg")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, [b"1", b"2", b"3"])
    sticky, ranged = unique("coop-sticky"), unique("ranged")
    members = [ConsumerProcess.start(bootstrap, sticky, [topic], protocol="classic", client_id="cs0",
                                     assignor="cooperative-sticky", log_file=str(tmp_path / "cs0.log")),
               ConsumerProcess.start(bootstrap, ranged, [topic], protocol="classic", client_id="r",
                                     assignor="range", log_file=str(tmp_path / "r.log"))]
    try:
        for group in (sticky, ranged):
            wait_until(lambda g=group: native.describe_group(g).state == "Stable", what=f"{group} Stable")
        # one member that owned nothing before: no userData yet, but it comes with the next rebalance
        if not any(native.classic_assignment_user_data(sticky).values()):
            report = KafkaMigrationPreflightOperator(task_id="pre-cs1", kafka_conn_id=kafka_conn,
                                                mode="classic_to_consumer", group_id=sticky).execute(context)
            check = next(c for c in report["checks"] if c["name"] == "custom_assignor")
            assert check["status"] == "warn" and "kip848_consumer_offline_migration" in check["remedy"], check
        # a second instance (a rebalance): librdkafka's cooperative-sticky now writes assignment userData
        members.append(ConsumerProcess.start(bootstrap, sticky, [topic], protocol="classic", client_id="cs1",
                                             assignor="cooperative-sticky", log_file=str(tmp_path / "cs1.log")))
        wait_until(lambda: any(native.classic_assignment_user_data(sticky).values()), what="assignment userData")
        with pytest.raises(AirflowFailException, match="kip848_consumer_offline_migration"):
            KafkaMigrationPreflightOperator(task_id="pre-cs", kafka_conn_id=kafka_conn, mode="classic_to_consumer",
                                       group_id=sticky).execute(context)
        report = context["ti"].xcom["report"]
        assert "custom_assignor" in report["failures"], report
        # ... and the broker does refuse it online
        with pytest.raises(KafkaException, match="GROUP_ID_NOT_FOUND|[Gg]roup"):
            consume(bootstrap, sticky, [topic], 1, group_protocol="consumer", timeout=20)
        assert native.group_listing(sticky).type is GroupType.CLASSIC
        # offline: the same group passes (stop first: the DAG does)
        offline = KafkaMigrationPreflightOperator(task_id="pre-off", kafka_conn_id=kafka_conn,
                                             mode="classic_to_consumer_offline", group_id=sticky,
                                             expect_empty=False).execute(context)
        assert offline["passed"] and "custom_assignor" not in {c["name"] for c in offline["checks"]}

        # range today; the brokers of this cluster offer uniform first
        report = KafkaMigrationPreflightOperator(task_id="pre-r", kafka_conn_id=kafka_conn, mode="classic_to_consumer",
                                            group_id=ranged).execute(context)
        mapping = next(c for c in report["checks"] if c["name"] == "assignor_mapping")
        assert mapping["status"] == "warn" and "group.remote.assignor=range" in mapping["remedy"], mapping
        assert "uniform,range" in mapping["evidence"]  # read from the brokers' group.consumer.assignors
        lint = KafkaClientConfigLintOperator(task_id="lint-r", properties={"group.protocol": "consumer"},
                                        kafka_conn_id=kafka_conn, group_id=ranged, client="librdkafka",
                                        client_version="2.12.1").execute(context)
        finding = next(f for f in lint["findings"] if f["key"] == "group.remote.assignor")
        assert finding["severity"] == "warn" and "'range'" in finding["message"], lint
        assert not any(f["key"] == "client.version" for f in lint["findings"])
        with pytest.raises(AirflowFailException, match="client.version"):
            KafkaClientConfigLintOperator(task_id="lint-old", properties={"group.protocol": "consumer"},
                                     client="librdkafka", client_version="2.10.0").execute(context)

        # source topics: one exists (and was consumed), one does not
        with pytest.raises(AirflowFailException, match="source_topics"):
            KafkaMigrationPreflightOperator(task_id="pre-src", kafka_conn_id=kafka_conn, mode="classic_to_streams",
                                       group_id=ranged, expect_empty=False,
                                       source_topics=f"{topic}, {topic}-missing").execute(context)
        checks = {c["name"]: c for c in context["ti"].xcom["report"]["checks"]}
        assert checks["source_topics"]["status"] == "fail" and f"{topic}-missing (missing)" in checks[
            "source_topics"]["evidence"]
        assert checks["topology"]["status"] == "warn" and f"new: {topic}-missing" in checks["topology"]["evidence"]
    finally:
        for m in members:
            m.stop()


def test_an_old_metadata_version_does_not_block_streams_version(fresh_kafka, monkeypatch, context, kafka_version):
    """A cluster formatted at metadata.version 4.1-IV1 (as one upgraded from 4.1 is until its metadata is
    upgraded). Kafka ties streams.version=1 to 4.2-IV1 only as the level a new cluster gets it by default,
    not as a dependency: the controller finalizes it, so the preflight must not refuse it (it used to), and
    says where the default lies."""
    broker = fresh_kafka(release_version="4.1-IV1")
    conn = set_kafka_connection(monkeypatch, "kafka_old_metadata", broker.bootstrap_servers)
    admin = KafkaAdmin(ClientSettings(broker.bootstrap_servers))
    try:
        features = admin.describe_features()
        assert features.level("streams.version") == 0 and features.level("metadata.version") < 29
        report = KafkaMigrationPreflightOperator(task_id="pre", kafka_conn_id=conn, mode="enable_feature",
                                            feature="streams.version", feature_level=1,
                                            declared_broker_version=kafka_version).execute(context)
        check = next(c for c in report["checks"] if c["name"] == "feature_level")
        assert report["passed"] and "below 4.2-IV1" in check["evidence"], report
        # the broker agrees: the controller validates it, then finalizes it
        dry = admin.update_feature("streams.version", 1, dry_run=True)
        assert not dry.applied and admin.describe_features().level("streams.version") == 0
        admin.update_feature("streams.version", 1)
        assert admin.describe_features().level("streams.version") == 1
    finally:
        admin.close()


def test_the_application_start_takes_a_last_look_at_the_group_and_the_source_topics(kafka_conn, native, bootstrap,
                                                                                   unique, tmp_path, context,
                                                                                   controllers):
    """A group with a live member (an instance still running) and a missing source topic are refused before the
    controller is called; an Empty group with its topics gets the start, on the protocol asked. The controller is
    a registry entry of kind ``command`` whose commands only append to a file (what it was asked)."""
    import shlex

    from airflow_provider_kip848.operators.application import (
        KafkaApplicationStartOperator,
        KafkaApplicationStopOperator,
    )

    topic, group = unique("app-in"), unique("app")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, [b"1", b"2"])
    calls = tmp_path / "calls"
    name = controllers.add(unique("recording"), "command", {"commands": {
        "stop": f"echo stop >> {shlex.quote(str(calls))}",
        "start": f"echo start {{group_protocol}} >> {shlex.quote(str(calls))}"}})

    def asked() -> list[str]:
        return calls.read_text().splitlines() if calls.exists() else []

    def start(task_id: str, topics: str | None = None) -> dict:
        return KafkaApplicationStartOperator(task_id=task_id, kafka_conn_id=kafka_conn, group_id=group,
                                             group_protocol="streams", source_topics=topics,
                                             controller=name).execute(context)

    member = ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id="still-running",
                                   log_file=str(tmp_path / "m.log"))
    try:
        wait_until(lambda: len(native.describe_group(group).members) == 1, what="one live member")
        with pytest.raises(AirflowFailException, match="Not starting the application on streams: .*still-running"):
            start("live")
    finally:
        member.stop()
    wait_until(lambda: not native.describe_group(group).members, what="the member left")
    missing = unique("absent")
    with pytest.raises(AirflowFailException, match=f"source topic\\(s\\) {missing} do not exist"):
        start("missing", f"{topic},{missing}")
    assert asked() == [], "nothing was started while the last look failed"
    started = start("ok", topic)
    assert started["group_protocol"] == "streams" and started["platform"]["exit_code"] == 0
    assert started["status"]["known"] is False, "no status command: the platform cannot tell"
    stopped = KafkaApplicationStopOperator(task_id="stop", controller=name).execute(context)
    assert stopped["instances_gone"] is None, "without a status the stop cannot confirm the instances gone"
    assert asked() == ["start streams", "stop"]
