"""Issue 31, class 3, on the real session broker: what an explicit override lets through, and only that.

The refusals themselves (a config of another group type, a feature argument an action ignores, a restore onto
topics the group no longer reads, each with nothing changed) are cases of
``tests/integration/test_bad_operator_input.py``. Here: a classic group takes no group config until the caller
names the type it is becoming (as the migrations do), on both backends; a restore onto a topic the group no longer
reads is applied with ``allow_unread_topics`` and audited; a group that lost every offset gets them all back.
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_kip848.changecontrol.audit import read_audit
from airflow_provider_kip848.kafka import errors as kafka_errors
from airflow_provider_kip848.kafka.api import take_snapshot
from airflow_provider_kip848.kafka.model import TopicPartition
from airflow_provider_kip848.operators.offsets import KafkaRestoreGroupOffsetsOperator
from kip848_harness.clients import create_topics, produce


@pytest.mark.parametrize("backend", ["native", "cli"])
def test_a_classic_group_takes_configs_only_for_the_type_it_is_becoming(native, cli, unique, backend):
    admin = native if backend == "native" else cli
    topic, group = unique("cls-t"), unique("cls")
    create_topics(native.settings.bootstrap_servers, {topic: 1})
    native.alter_group_offsets(group, {TopicPartition(topic, 0): 0})  # a commit makes an empty classic group
    assert native.group_listing(group).type.value == "classic"
    wanted = {"consumer.session.timeout.ms": 30000}
    for given in ({}, {"for_group_type": "streams"})[:2 if backend == "native" else 1]:  # the tools are slow
        with pytest.raises(kafka_errors.ConfigNotApplicable):
            admin.alter_group_config(group, wanted, **given)
    assert native.describe_group_config(group).dynamic == {}, "a refused change sends nothing"
    dry = admin.alter_group_config(group, wanted, dry_run=True, for_group_type="consumer")
    assert (dry.group_type, dry.for_group_type, dry.applied) == ("classic", "consumer", False)
    done = admin.alter_group_config(group, wanted, for_group_type="consumer")
    assert done.applied and done.after == {"consumer.session.timeout.ms": "30000"}
    assert (done.group_type, done.for_group_type) == ("classic", "consumer")
    # removing a setting is always allowed, whatever its type
    gone = admin.alter_group_config(group, delete_configs=["consumer.session.timeout.ms"])
    assert gone.applied and native.describe_group_config(group).dynamic == {}


def test_restore_onto_a_topic_the_group_no_longer_reads_needs_the_override_and_is_audited(
        native, kafka_conn, unique, tmp_path, context):
    read, dropped, group = unique("read"), unique("dropped"), unique("moved-on")
    create_topics(native.settings.bootstrap_servers, {read: 1, dropped: 1})
    for topic in (read, dropped):
        produce(native.settings.bootstrap_servers, topic, [b"a", b"b", b"c"])
    native.alter_group_offsets(group, {TopicPartition(read, 0): 2, TopicPartition(dropped, 0): 3})
    snapshot = take_snapshot(native, group)
    path = tmp_path / "before.json"
    path.write_text(snapshot.to_json())
    # the application stops reading `dropped`: its offsets go (as they expire once nobody subscribes)
    native.delete_group(group)
    native.alter_group_offsets(group, {TopicPartition(read, 0): 2})

    def restore(**kw):
        return KafkaRestoreGroupOffsetsOperator(task_id="restore", group_id=group, snapshot_path=str(path),
                                           audit_log=str(tmp_path / "audit.jsonl"), **kw).execute(context)

    with pytest.raises(Exception) as refused:
        restore()
    assert isinstance(refused.value.__cause__, kafka_errors.SnapshotTopicsNotRead), refused.value
    assert native.group_offsets(group).committed == {TopicPartition(read, 0): 2}, "nothing was written"
    assert not (tmp_path / "audit.jsonl").exists()

    result = restore(allow_unread_topics=True)
    assert result["unread_topics"] == [dropped] and result["restored"] == {f"{dropped}:0": 3}
    assert native.group_offsets(group).committed == {TopicPartition(read, 0): 2, TopicPartition(dropped, 0): 3}
    kinds = {r["kind"]: r for r in read_audit(str(tmp_path / "audit.jsonl"))}
    assert json.dumps(kinds["restore_unread_topics"]["after"]) == json.dumps([dropped])

    # a group that lost every offset (gone): nothing tells what it reads, so everything it had comes back
    native.delete_group(group)
    result = restore()
    assert result["unread_topics"] == [] and len(result["restored"]) == 2
    assert native.group_offsets(group).committed == snapshot.committed
