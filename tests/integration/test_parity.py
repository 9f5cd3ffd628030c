"""Native vs CLI backend on the same real broker: equal results for every shared action."""

from __future__ import annotations

from dataclasses import replace

import pytest

from airflow_provider_kip848.kafka.cli.backend import KafkaCli
from airflow_provider_kip848.kafka.cli.tools import KafkaTools
from airflow_provider_kip848.kafka.model import GroupType, TopicPartition
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import ConsumerProcess, consume, create_topics, produce
from kip848_harness.kafka_cluster import LocalKafka
from tests.conftest import start_or_fail, wait_until


@pytest.fixture(scope="module")
def feature_cluster(tmp_path_factory, kafka_version, pytestconfig):
    """A broker of its own: feature levels are cluster-wide and these tests change them."""
    broker = LocalKafka(tmp_path_factory.mktemp("features"), version=kafka_version, die_with_parent=True)
    start_or_fail(broker, pytestconfig)
    yield broker
    broker.stop()


def test_features_describe_parity(native, cli):
    assert native.describe_features() == cli.describe_features()


def test_feature_upgrade_downgrade_parity(feature_cluster, kafka_version):
    settings = ClientSettings(feature_cluster.bootstrap_servers)
    native, cli = KafkaAdmin(settings), KafkaCli(settings, KafkaTools(version=kafka_version))
    results = {}
    try:
        for name, backend, other in (("native", native, cli), ("cli", cli, native)):
            dry = backend.update_feature("streams.version", 0, action="downgrade", dry_run=True)
            assert other.describe_features().level("streams.version") == 1, "a dry run changed nothing"
            down = backend.update_feature("streams.version", 0, action="downgrade")
            assert other.describe_features().level("streams.version") == 0
            again = backend.update_feature("streams.version", 0, action="downgrade")
            up = backend.update_feature("streams.version", 1, action="upgrade")
            assert other.describe_features().level("streams.version") == 1
            results[name] = (dry, down, again, up)
    finally:
        native.update_feature("streams.version", 1)
        native.close()
    assert results["native"] == results["cli"]
    dry, down, again, up = results["native"]
    assert (dry.applied, dry.message) == (False, "streams.version can be downgraded to 0.")
    assert (down.applied, down.from_level, down.to_level) == (True, 1, 0)
    assert again.noop and not again.applied
    assert (up.applied, up.message) == (True, "streams.version was upgraded to 1.")


def test_group_config_set_describe_delete_parity(native, cli, unique):
    outcomes = {}
    for name, backend in (("native", native), ("cli", cli)):
        group = unique(f"cfg-{name}")
        # configs of one group type (a group that does not exist yet is pre-configured for the type they are of)
        applied = backend.alter_group_config(group, {"consumer.session.timeout.ms": 10000,
                                                     "consumer.heartbeat.interval.ms": 3000}, allow_absent_group=True)
        repeated = backend.alter_group_config(group, {"consumer.session.timeout.ms": "10000"}, allow_absent_group=True)
        dry = backend.alter_group_config(group, {"consumer.session.timeout.ms": 12000}, dry_run=True,
            allow_absent_group=True)
        deleted = backend.alter_group_config(group, delete_configs=["consumer.session.timeout.ms"],
            allow_absent_group=True)
        deleted_again = backend.alter_group_config(group, delete_configs=["consumer.session.timeout.ms"],
            allow_absent_group=True)
        assert native.describe_group_config(group) == cli.describe_group_config(group)
        outcomes[name] = [replace(c, group_id="G") for c in (applied, repeated, dry, deleted, deleted_again)]
    assert outcomes["native"] == outcomes["cli"]
    applied, repeated, dry, deleted, deleted_again = outcomes["native"]
    assert applied.applied and applied.after == {"consumer.session.timeout.ms": "10000",
                                                 "consumer.heartbeat.interval.ms": "3000"}
    assert (applied.group_type, applied.for_group_type) == (None, "consumer")
    assert applied.before == {}
    assert not repeated.applied and repeated.after == repeated.before
    assert dry.dry_run and not dry.applied and dry.after == dry.before
    assert deleted.applied and deleted.after == {"consumer.heartbeat.interval.ms": "3000"}
    assert not deleted_again.applied


