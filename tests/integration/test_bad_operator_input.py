"""Bad input to the operators and sensors, against the real broker: a clear, specific error and nothing changed.

The admin-level table (every backend call) is ``test_bad_input.py``; this one is what a DAG author
meets: the operator (or sensor) fails the task at once with ``AirflowFailException`` (no pointless
retries), its cause is the provider's specific error, the message says what to do, and the
broker's features, group configs, committed offsets and members are exactly as before. The
Params forms of the example DAGs, which catch many of these mistakes before a run starts, are
``tests/unit/test_bad_params.py``.
"""

from __future__ import annotations

import json

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.kafka import errors as kafka_errors
from airflow_provider_kip848.kafka.api import take_snapshot
from airflow_provider_kip848.kafka.errors import SnapshotConflict, SnapshotInvalid
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.features import KafkaFeatureOperator
from airflow_provider_kip848.operators.group_config import KafkaGroupConfigOperator
from airflow_provider_kip848.operators.members import KafkaRemoveGroupMembersOperator
from airflow_provider_kip848.operators.offsets import (
    KafkaCompareGroupOffsetsOperator,
    KafkaRestoreGroupOffsetsOperator,
    KafkaSnapshotGroupOffsetsOperator,
)
from airflow_provider_kip848.operators.preflight import KafkaMigrationPreflightOperator
from airflow_provider_kip848.operators.topology import KafkaStreamsTopologyCheckOperator
from airflow_provider_kip848.sensors.group import (
    KafkaGroupEmptySensor,
    KafkaGroupLagSensor,
    KafkaGroupMigratedSensor,
    KafkaGroupStateSensor,
    KafkaGroupTypeSensor,
)
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import ConsumerProcess, consume, create_topics, produce
from tests.conftest import RecordingTI, wait_until

TOPIC, OTHER_TOPIC = "bad-op-topic", "bad-op-other-topic"
EMPTY, BUSY, STREAMS = "bad-op-empty", "bad-op-busy", "bad-op-streams"
TYPO = "bad-op-emtpy"  # what a user types for EMPTY


