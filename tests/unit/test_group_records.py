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


def test_consumer_and_streams_groups_give_their_epoch_and_member_changes():
    for kind in (RecordType.CONSUMER_GROUP_METADATA, RecordType.STREAMS_GROUP_METADATA):
        r = decode(struct.pack(">h", kind) + s16("app"), struct.pack(">hi", 0, 12) + b"...", 3.0)
        assert r is not None and (r.type, r.epoch) == (kind, 12)
    for kind in (RecordType.CONSUMER_GROUP_MEMBER_METADATA, RecordType.STREAMS_GROUP_MEMBER_METADATA):
        key = struct.pack(">h", kind) + s16("app") + s16("member-a")
        joined, left = decode(key, b"\x00\x00anything", 1.0), decode(key, None, 2.0)
        assert joined is not None and left is not None
        assert (joined.member_id, joined.deleted, left.deleted) == ("member-a", False, True)


def test_other_types_are_skipped_and_broken_known_ones_refused():
    assert decode(struct.pack(">h", 8) + s16("app") + s16("m"), b"\x00\x00", 1.0) is None  # an assignment
    assert decode(struct.pack(">h", 99) + b"xx", b"", 1.0) is None
    assert decode(b"\x00", b"", 1.0) is None and record_type(None) is None
    with pytest.raises(GroupRecordUnreadable, match="OFFSET_COMMIT"):
        decode(offset_key("g", "t", 0), struct.pack(">h", 9) + b"\x00" * 8, 1.0)  # a version this reader lacks
    with pytest.raises(GroupRecordUnreadable):
        decode(struct.pack(">h", 3) + s16("app"), b"\x00", 1.0)  # truncated
    assert key_group(offset_key("grp", "t", 1)) == "grp" and key_group(b"\x00\x63zz") is None