@pytest.fixture
def group_zoo(kafka, bootstrap, unique, tmp_path):
    """Running groups of every kind: classic (static + dynamic), consumer, mixed, empty, streams."""
    topic = unique("zoo")
    create_topics(bootstrap, {topic: 4, WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    produce(bootstrap, topic, (f"v{i}" for i in range(40)), keys=(f"k{i}" for i in range(40)))
    names = {k: unique(k) for k in ("classic", "consumer", "mixed", "empty", "streams")}
    procs = []

    def member(group, protocol, client, **kw):
        procs.append(ConsumerProcess.start(bootstrap, group, [topic], protocol=protocol, client_id=client,
                                           log_file=str(tmp_path / f"{client}.log"), **kw))

    member(names["classic"], "classic", "cl-dyn")
    member(names["classic"], "classic", "cl-static", instance_id="cl-static-1")
    member(names["consumer"], "consumer", "co-1")
    member(names["consumer"], "consumer", "co-2", instance_id="co-static-2")
    member(names["mixed"], "classic", "mx-classic")
    consume(bootstrap, names["empty"], [topic], 40, group_protocol="consumer")
    app = kafka.start_wordcount(names["streams"])
    try:
        admin = KafkaAdmin(ClientSettings(bootstrap))
        wait_until(lambda: len(admin.describe_group(names["mixed"]).members) == 1, what="mixed group's classic member")
        member(names["mixed"], "consumer", "mx-consumer")
        produce(bootstrap, WORDCOUNT_INPUT_TOPIC, ["zoo animals"])
        expected = {"classic": 2, "consumer": 2, "mixed": 2, "streams": 1}
        for key, count in expected.items():
            wait_until(lambda key=key, count=count: _settled(admin.describe_group(names[key]), count),
                       what=f"{key} group stable with {count} members")
        admin.close()
        yield names
    finally:
        for p in procs:
            p.stop()
        app.stop()


def _settled(desc, members: int) -> bool:
    if desc.state != "Stable" or len(desc.members) != members:
        return False
    return all(m.target_assignment is None or m.target_assignment == m.assignment for m in desc.members)


def _eventually_equal(fetch_native, fetch_cli, attempts: int = 3):
    """Compare the two backends' views; a rebalance between the two reads is retried, not hidden."""
    for _ in range(attempts):
        a, b = fetch_native(), fetch_cli()
        if a == b:
            return a, b
    return a, b


def test_group_list_describe_and_offsets_parity(native, cli, group_zoo):
    listed_native = {g.group_id: g for g in native.list_groups()}
    listed_cli = {g.group_id: g for g in cli.list_groups()}
    for key, group in group_zoo.items():
        assert listed_native[group] == listed_cli[group], key
    assert listed_native[group_zoo["classic"]].type is GroupType.CLASSIC
    assert listed_native[group_zoo["mixed"]].type is GroupType.CONSUMER
    assert listed_native[group_zoo["streams"]].type is GroupType.STREAMS

    for key in ("classic", "consumer", "mixed", "empty"):
        group = group_zoo[key]
        a, b = _eventually_equal(lambda g=group: native.describe_consumer_group(g),
                                 lambda g=group: cli.describe_consumer_group(g))
        assert a == b, key
        a, b = _eventually_equal(lambda g=group: native.group_offsets(g), lambda g=group: cli.group_offsets(g))
        assert a == b, key
        assert all(p.log_start == 0 and p.log_end is not None for p in a.partitions)
    # kafka-streams-groups prints no member host (StreamsGroupDescribe has ClientHost: the native backend fills it,
    # the CLI backend leaves it empty); everything else is the same
    hosts: list[str] = []

    def native_without_host():
        d = native.describe_streams_group(group_zoo["streams"])
        hosts[:] = [m.host for m in d.members]
        return replace(d, members=tuple(replace(m, host="") for m in d.members))

    a, b = _eventually_equal(native_without_host, lambda: cli.describe_streams_group(group_zoo["streams"]))
    assert a == b
    assert hosts and all(hosts) and not any(m.host for m in b.members)
    a, b = native.group_offsets(group_zoo["streams"]), cli.group_offsets(group_zoo["streams"])
    strip = lambda offsets: [(p.topic, p.partition, p.committed, p.log_end) for p in offsets.partitions]  # noqa: E731
    assert strip(a) == strip(b)

    classic = native.describe_consumer_group(group_zoo["classic"])
    assert {m.client_id: m.instance_id for m in classic.members} == {"cl-dyn": None, "cl-static": "cl-static-1"}
    mixed = native.describe_consumer_group(group_zoo["mixed"])
    assert mixed.is_mixed and [m.client_id for m in mixed.classic_members] == ["mx-classic"]


def test_offsets_restore_parity(native, cli, bootstrap, unique):
    topic = unique("restore")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, (f"r{i}" for i in range(20)), keys=(f"k{i}" for i in range(20)))
    results = []
    for backend in (native, cli):
        group = unique("restore-group")
        consume(bootstrap, group, [topic], 20, group_protocol="consumer")
        before = backend.group_offsets(group)
        target = {TopicPartition(p.topic, p.partition): p.committed // 2 for p in before.partitions}
        dry = backend.alter_group_offsets(group, target, dry_run=True)
        assert dry.committed == before.committed
        after = backend.alter_group_offsets(group, target)
        assert after.committed == target
        results.append(replace(after, group_id="G"))
    assert results[0] == results[1]
