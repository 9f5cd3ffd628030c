"""Rules for changing committed offsets, shared by both backends.

Committed offsets are the only state that survives a protocol switch, so a
restore must never race live members (the broker would refuse, or a member
would immediately commit over it) and must never point outside the log (the
consumer would reset by ``auto.offset.reset`` and silently skip or replay).
"""

from __future__ import annotations

from collections.abc import Mapping

from airflow_provider_kip848.kafka.errors import GroupNotEmpty, InvalidOffset
from airflow_provider_kip848.kafka.model import ConsumerGroupDescription, StreamsGroupDescription, TopicPartition


def require_empty(desc: ConsumerGroupDescription | StreamsGroupDescription) -> None:
    if not desc.is_empty:
        raise GroupNotEmpty(
            f"Group {desc.group_id!r} has {len(desc.members)} active member(s) ({desc.state}); committed offsets "
            "can only be changed while it is empty."
        )


def require_inside_log(
    offsets: Mapping[TopicPartition, int], bounds: Mapping[TopicPartition, tuple[int | None, int | None]]
) -> None:
    """Every offset within [log start, log end] of its partition (end included: "consume from the next record")."""
    for tp, offset in sorted(offsets.items()):
        lo, hi = bounds[tp]
        if (lo is not None and offset < lo) or (hi is not None and offset > hi):
            raise InvalidOffset(f"Offset {offset} for {tp} is outside the log ({lo}..{hi}).")