@pytest.fixture(scope="module")
def scene(kafka, tmp_path_factory):
    """An empty consumer group with commits, a busy one, an empty streams group, and snapshots to break."""
    bootstrap = kafka.bootstrap_servers
    create_topics(bootstrap, {TOPIC: 2, OTHER_TOPIC: 1, WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    produce(bootstrap, TOPIC, (f"v{i}" for i in range(10)), keys=(f"k{i}" for i in range(10)))
    produce(bootstrap, OTHER_TOPIC, (f"o{i}" for i in range(5)))
    consume(bootstrap, EMPTY, [TOPIC], 10, group_protocol="consumer")
    consume(bootstrap, BUSY, [TOPIC], 10, group_protocol="consumer")
    work = tmp_path_factory.mktemp("bad-op")
    busy = ConsumerProcess.start(bootstrap, BUSY, [TOPIC], protocol="consumer", client_id="busy",
                                 log_file=str(work / "busy.log"))
    # the streams group gets a commit: an Empty group without committed offsets is deleted by the coordinator's
    # periodic cleanup (offsets.retention.check.interval.ms, 10 min), and this module may outlast that on a busy run
    produce(bootstrap, WORDCOUNT_INPUT_TOPIC, ["a b", "b c", "c d"], keys=["1", "2", "3"])
    app = kafka.start_wordcount(STREAMS)
    try:
        with KafkaAdmin(ClientSettings(bootstrap)) as admin:
            wait_until(lambda: admin.describe_group(STREAMS).state == "Stable", what="streams group")
            wait_until(lambda: any(tp.topic == WORDCOUNT_INPUT_TOPIC for tp in admin.group_offsets(STREAMS).committed),
                       what="streams commit")
            app.stop()  # the streams group stays, Empty, with its type and its commit
            wait_until(lambda: len(admin.describe_group(BUSY).members) == 1, what="busy member")
            snapshots = _snapshots(admin, work)
        yield {"bootstrap": bootstrap, "work": work, **snapshots}
    finally:
        busy.stop()
        app.stop()


def _snapshots(admin: KafkaAdmin, work) -> dict[str, str]:
    """Snapshot files with one thing wrong each (written as the operator would, then edited)."""
    good = take_snapshot(admin, EMPTY).to_dict()
    busy = take_snapshot(admin, BUSY).to_dict()

    def write(name: str, content) -> str:
        path = work / f"{name}.json"
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return str(path)

    def edited(base: dict, **changes) -> dict:
        return {**json.loads(json.dumps(base)), **changes}

    p0 = {"topic": TOPIC, "partition": 0, "committed": 10_000, "log_start": 0, "log_end": 10_000, "leader_epoch": None}
    return {
        "snap_good": write("good", good),
        "snap_not_json": write("not-json", "{'group_id': bad-op-empty"),
        "snap_wrong_schema": write("wrong-schema", {"group": EMPTY, "offsets": {f"{TOPIC}:0": 5}}),
        "snap_wrong_version": write("wrong-version", edited(good, version=2)),
        "snap_no_partitions": write("no-partitions", {k: v for k, v in good.items() if k != "partitions"}),
        "snap_text_offset": write("text-offset", edited(good, partitions=[{**p0, "committed": "five"}])),
        "snap_beyond_log_end": write("beyond-log-end", edited(good, partitions=[p0])),
        "snap_unknown_partition": write("unknown-partition", edited(good, partitions=[{**p0, "partition": 7,
                                                                                           "committed": 1}])),
        "snap_unknown_topic": write("unknown-topic", edited(good, partitions=[{**p0, "topic": "bad-op-deleted",
                                                                                  "committed": 1}])),
        # the busy group "lost" its commit on a partition: restoring it must wait for the group to be empty
        "snap_other_cluster": write("other-cluster", edited(good, cluster_id="AnotherClusterId00000w")),
        # issue 31: the empty group reads TOPIC only; a snapshot that also has OTHER_TOPIC would restore offsets there
        "snap_unread": write("unread", edited(good, partitions=[
            *good["partitions"],
            {"topic": OTHER_TOPIC, "partition": 0, "committed": 3, "log_start": 0, "log_end": 5, "leader_epoch": None}])),
        "snap_busy_lost": write("busy-lost", edited(busy, partitions=[
            *busy["partitions"],
            {"topic": OTHER_TOPIC, "partition": 0, "committed": 3, "log_start": 0, "log_end": 5, "leader_epoch": None}])),
    }


def fingerprint(admin: KafkaAdmin) -> tuple:
    """What no case may change: feature levels, group configs, committed offsets, members, group types."""
    features = {n: f.finalized_level for n, f in admin.describe_features().features.items()}
    configs = {g: admin.describe_group_config(g).dynamic for g in (EMPTY, BUSY, STREAMS, TYPO)}
    offsets = {g: admin.group_offsets(g).committed for g in (EMPTY, BUSY, STREAMS)}
    members = {g: (admin.group_listing(g).type.value, len(admin.describe_group(g).members))
               for g in (EMPTY, BUSY, STREAMS)}
    # the groups these cases could create or remove (all named bad-op-*, or blank); other tests' groups on the
    # worker's broker change on their own (a session expires, a group converts) and are not this test's to judge
    listing = sorted((g.group_id, g.type.value) for g in admin.list_groups()
                     if g.group_id.startswith("bad-op") or not g.group_id.strip())
    return features, configs, offsets, members, listing


def cfg(group, set_configs=None, delete_configs=None, backend="native", **kw):
    return lambda s: KafkaGroupConfigOperator(task_id="cfg", group_id=group, set_configs=set_configs,
                                              delete_configs=delete_configs, backend=backend, **kw)


def feature(name, level, action="upgrade", backend="native", **kw):
    return lambda s: KafkaFeatureOperator(task_id="feat", feature=name, level=level, action=action, backend=backend,
                                          **kw)


def restore(snapshot_key, group=EMPTY, backend="native", **kw):
    return lambda s: KafkaRestoreGroupOffsetsOperator(task_id="restore", group_id=group, backend=backend,
                                                 snapshot_path=s.get(snapshot_key, str(s["work"] / "absent.json")),
                                                 **kw)


def preflight(mode, group):
    return lambda s: KafkaMigrationPreflightOperator(task_id="preflight", mode=mode, group_id=group)


def poke(sensor_cls, group, **kw):
    # the task runs by execute() in the test, where no triggerer runs: the wait pokes (deferrable=False; the
    # default is the deployment's [kip848] default_deferrable, True)
    return lambda s: sensor_cls(task_id="wait", group_id=group, poll_interval=0.2, timeout=10, deferrable=False, **kw)


# (case id, task factory(scene), specific error (the task failure's cause; None: the task's own verdict),
#  fragment naming the mistake, fragment telling what to do)
CASES = [
    # group configs
    ("config-empty-group-id", cfg("", {"streams.num.standby.replicas": 1}), kafka_errors.InvalidGroupId,
     "The group id is empty", "Pass the group id"),
    ("config-empty-group-id-cli", cfg("", {"streams.num.standby.replicas": 1}, backend="cli"), kafka_errors.InvalidGroupId,
     "The group id is empty", "Pass the group id"),
    ("config-unknown-key", cfg(EMPTY, {"consumer.session.timeout": 45000}), kafka_errors.ConfigUnknown,
     "'consumer.session.timeout' is not a group config", "Fix the config name or value"),
    ("config-session-below-broker-min", cfg(EMPTY, {"consumer.session.timeout.ms": 1000}), kafka_errors.ConfigOutOfBounds,
     "is below the minimum (broker group.consumer.min.session.timeout.ms=", "Fix the config name or value"),
    ("config-heartbeat-not-below-session", cfg(EMPTY, {"consumer.heartbeat.interval.ms": 6000,
                                                       "consumer.session.timeout.ms": 6000}),
     kafka_errors.ConfigOutOfBounds, "consumer.session.timeout.ms=6000 must be greater than consumer.heartbeat.interval.ms=6000",
     "Fix the config name or value"),
    ("config-standby-above-broker-max", cfg(STREAMS, {"streams.num.standby.replicas": 5}), kafka_errors.ConfigOutOfBounds,
     "is above the maximum (broker group.streams.max.standby.replicas=2)", "the broker's bounds are in the message"),
    ("config-standby-above-broker-max-cli", cfg(STREAMS, {"streams.num.standby.replicas": 5}, backend="cli"),
     kafka_errors.ConfigOutOfBounds, "is above the maximum (broker group.streams.max.standby.replicas=2)",
     "the broker's bounds are in the message"),
    ("config-text-for-integer", cfg(EMPTY, {"streams.num.standby.replicas": "two"}), kafka_errors.ConfigOutOfBounds,
     "streams.num.standby.replicas='two' is not an integer", "Fix the config name or value"),
    ("config-set-not-a-mapping", cfg(EMPTY, "streams.num.standby.replicas=1"), kafka_errors.InvalidGroupConfig,
     "set_configs must be a mapping of config name to value, not str", 'Pass e.g. {"streams.num.standby.replicas": 1}'),
    ("config-delete-a-bare-string", cfg(EMPTY, None, "streams.num.standby.replicas"), kafka_errors.InvalidGroupConfig,
     "delete_configs must be a list of config names", "Pass a list, e.g. ['streams.num.standby.replicas']"),
    # features
    ("feature-streams-version-99", feature("streams.version", 99), kafka_errors.InvalidFeatureLevel,
     "streams.version level 99 is not supported: the cluster supports 0..1", "kafka-features describe"),
    ("feature-streams-version-99-cli", feature("streams.version", 99, backend="cli"), kafka_errors.InvalidFeatureLevel,
     "streams.version level 99 is not supported: the cluster supports 0..1", "kafka-features describe"),
    ("feature-group-version-minus-1", feature("group.version", -1), kafka_errors.InvalidFeatureLevel,
     "group.version level -1 is not supported", "kafka-features describe"),
    ("feature-level-not-a-number", feature("streams.version", "latest"), kafka_errors.InvalidFeatureLevel,
     "streams.version level 'latest' is not a number", "kafka-features describe"),
    ("feature-downgrade-without-downgrade-action", feature("group.version", 0), kafka_errors.InvalidFeatureLevel,
     "an upgrade to 0 would lower it", "Use action 'downgrade'"),
    ("feature-unknown", feature("kip848.version", 1), kafka_errors.InvalidFeatureLevel,
     "Feature 'kip848.version' is not known to this cluster", "kafka-features describe"),
    ("feature-unknown-action", feature("streams.version", 1, action="rollback"), kafka_errors.InvalidArgument,
     "action must be one of upgrade, downgrade, disable, not 'rollback'", "Fix the task's arguments"),
    # offsets snapshots and restores
    ("snapshot-empty-group-id", lambda s: KafkaSnapshotGroupOffsetsOperator(task_id="snap", group_id="",
                                                                       path=str(s["work"] / "new.json")),
     kafka_errors.InvalidGroupId, "The group id is empty", "Pass the group id"),
    ("snapshot-unknown-group", lambda s: KafkaSnapshotGroupOffsetsOperator(task_id="snap", group_id="bad-op-ghost",
                                                                      path=str(s["work"] / "ghost.json")),
     kafka_errors.GroupNotFound, "Group 'bad-op-ghost' does not exist", "kafka-groups --list"),
    ("snapshot-over-another-groups-snapshot", lambda s: KafkaSnapshotGroupOffsetsOperator(
        task_id="snap", group_id=BUSY, path=s["snap_good"]),
     SnapshotConflict, "holds a snapshot of group 'bad-op-empty'", "Use another path"),
    ("restore-no-snapshot-file", restore("snap_absent"), SnapshotInvalid, "No snapshot at",
     "a volume every worker mounts, or take a new snapshot"),
    ("restore-snapshot-not-json", restore("snap_not_json"), SnapshotInvalid, "is not JSON",
     "written by KafkaSnapshotGroupOffsetsOperator"),
    ("restore-snapshot-wrong-schema", restore("snap_wrong_schema"), SnapshotInvalid,
     "is not an offsets snapshot of this provider", "written by KafkaSnapshotGroupOffsetsOperator"),
    ("restore-snapshot-wrong-version", restore("snap_wrong_version"), SnapshotInvalid,
     "has snapshot version 2; this provider reads version 1", "take a new one"),
    ("restore-snapshot-partitions-missing", restore("snap_no_partitions"), SnapshotInvalid,
     "is missing or has a malformed field: KeyError('partitions')", "take a new one"),
    ("restore-snapshot-text-offset", restore("snap_text_offset"), SnapshotInvalid,
     "is missing or has a malformed field", "take a new one"),
    ("restore-snapshot-of-another-group", restore("snap_good", group=BUSY), SnapshotConflict,
     "is a snapshot of group 'bad-op-empty', not 'bad-op-busy'", "Use another path"),
    ("restore-offset-beyond-log-end", restore("snap_beyond_log_end"), kafka_errors.InvalidOffset,
     f"Offset 10000 for {TOPIC}:0 is outside the log (0..", "between the partition's log start and log end"),
    ("restore-offset-beyond-log-end-cli", restore("snap_beyond_log_end", backend="cli"), kafka_errors.InvalidOffset,
     f"Offset 10000 for {TOPIC}:0 is outside the log (0..", "between the partition's log start and log end"),
    ("restore-partition-missing-from-topic", restore("snap_unknown_partition"), kafka_errors.UnknownTopicOrPartition,
     f"No such topic-partition: {TOPIC}:7", "kafka-topics --describe"),
    ("restore-topic-missing", restore("snap_unknown_topic"), kafka_errors.UnknownTopicOrPartition,
     "No such topic-partition: bad-op-deleted:0", "kafka-topics --describe"),
    ("restore-into-busy-group", restore("snap_busy_lost", group=BUSY), kafka_errors.GroupNotEmpty,
     "has 1 active member(s)", "Stop every instance of the application"),
    ("compare-snapshot-of-another-group", lambda s: KafkaCompareGroupOffsetsOperator(
        task_id="cmp", group_id=STREAMS, snapshot_path=s["snap_good"]),
     SnapshotConflict, "is a snapshot of group 'bad-op-empty', not 'bad-op-streams'", "Use another path"),
    # members
    ("remove-members-unknown-group", lambda s: KafkaRemoveGroupMembersOperator(task_id="rm", group_id="bad-op-ghost",
                                                                          all_members=True),
     kafka_errors.GroupNotFound, "Group 'bad-op-ghost' does not exist", "kafka-groups --list"),
    # an empty selection never widens to every member (issue 31.1): refused when the DAG is parsed
    ("remove-members-nobody-named", lambda s: KafkaRemoveGroupMembersOperator(task_id="rm", group_id=BUSY),
     kafka_errors.InvalidArgument, "names no member to remove of group 'bad-op-busy': an empty selection never means every "
                        "member", "or all_members=True to remove every member"),
    ("remove-members-every-member-and-ids", lambda s: KafkaRemoveGroupMembersOperator(
        task_id="rm", group_id=BUSY, all_members=True, instance_ids=["busy-0"]),
     kafka_errors.InvalidArgument, "is given member_ids / instance_ids and all_members=True",
     "Give member_ids / instance_ids, or departed_of, or all_members=True"),
    ("remove-members-every-member-as-text", lambda s: KafkaRemoveGroupMembersOperator(task_id="rm", group_id=BUSY,
                                                                                 all_members="si"),
     kafka_errors.InvalidArgument, "all_members must be true or false, not 'si'", "Pass all_members=True or all_members=False"),
    ("remove-members-ids-as-string", lambda s: KafkaRemoveGroupMembersOperator(task_id="rm", group_id=BUSY,
                                                                          member_ids="busy-member-1"),
     kafka_errors.InvalidArgument, "member_ids must be a list of ids, not the string 'busy-member-1'",
     "Pass a list, e.g. member_ids=['busy-member-1']"),
    ("remove-members-of-streams-group", lambda s: KafkaRemoveGroupMembersOperator(task_id="rm", group_id=STREAMS,
                                                                             all_members=True),
     kafka_errors.WrongGroupType, "is a streams group: the broker rejects LeaveGroup", "Stop the application's instances"),
    # protocol direction (the preflight's verdict) and its inputs
    ("migrate-consumer-group-to-streams", preflight("classic_to_streams", EMPTY), None,
     "group_type: a consumer (KIP-848) group", "roll it back to classic first (consumer_to_classic)"),
    ("migrate-streams-group-to-consumer", preflight("classic_to_consumer", STREAMS), None,
     "group_type: a streams group", "Mode classic_to_consumer does not apply to streams groups"),
    ("rollback-streams-group-to-classic", preflight("consumer_to_classic", STREAMS), None,
     "group_type: a streams group", "Mode consumer_to_classic does not apply to streams groups"),
    ("preflight-empty-group-id", preflight("classic_to_streams", ""), kafka_errors.InvalidGroupId,
     "mode classic_to_streams needs a group_id", "Pass the group id"),
    # sensors: bad input ends the wait at once instead of poking until the timeout
    ("sensor-empty-group-id", poke(KafkaGroupStateSensor, "", states=["Stable"]), kafka_errors.InvalidGroupId,
     "The group id is empty", "Pass the group id"),
    ("lag-sensor-unknown-group", poke(KafkaGroupLagSensor, "bad-op-ghost", max_lag=0), kafka_errors.GroupNotFound,
     "Group 'bad-op-ghost' does not exist", "kafka-groups --list"),
    # issue 14: guard flags that are neither true nor false (refused when the DAG is parsed)
    ("config-dry-run-typo", cfg(EMPTY, {"consumer.session.timeout.ms": 20000}, dry_run="ture"), kafka_errors.InvalidArgument,
     "dry_run must be true or false, not 'ture'", "Pass dry_run=True or dry_run=False"),
    ("feature-dry-run-typo", feature("group.version", 0, action="disable", dry_run="yes!"), kafka_errors.InvalidArgument,
     "dry_run must be true or false", "Pass dry_run=True"),
    ("feature-unsafe-typo", feature("group.version", 0, action="disable", unsafe="nope"), kafka_errors.InvalidArgument,
     "unsafe must be true or false, not 'nope'", "Pass unsafe=True"),
    ("restore-dry-run-none", restore("snap_good", dry_run=None), kafka_errors.InvalidArgument,
     "dry_run must be true or false, not None", "Pass dry_run=True"),
    ("config-allow-absent-typo", cfg(TYPO, {"consumer.session.timeout.ms": 20000}, allow_absent_group="si"),
     kafka_errors.InvalidArgument, "allow_absent_group must be true or false", "Pass allow_absent_group=True"),
    ("feature-action-typo", feature("group.version", 0, action="downgade"), kafka_errors.InvalidArgument,
     "action must be one of upgrade, downgrade, disable, not 'downgade'", "Fix the task's arguments"),
    # a group config for a group the cluster does not know
    ("config-mistyped-group", cfg(TYPO, {"consumer.session.timeout.ms": 20000}), kafka_errors.GroupNotFound,
     "Group 'bad-op-emtpy' does not exist on this cluster; similar ids: 'bad-op-empty'", "allow_absent_group=True"),
    ("config-group-with-blank", cfg(EMPTY + " ", {"consumer.session.timeout.ms": 20000}), kafka_errors.InvalidGroupId,
     "leading or trailing whitespace", "Did you mean 'bad-op-empty'?"),
    ("snapshot-group-with-newline", lambda s: KafkaSnapshotGroupOffsetsOperator(task_id="snap", group_id=EMPTY + "\n",
                                                                           path=str(s["work"] / "nl.json")),
     kafka_errors.InvalidGroupId, "leading or trailing whitespace", "Remove the blanks"),
    # a snapshot of another cluster
    ("restore-snapshot-of-another-cluster", restore("snap_other_cluster"), kafka_errors.SnapshotFromOtherCluster,
     "on cluster AnotherClusterId00000w, but this connection reaches cluster", "allow_other_cluster=True"),
    ("compare-snapshot-of-another-cluster", lambda s: KafkaCompareGroupOffsetsOperator(
        task_id="cmp", group_id=EMPTY, snapshot_path=s["snap_other_cluster"]),
     kafka_errors.SnapshotFromOtherCluster, "on cluster AnotherClusterId00000w", "allow_other_cluster=True"),
    # lowering a group-protocol feature under live groups
    ("feature-disable-group-version-under-live-consumer", feature("group.version", 0, action="disable"),
     kafka_errors.FeatureInUse, "'bad-op-busy' (1 member(s))", "override_dependent_groups=True"),
    ("feature-downgrade-streams-version-under-streams-group", feature("streams.version", 0, action="downgrade"),
     kafka_errors.FeatureInUse, "streams group(s) depend on it", "override_dependent_groups=True"),
    ("preflight-downgrade-feature-reports-dependents", lambda s: KafkaMigrationPreflightOperator(
        task_id="preflight", mode="downgrade_feature", feature="group.version"), None,
     "dependent_groups: Disable of group.version 1 -> 0 refused", "override_dependent_groups=True"),
    # parse-time checks of sensors
    ("sensor-state-not-a-kafka-state", poke(KafkaGroupStateSensor, EMPTY, states=["Done"]), kafka_errors.InvalidArgument,
     "'Done' is not a Kafka group state", "Use one of: Stable, Empty"),
    ("sensor-negative-settle", poke(KafkaGroupEmptySensor, EMPTY, settle_seconds=-5), kafka_errors.InvalidArgument,
     "settle_seconds must be a number from 0 to 604,800, not -5", "Fix the task's arguments"),
    ("sensor-lag-as-words", poke(KafkaGroupLagSensor, EMPTY, max_lag="lots"), kafka_errors.InvalidArgument,
     "max_lag must be a whole number from 0 to 9,223,372,036,854,775,807, not 'lots'", "Fix the task's arguments"),
    ("sensor-zero-expected-members", poke(KafkaGroupMigratedSensor, EMPTY, expected_members=0), kafka_errors.InvalidArgument,
     "expected_members must be a whole number from 1 to 2,147,483,647, not 0", "Fix the task's arguments"),
    # a Streams application's topology that is not Kafka Streams' Topology#describe() text
    ("topology-not-a-description", lambda s: KafkaStreamsTopologyCheckOperator(
        task_id="x", application_id=STREAMS, topology="the app reads orders and writes counts"), kafka_errors.InvalidArgument,
     "cannot be read at line 1: 'the app reads orders and writes counts'", "Topology#describe() output"),
    # where the artifacts go, and which connection
    ("snapshot-unwritable-location", lambda s: KafkaSnapshotGroupOffsetsOperator(
        task_id="snap", group_id=EMPTY, path=str(s["work"] / "good.json" / "under-a-file.json")),
     kafka_errors.ArtifactUnwritable, "Cannot write", "writable by the Airflow worker"),
    ("unknown-connection-id", cfg(EMPTY, {"consumer.session.timeout.ms": 20000}, kafka_conn_id="kafka_prod_typo"),
     kafka_errors.ConnectionNotFound, "There is no Airflow connection 'kafka_prod_typo'", "fix kafka_conn_id"),
    # issue 31, class 3: settings that cannot apply (a group config of another type, arguments an action ignores,
    # offsets on topics the group no longer reads)
    ("config-streams-key-on-consumer-group", cfg(EMPTY, {"streams.num.standby.replicas": 1}), kafka_errors.ConfigNotApplicable,
     "these configs apply to another group type, so they would be stored and never apply: "
     "streams.num.standby.replicas (streams)", "pass that type as for_group_type"),
    ("config-consumer-key-on-streams-group", cfg(STREAMS, {"consumer.session.timeout.ms": 20000}),
     kafka_errors.ConfigNotApplicable, "consumer.session.timeout.ms (consumer)", "for_group_type"),
    ("config-consumer-key-on-streams-group-cli", cfg(STREAMS, {"consumer.session.timeout.ms": 20000}, backend="cli"),
     kafka_errors.ConfigNotApplicable, "consumer.session.timeout.ms (consumer)", "for_group_type"),
    ("config-share-key-on-consumer-group", cfg(BUSY, {"share.isolation.level": "read_committed"}),
     kafka_errors.ConfigNotApplicable, "share.isolation.level (share)", "for_group_type"),
    ("config-absent-group-of-two-types", cfg(TYPO, {"consumer.session.timeout.ms": 20000,
                                                    "streams.num.standby.replicas": 1}, allow_absent_group=True),
     kafka_errors.ConfigNotApplicable, "does not exist yet, and these configs are for different group types",
     "name it with for_group_type"),
    ("config-absent-group-other-type-than-named", cfg(TYPO, {"streams.num.standby.replicas": 1},
                                                      allow_absent_group=True, for_group_type="consumer"),
     kafka_errors.ConfigNotApplicable, "(for_group_type=consumer)", "for_group_type"),
    ("config-for-group-type-typo", cfg(EMPTY, {"consumer.session.timeout.ms": 20000}, for_group_type="consumr"),
     kafka_errors.InvalidArgument, "for_group_type must be one of classic, consumer, streams, share", "Pass for_group_type="),
    ("feature-disable-with-a-level", feature("streams.version", 1, action="disable"), kafka_errors.InvalidFeatureLevel,
     "A disable of streams.version takes no level", "use action='downgrade' with level=1"),
    ("feature-upgrade-unsafe", feature("streams.version", 1, unsafe=True), kafka_errors.InvalidArgument,
     "an upgrade of streams.version ignores it", "Drop unsafe"),
    ("feature-upgrade-with-dependants-override", feature("group.version", 1, override_dependent_groups=True),
     kafka_errors.InvalidArgument, "takes no group's protocol away", "Drop override_dependent_groups"),
    ("feature-override-on-metadata-version", feature("metadata.version", "4.2-IV0", action="downgrade",
                                                     allow_empty_dependent_groups=True),
     kafka_errors.InvalidArgument, "no group type depends on metadata.version", "Drop allow_empty_dependent_groups"),
    ("restore-topics-the-group-no-longer-reads", restore("snap_unread"), kafka_errors.SnapshotTopicsNotRead,
     f"on {OTHER_TOPIC}, which the group no longer reads: it has committed offsets only on {TOPIC}",
     "pass allow_unread_topics=True"),
    ("restore-topics-the-group-no-longer-reads-cli", restore("snap_unread", backend="cli"), kafka_errors.SnapshotTopicsNotRead,
     f"on {OTHER_TOPIC}, which the group no longer reads", "allow_unread_topics=True"),
]


@pytest.mark.parametrize("make_task, error, what, remedy", [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_bad_input_fails_the_task_clearly_and_changes_nothing(scene, kafka_conn, make_task, error, what, remedy):
    with KafkaAdmin(ClientSettings(scene["bootstrap"])) as observer:
        before = fingerprint(observer)
        try:
            task = make_task(scene)
        except kafka_errors.Kip848Error as refused:  # visible without the cluster: refused when the DAG is parsed
            cause: BaseException | None = refused
            message = str(refused)
        else:
            with pytest.raises(AirflowFailException) as failed:
                task.execute({"ti": RecordingTI()})
            message = str(failed.value)
            cause = failed.value.__cause__
        assert what in message
        assert remedy in message
        if error is None:  # the task's own verdict (a preflight failure), not an error of the admin layer
            assert not isinstance(cause, kafka_errors.Kip848Error)
        else:
            assert type(cause) is error, f"{type(cause).__name__}: {cause}"
            assert isinstance(cause, kafka_errors.Kip848Error)
            assert not cause.retriable, "bad input is not retried"
            assert cause.remedy and message.endswith(cause.remedy), "the message ends with what to do"
        assert fingerprint(observer) == before, "a refused task changes nothing on the broker"


@pytest.mark.parametrize("build, fragment", [
    pytest.param(lambda: KafkaGroupConfigOperator(task_id="x", group_id=EMPTY, backend="jvm"),
                 "backend must be one of ('native', 'cli'), not 'jvm'", id="operator-unknown-backend"),
    pytest.param(lambda: KafkaMigrationPreflightOperator(task_id="x", mode="classic_to_share", group_id=EMPTY),
                 "mode must be one of classic_to_consumer", id="preflight-unknown-mode"),
    pytest.param(lambda: KafkaGroupTypeSensor(task_id="x", group_id=EMPTY, group_type="kip848"),
                 "group_type 'kip848' is not classic, consumer, streams or share", id="sensor-unknown-group-type"),
])
def test_bad_arguments_fail_when_the_dag_is_parsed(build, fragment):
    """Mistakes visible without the cluster stop the DAG file from loading, with the allowed values."""
    with pytest.raises(ValueError) as err:
        build()
    assert fragment in str(err.value)
