"""Group actions against real consumers and a real Kafka Streams app (native backend unless stated)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from airflow_provider_kip848.kafka.errors import GroupNotEmpty, GroupNotFound, MemberNotFound, WrongGroupType
from airflow_provider_kip848.kafka.model import GroupType, MemberProtocol, StreamsTask
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import ConsumerProcess, consume, create_topics, produce
from tests.conftest import wait_until


def _member(bootstrap, group, topic, protocol, client, tmp_path, **kw):
    return ConsumerProcess.start(bootstrap, group, [topic], protocol=protocol, client_id=client,
                                 log_file=str(tmp_path / f"{client}.log"), **kw)


def _stable(native, group, members):
    desc = native.describe_consumer_group(group)
    ok = desc.state == "Stable" and len(desc.members) == members and all(
        m.target_assignment is None or m.target_assignment == m.assignment for m in desc.members)
    return desc if ok else None


def test_online_upgrade_is_detected_member_by_member(native, cli, bootstrap, unique, tmp_path):
    topic, group = unique("roll"), unique("roll-group")
    create_topics(bootstrap, {topic: 6})
    produce(bootstrap, topic, (f"v{i}" for i in range(60)))
    members = [_member(bootstrap, group, topic, "classic", f"c{i}", tmp_path) for i in range(3)]
    try:
        desc = wait_until(lambda: _stable(native, group, 3), what="3 classic members stable")
        assert desc.type is GroupType.CLASSIC and not desc.is_mixed
        seen = []
        for i in range(3):
            members[i].stop()  # rolling restart: this instance comes back with group.protocol=consumer
            members[i] = _member(bootstrap, group, topic, "consumer", f"c{i}", tmp_path)
            desc = wait_until(lambda: _stable(native, group, 3), what=f"group stable after rolling member {i}")
            protocols = {m.client_id: m.protocol for m in desc.members}
            seen.append((desc.type, desc.is_mixed, sum(p is MemberProtocol.CLASSIC for p in protocols.values())))
            assert protocols[f"c{i}"] is MemberProtocol.CONSUMER
            assert cli.describe_consumer_group(group).classic_members == desc.classic_members
        assert seen == [(GroupType.CONSUMER, True, 2), (GroupType.CONSUMER, True, 1), (GroupType.CONSUMER, False, 0)]
    finally:
        for m in members:
            m.stop()


def test_wordcount_streams_group_state_members_and_tasks(kafka, native, cli, bootstrap, unique):
    app_id = unique("wc")
    create_topics(bootstrap, {WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    app = kafka.start_wordcount(app_id)
    try:
        produce(bootstrap, WORDCOUNT_INPUT_TOPIC, ["describe me"])
        desc = wait_until(lambda: (d := native.describe_streams_group(app_id)).state == "Stable" and d.members
                          and d.members[0].assignment == d.members[0].target_assignment and d,
                          what="streams group stable")
        (member,) = desc.members
        assert member.protocol is MemberProtocol.STREAMS and member.member_epoch == desc.group_epoch
        assert set(member.assignment.active) == {StreamsTask(s, p) for s in ("0", "1") for p in (0, 1)}
        assert member.process_id and member.client_id.startswith(app_id)
        # the same through both backends, but the member's host: kafka-streams-groups prints none (the native
        # backend reads StreamsGroupDescribe's ClientHost)
        described = native.describe_streams_group(app_id)
        assert all(m.host for m in described.members)
        assert cli.describe_streams_group(app_id) == replace(
            described, members=tuple(replace(m, host="") for m in described.members))
        assert native.describe_group(app_id).type is GroupType.STREAMS
        with pytest.raises(WrongGroupType, match="is a streams group"):
            native.describe_consumer_group(app_id)
        with pytest.raises(WrongGroupType, match="broker rejects LeaveGroup for streams groups"):
            native.remove_members(app_id, all_members=True)
        assert len(native.describe_streams_group(app_id).members) == 1, "nothing was removed"
    finally:
        app.stop()
    desc = wait_until(lambda: (d := native.describe_streams_group(app_id)).state == "Empty" and d,
                      what="streams group empty after the app closed")
    assert desc.members == ()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_crashed_members_are_removed_without_waiting_for_the_session(native, bootstrap, unique, tmp_path, protocol):
    topic, group = unique("crash"), unique(f"crash-{protocol}")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, [b"a", b"b"])
    if protocol == "consumer":  # the session of consumer groups is broker-side: make it long for this group
        native.alter_group_config(group, {"consumer.session.timeout.ms": 60000, "consumer.heartbeat.interval.ms": 500},
            allow_absent_group=True)
    members = [
        _member(bootstrap, group, topic, protocol, "dyn", tmp_path, session_timeout_ms=60000),
        _member(bootstrap, group, topic, protocol, "static", tmp_path, session_timeout_ms=60000, instance_id="static-1"),
    ]
    wait_until(lambda: _stable(native, group, 2), what="two members stable")
    for m in members:
        m.kill()  # crash: no LeaveGroup; the broker keeps them for the 60 s session
    desc = native.describe_consumer_group(group)
    assert len(desc.members) == 2
    removal = native.remove_members(group, all_members=True)
    assert sorted(removal.removed) == sorted([desc.members[0].instance_id or desc.members[0].member_id,
                                              desc.members[1].instance_id or desc.members[1].member_id])
    assert "static-1" in removal.removed and not removal.failed
    emptied = wait_until(lambda: (d := native.describe_consumer_group(group)).state == "Empty" and d, timeout=15,
                         what="group empty right after the removal (well before the 60 s session timeout)")
    assert emptied.members == ()
    again = native.remove_members(group, all_members=True)
    assert again.removed == () and not again.failed


def test_remove_chosen_member_only(native, bootstrap, unique, tmp_path):
    topic, group = unique("chosen"), unique("chosen-group")
    create_topics(bootstrap, {topic: 2})
    members = [_member(bootstrap, group, topic, "classic", f"m{i}", tmp_path, session_timeout_ms=60000,
                       instance_id=f"inst-{i}") for i in range(2)]
    try:
        wait_until(lambda: _stable(native, group, 2), what="two static members")
        members[0].kill()
        removal = native.remove_members(group, instance_ids=["inst-0"])
        assert removal.removed == ("inst-0",)
        desc = wait_until(lambda: _stable(native, group, 1), what="one member left")
        assert [m.instance_id for m in desc.members] == ["inst-1"]
        with pytest.raises(MemberNotFound, match="Not a member of group .*: 'ghost'"):
            native.remove_members(group, member_ids=["ghost"])
        with pytest.raises(MemberNotFound, match="'inst-I' \\(similar ids: 'inst-1'\\)"):  # a typo'd instance id
            native.remove_members(group, instance_ids=["inst-I"])
        assert len(native.describe_consumer_group(group).members) == 1
        assert native.remove_members(group, member_ids=["ghost"], missing_ok=True).not_found == ("ghost",)
        # removed by an earlier try of the caller (its audit intent says so): gone, as it should be
        assert native.remove_members(group, instance_ids=["inst-0"], expected_gone=["inst-0"]).not_found == ("inst-0",)
    finally:
        for m in members:
            m.stop()


@pytest.mark.parametrize("backend", ["native", "cli"])
def test_delete_group_only_when_empty(request, backend, bootstrap, unique, tmp_path):
    admin = request.getfixturevalue(backend)
    topic, group = unique("del"), unique("del-group")
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, [b"x"])
    member = _member(bootstrap, group, topic, "consumer", "live", tmp_path)
    try:
        wait_until(lambda: request.getfixturevalue("native").describe_group(group).state == "Stable", what="member")
        with pytest.raises(GroupNotEmpty):
            admin.delete_group(group)
        assert admin.group_listing(group).group_id == group
    finally:
        member.stop()
    wait_until(lambda: request.getfixturevalue("native").describe_group(group).state == "Empty", what="empty")
    admin.delete_group(group)
    with pytest.raises(GroupNotFound):
        admin.group_listing(group)


def test_offsets_cannot_be_altered_while_members_are_active(native, cli, bootstrap, unique, tmp_path):
    from airflow_provider_kip848.kafka.model import TopicPartition

    topic, group = unique("busy"), unique("busy-group")
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, [b"1", b"2", b"3"])
    consume(bootstrap, group, [topic], 3, group_protocol="consumer")
    member = _member(bootstrap, group, topic, "consumer", "busy", tmp_path)
    try:
        wait_until(lambda: native.describe_group(group).state == "Stable", what="member joined")
        for backend in (native, cli):
            with pytest.raises(GroupNotEmpty, match="can only be changed while it is empty"):
                backend.alter_group_offsets(group, {TopicPartition(topic, 0): 0})
        assert native.group_offsets(group).committed == {TopicPartition(topic, 0): 3}
    finally:
        member.stop()
