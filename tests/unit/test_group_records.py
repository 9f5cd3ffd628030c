"""Decoding the group coordinator's records (bytes laid out as Kafka 4.3.1 writes them)."""

from __future__ import annotations

import struct

import pytest

from airflow_provider_kip848.kafka.group_records import (
    GroupRecordUnreadable,
    RecordType,
    decode,
    key_group,
    record_type,
)


def s16(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def compact(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def offset_key(group: str, topic: str, partition: int, kind: int = 1) -> bytes:
    return struct.pack(">h", kind) + s16(group) + s16(topic) + struct.pack(">i", partition)


def test_an_offset_commit_gives_group_partition_and_offset_in_every_version():
    for version in range(5):
        value = struct.pack(">hq", version, 1234) + b"rest-of-the-value-ignored"
        r = decode(offset_key("g", "t", 3), value, 17.5)
        assert r is not None and (r.type, r.group_id, r.topic, r.partition, r.offset, r.at, r.deleted) == (
            RecordType.OFFSET_COMMIT, "g", "t", 3, 1234, 17.5, False)
    gone = decode(offset_key("g", "t", 3, kind=0), None, 1.0)
    assert gone is not None and gone.deleted and gone.offset is None and gone.type is RecordType.LEGACY_OFFSET_COMMIT


def test_a_classic_group_metadata_gives_generation_and_members_non_flexible_and_flexible():
    key = struct.pack(">h", 2) + s16("app")
    v3 = (struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 7) + s16("range") + s16("m-1")
          + struct.pack(">q", 99) + struct.pack(">i", 2) + b"members...")
    r = decode(key, v3, 5.0)
    assert r is not None and (r.type, r.epoch, r.members) == (RecordType.GROUP_METADATA, 7, 2)
    v4 = (struct.pack(">h", 4) + compact("consumer") + struct.pack(">i", 8) + compact(None) + compact(None)
          + struct.pack(">q", 99) + bytes([0 + 1]) + b"\x00")
    r = decode(key, v4, 6.0)
    assert r is not None and (r.epoch, r.members) == (8, 0)
    v0 = struct.pack(">h", 0) + s16("consumer") + struct.pack(">i", 1) + s16(None) + s16(None) + struct.pack(">i", 0)
    r = decode(key, v0, 6.0)
    assert r is not None and (r.epoch, r.members) == (1, 0)


def consumer_member_value(classic: bool) -> bytes:
    """ConsumerGroupMemberMetadataValue v0 (flexible); a classic member carries tagged field 0."""
    body = (struct.pack(">h", 0) + compact(None) + compact("rack-1") + compact("client-1") + compact("/10.0.0.1")
            + bytes([2 + 1]) + compact("in") + compact("other") + compact(None) + struct.pack(">i", 30000)
            + compact("uniform"))
    if not classic:  # 4.3.1 writes tag 0 with a null marker (0) for a consumer-protocol member
        return body + bytes([1, 0, 1, 0])
    tagged = (b"\x01" + struct.pack(">i", 45000) + bytes([1 + 1]) + compact("range") + bytes([3 + 1]) + b"abc"
              + b"\x00" + b"\x00")
    return body + bytes([1, 0, len(tagged)]) + tagged


def test_consumer_and_streams_groups_give_their_epoch_and_member_changes():
    for kind in (RecordType.CONSUMER_GROUP_METADATA, RecordType.STREAMS_GROUP_METADATA,
                 RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
                 RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA):
        r = decode(struct.pack(">h", kind) + s16("app"), struct.pack(">hi", 0, 12) + b"...", 3.0)
        assert r is not None and (r.type, r.epoch) == (kind, 12)
    without_tag = consumer_member_value(False)[:-4] + b"\x00"  # no tagged field at all: consumer too
    for kind, value, protocol in ((RecordType.CONSUMER_GROUP_MEMBER_METADATA, consumer_member_value(False), "consumer"),
                                  (RecordType.CONSUMER_GROUP_MEMBER_METADATA, without_tag, "consumer"),
                                  (RecordType.CONSUMER_GROUP_MEMBER_METADATA, consumer_member_value(True), "classic"),
                                  (RecordType.STREAMS_GROUP_MEMBER_METADATA, b"\x00\x00anything", "streams")):
        key = struct.pack(">h", kind) + s16("app") + s16("member-a")
        joined, left = decode(key, value, 1.0), decode(key, None, 2.0)
        assert joined is not None and left is not None
        assert (joined.member_id, joined.deleted, joined.protocol, left.deleted) == ("member-a", False, protocol, True)
    for kind, stable in ((RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, 0),
                         (RecordType.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, 1)):
        key = struct.pack(">h", kind) + s16("app") + s16("m")
        for state in (0, 1, 2):
            r = decode(key, struct.pack(">hiib", 0, 7, 6, state) + b"tasks...", 1.0)
            assert r is not None and (r.member_id, r.epoch, r.reconciled) == ("m", 7, state == stable)


def test_the_streams_type_ids_are_the_key_classes_api_keys_not_the_enum_ordinals():
    # CoordinatorRecordType of 4.3.1: ids 9 and 18 are retired, so StreamsGroupMetadata is 17 (its ordinal is
    # 16, and 16 is ConsumerGroupRegularExpression)
    assert (RecordType.STREAMS_GROUP_METADATA, RecordType.STREAMS_GROUP_MEMBER_METADATA,
            RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA,
            RecordType.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT) == (17, 19, 20, 22)
    regex = struct.pack(">h", 16) + s16("app") + s16("in-.*")
    assert decode(regex, b"\x00\x00whatever", 1.0) is None and key_group(regex) == "app"
    assert key_group(struct.pack(">h", 23) + s16("app")) == "app"  # a topology record: still the group's


def test_other_types_are_skipped_and_broken_known_ones_refused():
    assert decode(struct.pack(">h", 7) + s16("app") + s16("m"), b"\x00\x00", 1.0) is None  # a target assignment
    with pytest.raises(GroupRecordUnreadable, match="CURRENT_MEMBER_ASSIGNMENT"):
        decode(struct.pack(">h", 8) + s16("app") + s16("m"), b"\x00\x00", 1.0)  # truncated
    assert decode(struct.pack(">h", 99) + b"xx", b"", 1.0) is None
    assert decode(b"\x00", b"", 1.0) is None and record_type(None) is None
    with pytest.raises(GroupRecordUnreadable, match="OFFSET_COMMIT"):
        decode(offset_key("g", "t", 0), struct.pack(">h", 9) + b"\x00" * 8, 1.0)  # a version this reader lacks
    with pytest.raises(GroupRecordUnreadable):
        decode(struct.pack(">h", 3) + s16("app"), b"\x00", 1.0)  # truncated
    assert key_group(offset_key("grp", "t", 1)) == "grp" and key_group(b"\x00\x63zz") is None


def commit(at: float, offset: int, partition: int = 0, topic: str = "t"):
    from airflow_provider_kip848.kafka.group_records import GroupRecord

    return GroupRecord(RecordType.OFFSET_COMMIT, "g", at, topic=topic, partition=partition, offset=offset)


def test_a_stall_runs_from_the_waiting_records_arrival_to_the_commit_past_it():
    from airflow_provider_kip848.kafka.group_records import commit_stalls

    # commits every second, then offset 10 committed at 5 and repeated (auto-commit) until 12 moves it on
    records = [commit(t, t * 2) for t in range(6)] + [commit(t, 10) for t in range(6, 12)] + [commit(12, 14)]
    arrivals = {(("t", 0, c)): 1000.0 for c in range(0, 20)}
    arrivals[("t", 0, 10)] = 7.5  # the record at offset 10 was produced at 7.5: it waited 7.5 -> 12
    asked: list = []

    def arrival(topic, partition, offset):
        asked.append(offset)
        return arrivals.get((topic, partition, offset))

    stall = commit_stalls(records, arrival)["t:0"]
    assert (stall.seconds, stall.started_at, stall.ended_at, stall.exact, stall.open) == (4.5, 7.5, 12, True, False)
    assert asked[0] == 10 and len(asked) <= 2  # the longest candidate first; the rest cannot beat it


def test_a_record_already_waiting_at_the_commit_starts_the_stall_at_the_commit():
    from airflow_provider_kip848.kafka.group_records import commit_stalls

    stall = commit_stalls([commit(0, 5), commit(9, 8)], lambda *_: -100.0)["t:0"]
    assert (stall.started_at, stall.seconds) == (0, 9)


def test_an_unknown_arrival_is_an_upper_bound_and_an_uncommitted_tail_is_open():
    from airflow_provider_kip848.kafka.group_records import commit_stalls

    stalls = commit_stalls([commit(0, 5), commit(4, 8), commit(1, 3, partition=1)], lambda *_: None,
                           log_end={("t", 0): 8, ("t", 1): 6}, until=20.0)
    assert (stalls["t:0"].seconds, stalls["t:0"].exact, stalls["t:0"].open) == (4, False, False)
    assert (stalls["t:1"].seconds, stalls["t:1"].open) == (19, True)  # offset 3 of 6 never committed past


def test_a_reset_back_starts_over_and_deleted_offsets_are_ignored():
    from airflow_provider_kip848.kafka.group_records import GroupRecord, commit_stalls

    records = [commit(0, 10), commit(1, 2), commit(3, 4),
               GroupRecord(RecordType.OFFSET_COMMIT, "g", 2, True, topic="t", partition=0)]
    stall = commit_stalls(records, lambda *_: None)["t:0"]
    assert (stall.started_at, stall.ended_at) == (1, 3)  # from the reset, not from the first commit


def test_a_groups_history_counts_rebalances_types_and_the_first_member_leaving():
    from airflow_provider_kip848.kafka.group_records import GroupRecord, group_history

    R = RecordType
    records = [
        GroupRecord(R.GROUP_METADATA, "g", 1, epoch=4, members=2),
        commit(1.5, 10),
        GroupRecord(R.GROUP_METADATA, "g", 2, epoch=5, members=1),  # one member left: a rebalance
        GroupRecord(R.GROUP_METADATA, "g", 3, epoch=6, members=0),  # Empty
        GroupRecord(R.CONSUMER_GROUP_METADATA, "g", 5, epoch=1),  # converted on the first consumer join
        GroupRecord(R.CONSUMER_GROUP_MEMBER_METADATA, "g", 5, member_id="a"),
        GroupRecord(R.CONSUMER_GROUP_METADATA, "g", 6, epoch=2),
        GroupRecord(R.CONSUMER_GROUP_METADATA, "g", 6.5, epoch=2),  # rewritten, same epoch: no rebalance
        GroupRecord(R.CONSUMER_GROUP_MEMBER_METADATA, "g", 9, True, member_id="a"),
    ]
    h = group_history(records)
    assert (h.rebalances, h.types, h.first_member_left_at, h.classic_empty_at) == (
        5, ("classic", "consumer"), 2, 3)
    assert group_history([]).to_dict() == {"records": 0, "rebalances": 0, "types": [], "first_member_left_at": None,
                                           "classic_empty_at": None, "stable_on_target_at": None, "states": []}
    streams = group_history([GroupRecord(R.STREAMS_GROUP_MEMBER_METADATA, "g", 4, True, member_id="x"),
                             GroupRecord(R.STREAMS_GROUP_METADATA, "g", 4.1, epoch=7)])
    assert (streams.first_member_left_at, streams.rebalances, streams.types) == (4, 1, ("streams",))


def test_a_classic_group_stopped_at_once_needs_its_members_before_the_window():
    from airflow_provider_kip848.kafka.group_records import GroupRecord, group_history

    empty = [GroupRecord(RecordType.GROUP_METADATA, "g", 3, epoch=6, members=0)]  # 2 -> 0 in one rebalance
    assert group_history(empty).first_member_left_at is None  # the records alone do not show who was there
    h = group_history(empty, members_before=2)
    assert (h.first_member_left_at, h.classic_empty_at) == (3, 3)


def test_the_states_follow_the_coordinators_rules_through_an_offline_and_an_online_move():
    from airflow_provider_kip848.kafka.group_records import GroupRecord, group_history

    R = RecordType

    def meta(kind, at, epoch, **kw):
        return GroupRecord(kind, "g", at, epoch=epoch, **kw)

    def member(at, mid, protocol="consumer", deleted=False, kind=R.CONSUMER_GROUP_MEMBER_METADATA):
        return GroupRecord(kind, "g", at, deleted, member_id=mid, protocol=None if deleted else protocol)

    def assign(at, mid, epoch, ok, kind=R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT):
        return GroupRecord(kind, "g", at, member_id=mid, epoch=epoch, reconciled=ok)

    offline = [
        GroupRecord(R.GROUP_METADATA, "g", 2, epoch=6, members=0),  # both stopped at once: Empty
        GroupRecord(R.GROUP_METADATA, "g", 5, True),  # the empty classic group deleted on the first heartbeat
        meta(R.CONSUMER_GROUP_METADATA, 5, 1), member(5, "a"),
        meta(R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, 5, 1), assign(5, "a", 1, True),
        meta(R.CONSUMER_GROUP_METADATA, 6, 2), member(6, "b"),  # b joins: epoch 2, target not yet
        meta(R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, 6.2, 2), assign(6.2, "a", 2, False),  # a revokes
        assign(6.2, "b", 2, False),
        assign(7, "a", 2, True), assign(7.5, "b", 2, True),
    ]
    h = group_history(offline, members_before=2, state_before="Stable", target="consumer")
    assert [(p.at, p.type, p.state, p.members) for p in h.states] == [
        (2, "classic", "Empty", {}), (5, "consumer", "Stable", {"consumer": 1}),
        (6, "consumer", "Assigning", {"consumer": 2}), (6.2, "consumer", "Reconciling", {"consumer": 2}),
        (7.5, "consumer", "Stable", {"consumer": 2})]
    # the first member left at 2 (2 -> 0); Stable with one member at 5 is already "Stable on consumer"
    assert (h.first_member_left_at, h.stable_on_target_at, h.settle_s, h.types) == (2, 5, 3, ("classic", "consumer"))

    online = [  # the first consumer member converts the live classic group: its classic members come along
        GroupRecord(R.GROUP_METADATA, "g", 10, True),
        meta(R.CONSUMER_GROUP_METADATA, 10, 8), member(10, "c1", "classic"), member(10, "c2", "classic"),
        member(10, "n1"), meta(R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, 10, 8),
        assign(10, "c1", 8, True), assign(10, "c2", 8, True), assign(10, "n1", 8, True),
        member(12, "c1", deleted=True), meta(R.CONSUMER_GROUP_METADATA, 12, 9),  # the next instance rolls
        meta(R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, 12, 9), assign(12, "c2", 9, True),
        assign(12, "n1", 9, True), member(13, "n2"), meta(R.CONSUMER_GROUP_METADATA, 13, 10),
        meta(R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, 13, 10), assign(13, "n2", 10, False),
        assign(13, "c2", 10, True), assign(13, "n1", 10, True), member(14, "c2", deleted=True),
        assign(14.5, "n2", 10, True),
    ]
    h = group_history(online, members_before=2, state_before="Stable", target="consumer")
    assert [(p.at, p.state, p.members) for p in h.states] == [
        (10, "Stable", {"classic": 2, "consumer": 1}), (12, "Stable", {"classic": 1, "consumer": 1}),
        (13, "Reconciling", {"classic": 1, "consumer": 2}), (14, "Reconciling", {"consumer": 2}),
        (14.5, "Stable", {"consumer": 2})]
    assert (h.first_member_left_at, h.stable_on_target_at, h.rebalances) == (12, 14.5, 3)
    assert h.types == ("classic", "consumer")  # the classic group's own record predates the window: from the facts


def test_a_state_is_unknown_until_the_records_show_it_never_guessed():
    from airflow_provider_kip848.kafka.group_records import GroupRecord, group_history

    R = RecordType
    # a streams group that existed before the window: a member's record, no epochs seen
    h = group_history([GroupRecord(R.STREAMS_GROUP_MEMBER_METADATA, "g", 1, member_id="m", protocol="streams")],
                      target="streams")
    assert [(p.type, p.state, p.members) for p in h.states] == [("streams", None, None)]  # others unseen
    assert h.stable_on_target_at is None and h.settle_s is None
    assert group_history([GroupRecord(R.GROUP_METADATA, "g", 1, epoch=3, members=2)]).states[0].state == "Stable"
    # without members_before, the classic group before its first record is not known
    assert group_history([], target="classic").states == ()
    # a group that did not exist before the window is seen whole from its first record
    born = group_history([GroupRecord(R.STREAMS_GROUP_METADATA, "g", 1, epoch=1),
                          GroupRecord(R.STREAMS_GROUP_MEMBER_METADATA, "g", 1, member_id="m", protocol="streams"),
                          GroupRecord(R.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, "g", 1, epoch=1),
                          GroupRecord(R.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, "g", 1, member_id="m", epoch=1,
                                      reconciled=True)], state_before="Dead", target="streams")
    assert [(p.state, p.members) for p in born.states] == [("Stable", {"streams": 1})]
