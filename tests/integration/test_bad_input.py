"""Bad input against the real broker: each case raises its specific error, says what to do, and changes nothing."""

from __future__ import annotations

import socket

import pytest

from airflow_provider_kip848.kafka import errors as kafka_errors
from airflow_provider_kip848.kafka.cli.backend import KafkaCli
from airflow_provider_kip848.kafka.cli.tools import KafkaTools
from airflow_provider_kip848.kafka.model import TopicPartition
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings, InvalidClientSettings
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import ConsumerProcess, consume, create_topics, produce
from tests.conftest import wait_until


@pytest.fixture(scope="module")
def scene(kafka, tmp_path_factory):
    """An empty consumer group with commits, a busy one, and a running streams app, shared by all cases."""
    bootstrap = kafka.bootstrap_servers
    topic = "bad-input-topic"
    create_topics(bootstrap, {topic: 2, WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    produce(bootstrap, topic, (f"v{i}" for i in range(10)), keys=(f"k{i}" for i in range(10)))
    consume(bootstrap, "bad-input-empty", [topic], 10, group_protocol="consumer")
    consume(bootstrap, "bad-input-busy", [topic], 10, group_protocol="consumer")
    logs = tmp_path_factory.mktemp("bad-input")
    busy = ConsumerProcess.start(bootstrap, "bad-input-busy", [topic], protocol="consumer", client_id="busy",
                                 log_file=str(logs / "busy.log"))
    app = kafka.start_wordcount("bad-input-streams")
    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        # a config for the fingerprint to watch (of another type than the group's: named, as issue 31 requires)
        admin.alter_group_config("bad-input-empty", {"streams.num.standby.replicas": 1}, for_group_type="streams")
        wait_until(lambda: admin.describe_group("bad-input-busy").state == "Stable", what="busy group")
        wait_until(lambda: admin.describe_group("bad-input-streams").state == "Stable", what="streams group")
    yield {"topic": topic, "empty": "bad-input-empty", "busy": "bad-input-busy", "streams": "bad-input-streams"}
    busy.stop()
    app.stop()


@pytest.fixture(scope="module")
def backends(kafka, kafka_version):
    """One client per backend for every case (the native one also takes the fingerprints): a client per case only
    bootstrapped its metadata again."""
    settings = ClientSettings(kafka.bootstrap_servers)
    with KafkaAdmin(settings) as native:
        yield {"native": native, "cli": KafkaCli(settings, KafkaTools(version=kafka_version))}


def fingerprint(admin: KafkaAdmin, scene) -> tuple:
    """What the cases must not change: feature levels, the groups' configs, committed offsets, members."""
    features = {n: f.finalized_level for n, f in admin.describe_features().features.items()}
    configs = {g: admin.describe_group_config(scene[g]).dynamic for g in ("empty", "busy")}
    # a config applied to a mistyped id would land here (Kafka accepts configs for any group id)
    configs.update({g: admin.describe_group_config(g).dynamic for g in TYPO_IDS})
    # the groups these cases could create (their ids, mistyped or not); other tests' groups on the session broker
    # change on their own (a member's session expires, a group converts) and are not this test's to judge
    listing = sorted((g.group_id, g.type.value) for g in admin.list_groups()
                     if "bad-input" in g.group_id or g.group_id.strip() in ("", "no-such-group"))
    offsets = {g: admin.group_offsets(scene[g]).committed for g in ("empty", "busy")}
    members = {g: len(admin.describe_group(scene[g]).members) for g in ("empty", "busy", "streams")}
    return features, configs, offsets, members, listing


#: group ids a user mistypes for bad-input-empty (one letter swapped; a Cyrillic "е")
TYPO_IDS = ("bad-input-emtpy", "bad-input-\u0435mpty")
T = lambda topic, p: TopicPartition(topic, p)  # noqa: E731

# (case id, backends, action(admin, scene), error class, fragment of the message)
CASES = [
    ("unknown-group-describe", "both", lambda a, s: a.describe_group("no-such-group"), kafka_errors.GroupNotFound, "no-such-group"),
    ("unknown-group-offsets", "both", lambda a, s: a.group_offsets("no-such-group"), kafka_errors.GroupNotFound, "does not exist"),
    ("unknown-feature", "both", lambda a, s: a.update_feature("bogus.version", 1), kafka_errors.InvalidFeatureLevel, "not known"),
    ("feature-level-too-high", "both", lambda a, s: a.update_feature("streams.version", 7), kafka_errors.InvalidFeatureLevel,
     "supports 0..1"),
    ("feature-level-not-a-number", "both", lambda a, s: a.update_feature("group.version", "one"), kafka_errors.InvalidFeatureLevel,
     "is not a number"),
    ("upgrade-that-lowers", "both", lambda a, s: a.update_feature("group.version", 0), kafka_errors.InvalidFeatureLevel,
     "would lower it"),
    ("downgrade-that-raises", "both", lambda a, s: a.update_feature("transaction.version", 3, action="downgrade"),
     kafka_errors.InvalidFeatureLevel, "not supported"),
    ("metadata-version-unknown-name", "both", lambda a, s: a.update_feature("metadata.version", "9.9-IV0"),
     kafka_errors.InvalidFeatureLevel, "is not a number"),
    ("config-unknown-name", "both", lambda a, s: a.alter_group_config(s["empty"], {"consumer.session.timeout": 1}),
     kafka_errors.ConfigUnknown, "is not a group config"),
    ("config-above-broker-max", "both", lambda a, s: a.alter_group_config(s["empty"], {"streams.num.standby.replicas": 3}),
     kafka_errors.ConfigOutOfBounds, "group.streams.max.standby.replicas=2"),
    ("config-below-broker-min", "both", lambda a, s: a.alter_group_config(s["empty"], {"consumer.session.timeout.ms": 500}),
     kafka_errors.ConfigOutOfBounds, "group.consumer.min.session.timeout.ms=2000"),
    ("config-not-an-integer", "both", lambda a, s: a.alter_group_config(s["empty"], {"consumer.heartbeat.interval.ms": "5s"}),
     kafka_errors.ConfigOutOfBounds, "is not an integer"),
    ("config-session-not-above-heartbeat", "both",
     lambda a, s: a.alter_group_config(s["empty"], {"consumer.heartbeat.interval.ms": 3000,
                                                    "consumer.session.timeout.ms": 3000}),
     kafka_errors.ConfigOutOfBounds, "must be greater than consumer.heartbeat.interval.ms"),
    ("config-bad-enum", "both", lambda a, s: a.alter_group_config(s["empty"], {"share.isolation.level": "dirty"}),
     kafka_errors.ConfigOutOfBounds, "must be one of"),
    ("config-set-and-delete", "both",
     lambda a, s: a.alter_group_config(s["empty"], {"streams.num.standby.replicas": 0}, ["streams.num.standby.replicas"]),
     kafka_errors.InvalidGroupConfig, "both set and deleted"),
    ("config-batch-refused-whole", "both",
     lambda a, s: a.alter_group_config(s["empty"], {"consumer.session.timeout.ms": 20000, "streams.num.standby.replicas": 9}),
     kafka_errors.ConfigOutOfBounds, "streams.num.standby.replicas=9"),
    ("streams-group-as-consumer-group", "both", lambda a, s: a.describe_consumer_group(s["streams"]),
     kafka_errors.WrongGroupType, "not a"),
    ("consumer-group-as-streams-group", "both", lambda a, s: a.describe_streams_group(s["empty"]),
     kafka_errors.WrongGroupType, "not a streams group"),
    ("offsets-on-busy-group", "both", lambda a, s: a.alter_group_offsets(s["busy"], {T(s["topic"], 0): 0}),
     kafka_errors.GroupNotEmpty, "can only be changed while it is empty"),
    ("offset-beyond-log-end", "both", lambda a, s: a.alter_group_offsets(s["empty"], {T(s["topic"], 0): 10_000}),
     kafka_errors.InvalidOffset, "outside the log"),
    ("offset-unknown-partition", "both", lambda a, s: a.alter_group_offsets(s["empty"], {T(s["topic"], 9): 0}),
     kafka_errors.UnknownTopicOrPartition, f"{'bad-input-topic'}:9"),
    ("delete-busy-group", "both", lambda a, s: a.delete_group(s["busy"]), kafka_errors.GroupNotEmpty, ""),
    ("delete-unknown-group", "both", lambda a, s: a.delete_group("no-such-group"), kafka_errors.GroupNotFound, "no-such-group"),
    ("remove-members-of-streams-group", "native", lambda a, s: a.remove_members(s["streams"], all_members=True),
     kafka_errors.WrongGroupType, "rejects LeaveGroup"),
    ("remove-unknown-member", "native", lambda a, s: a.remove_members(s["busy"], member_ids=["ghost-member"]),
     kafka_errors.GroupNotFound, "ghost-member"),
    # guard flags at the typed API: a real bool or an error, never a guess (issue 14)
    ("config-dry-run-as-text", "both",
     lambda a, s: a.alter_group_config(s["empty"], {"consumer.session.timeout.ms": 20000}, dry_run="false"),
     kafka_errors.InvalidArgument, "dry_run must be a bool (True or False), not str 'false'"),
    ("feature-dry-run-as-text", "both", lambda a, s: a.update_feature("share.version", 1, dry_run="yes"),
     kafka_errors.InvalidArgument, "dry_run must be a bool"),
    ("feature-unsafe-as-text", "both",
     lambda a, s: a.update_feature("group.version", action="disable", dry_run=True, unsafe="no"),
     kafka_errors.InvalidArgument, "unsafe must be a bool"),
    ("offsets-dry-run-as-number", "both", lambda a, s: a.alter_group_offsets(s["empty"], {T(s["topic"], 0): 0},
                                                                             dry_run=1),
     kafka_errors.InvalidArgument, "dry_run must be a bool"),
    ("remove-members-all-as-text", "native", lambda a, s: a.remove_members(s["busy"], all_members="yes"),
     kafka_errors.InvalidArgument, "all_members must be a bool"),
    ("remove-members-nobody-named", "native", lambda a, s: a.remove_members(s["busy"]),
     kafka_errors.InvalidArgument, "names no member: an empty selection never means every member"),
    ("remove-members-empty-lists", "native", lambda a, s: a.remove_members(s["busy"], member_ids=[], instance_ids=()),
     kafka_errors.InvalidArgument, "names no member: an empty selection never means every member"),
    ("inventory-empty-group-ids", "native", lambda a, s: a.inventory(group_ids=[]),
     kafka_errors.InvalidArgument, "group_ids is empty, it names no group"),
    ("remove-members-every-member-and-ids", "native",
     lambda a, s: a.remove_members(s["busy"], all_members=True, member_ids=["ghost-member"]),
     kafka_errors.InvalidArgument, "all_members=True and ids at once"),
    # group configs for a group the cluster does not know
    ("config-mistyped-group", "both",
     lambda a, s: a.alter_group_config(TYPO_IDS[0], {"consumer.session.timeout.ms": 20000}),
     kafka_errors.GroupNotFound, "Group 'bad-input-emtpy' does not exist on this cluster; similar ids: 'bad-input-empty'"),
    ("config-look-alike-group", "both",
     lambda a, s: a.alter_group_config(TYPO_IDS[1], {"consumer.session.timeout.ms": 20000}),
     kafka_errors.GroupNotFound, "similar ids: 'bad-input-empty'"),
    ("config-group-trailing-blank", "both",
     lambda a, s: a.alter_group_config(s["empty"] + " ", {"consumer.session.timeout.ms": 20000}),
     kafka_errors.InvalidGroupId, "leading or trailing whitespace"),
    ("config-group-zero-width", "both",
     lambda a, s: a.alter_group_config("bad-input-\u200bempty", {"consumer.session.timeout.ms": 20000}),
     kafka_errors.InvalidGroupId, "control or invisible characters (U+200B)"),
    ("offsets-group-leading-blank", "both", lambda a, s: a.group_offsets(" " + s["empty"]),
     kafka_errors.InvalidGroupId, "leading or trailing whitespace"),
    # lowering a group-protocol feature under the groups that need it
    ("disable-group-version-under-live-consumers", "both",
     lambda a, s: a.update_feature("group.version", action="disable"),
     kafka_errors.FeatureInUse, "'bad-input-busy' (1 member(s))"),
    ("validate-disable-group-version-also-refused", "both",
     lambda a, s: a.update_feature("group.version", action="disable", dry_run=True),
     kafka_errors.FeatureInUse, "consumer group(s) depend on it"),
    ("disable-streams-version-under-streams-group", "both",
     lambda a, s: a.update_feature("streams.version", action="disable"),
     kafka_errors.FeatureInUse, "streams group(s) depend on it"),
    # a refusal no rule knows: the broker's words, its retriable flag, never a raw client exception
    ("create-topic-invalid-name", "native", lambda a, s: a.create_topic("bad topic name!"),
     kafka_errors.BrokerRefused, "bad topic name!"),
]


def _cases():
    for case_id, backends, action, error, fragment in CASES:
        for backend in (("native", "cli") if backends == "both" else (backends,)):
            yield pytest.param(backend, action, error, fragment, id=f"{case_id}-{backend}")


@pytest.mark.parametrize("backend, action, error, fragment", list(_cases()))
def test_bad_input_is_refused_and_changes_nothing(backend, action, error, fragment, scene, backends):
    observer = backends["native"]
    before = fingerprint(observer, scene)
    with pytest.raises(error) as err:
        action(backends[backend], scene)
    message = str(err.value)
    assert fragment in message
    assert err.value.remedy and message.endswith(err.value.remedy), "every error says what to do next"
    assert err.value.__cause__ is not err.value, "no error is its own cause"
    assert fingerprint(observer, scene) == before


def test_unreachable_cluster_and_malformed_settings(kafka_version):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with KafkaAdmin(ClientSettings(f"127.0.0.1:{dead}", request_timeout_ms=2000)) as admin:
        with pytest.raises(kafka_errors.KafkaConnectionError, match=f"127.0.0.1:{dead}"):
            admin.describe_features()
    with pytest.raises(kafka_errors.KafkaConnectionError):
        KafkaAdmin(ClientSettings(f"127.0.0.1:{dead}", request_timeout_ms=2000)).describe_cluster()
    # the CLI backend: the same error class, naming the servers, within the same request timeout
    with pytest.raises(kafka_errors.KafkaConnectionError, match=f"no broker at 127.0.0.1:{dead} answered within 2000 ms"):
        KafkaCli(ClientSettings(f"127.0.0.1:{dead}", request_timeout_ms=2000), KafkaTools(version=kafka_version)) \
            .describe_features()
    with pytest.raises(InvalidClientSettings, match="host:port"):
        ClientSettings("kafka.internal")


def test_kip848_disabled_cluster_describes_classic_groups_and_explains_the_rest(fresh_kafka, unique):
    broker = fresh_kafka()
    bootstrap = broker.bootstrap_servers
    topic = unique("t")
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, [b"1"])
    consume(bootstrap, "old-style", [topic], 1, group_protocol="classic")
    consume(bootstrap, "new-style", [topic], 1, group_protocol="consumer")
    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        with pytest.raises(kafka_errors.FeatureInUse, match="'new-style' \\(empty\\)"):  # refused unless overridden
            admin.update_feature("group.version", 0, action="downgrade")
        assert admin.describe_features().level("group.version") == 1
        admin.update_feature("group.version", 0, action="downgrade", override_dependent_groups=True)
        assert admin.describe_consumer_group("old-style").type.value == "classic"
        with pytest.raises(kafka_errors.UnsupportedBrokerVersion) as err:
            admin.describe_consumer_group("new-style")
        assert "Finalize group.version=1" in str(err.value)
        admin.update_feature("streams.version", 0, action="downgrade")
        with pytest.raises((kafka_errors.UnsupportedBrokerVersion, kafka_errors.GroupNotFound)):
            admin.describe_streams_group("new-style")
