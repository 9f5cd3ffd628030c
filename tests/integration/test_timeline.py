"""A group's timeline looked at on the real broker: a classic consumer stopped, records left waiting, the
application restarted on the consumer protocol. The looks are the provider's own reads; what they give is
checked against what the test did and saw itself."""

from __future__ import annotations

import threading
import time

from airflow_provider_kip848.kafka.api import observe_group
from airflow_provider_kip848.kafka.model import GroupState, GroupType, TopicPartition
from airflow_provider_kip848.kafka.timeline import Timeline
from airflow_provider_kip848.testing.clients import ConsumerProcess, create_topics, produce
from tests.conftest import wait_until


class Looker(threading.Thread):
    """Looks at the group every ``interval`` seconds into a timeline (as the observing trigger will)."""

    def __init__(self, native, group_id: str, timeline: Timeline, interval: float = 0.3) -> None:
        super().__init__(daemon=True)
        self.native, self.group_id, self.timeline, self.interval = native, group_id, timeline, interval
        self.stop_event, self.error, self.lock = threading.Event(), None, threading.Lock()

    def summary(self):
        with self.lock:
            return self.timeline.summary()

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                look = observe_group(self.native, self.group_id)
                with self.lock:
                    self.timeline.add(look)
                self.stop_event.wait(self.interval)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            self.error = exc


def test_a_look_reads_type_state_members_and_offsets(native, bootstrap, unique, tmp_path):
    topic, group = unique("tl"), unique("tl-g")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, (f"v{i}" for i in range(10)), partition=0)
    member = ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id="tl-0",
                                   log_file=str(tmp_path / "c.log"))
    try:
        wait_until(lambda: native.group_offsets(group).committed.get(_tp(topic, 0)) == 10, timeout=90,
                   what="the member has committed the 10 records")
        look = observe_group(native, group)
        assert look.known and (look.type, look.state, dict(look.members)) == (
            GroupType.CLASSIC, GroupState.STABLE, {"classic": 1})
        assert look.committed[f"{topic}:0"] == 10 and look.log_end[f"{topic}:0"] == 10
    finally:
        member.stop()
    gone = observe_group(native, unique("never-there"))
    assert gone.known and (gone.type, gone.state, dict(gone.members)) == (GroupType.UNKNOWN, GroupState.DEAD, {})


def test_an_offline_move_gives_its_gap_settling_and_type_change(native, bootstrap, unique, tmp_path):
    topic, group = unique("tl"), unique("tl-move")
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, (f"a{i}" for i in range(5)), partition=0)
    old = ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id="tl-old",
                                log_file=str(tmp_path / "old.log"))
    tp = _tp(topic, 0)
    wait_until(lambda: native.group_offsets(group).committed.get(tp) == 5, timeout=90, what="5 committed")
    timeline = Timeline(target_type=GroupType.CONSUMER, expected_members=1)
    looker = Looker(native, group, timeline)
    looker.start()
    try:
        wait_until(lambda: looker.summary().looks >= 3, what="a few looks of the running group")
        old.stop()  # leaves the group
        wait_until(lambda: native.describe_group(group).state is GroupState.EMPTY, what="the group Empty")
        produce(bootstrap, topic, (f"b{i}" for i in range(5)), partition=0)
        waiting_from = time.time()  # records wait from here on
        wait_until(lambda: looker.summary().gaps.get(f"{topic}:0") is not None, what="a look sees them waiting")
        restarted_at = time.time()
        new = ConsumerProcess.start(bootstrap, group, [topic], protocol="consumer", client_id="tl-new",
                                    log_file=str(tmp_path / "new.log"))
        try:
            wait_until(lambda: native.group_offsets(group).committed.get(tp) == 10, timeout=90, what="10 committed")
            committed_seen_at = time.time()
            wait_until(lambda: (s := looker.summary()).stable_on_target_at is not None
                       and not s.gaps[f"{topic}:0"].open, timeout=60, what="a look sees it settled and moving")
        finally:
            new.stop()
    finally:
        looker.stop_event.set()
        looker.join(10)
        old.stop()
    assert looker.error is None, looker.error
    s = timeline.summary()
    res = s.resolution_s
    assert res is not None and s.unknown_looks == 0
    assert s.first_member_left_at is not None and s.empty_at is not None and s.stable_on_target_at is not None
    assert s.first_member_left_at <= s.empty_at <= s.stable_on_target_at
    assert s.type_changes == 1 and s.rebalances_seen >= 2  # the conversion and the consumer member's epoch
    gap = s.gaps[f"{topic}:0"]
    # the stall began when the records started waiting (seen at the next look) and ended when the new member's
    # commit was seen: within one look interval of what the test saw itself
    assert waiting_from - res <= gap.started_at <= restarted_at + res
    assert restarted_at < gap.ended_at <= committed_seen_at + res
    assert gap.seconds >= restarted_at - waiting_from - res
    assert s.longest_gap is not None and s.longest_gap.partition == f"{topic}:0"


def _tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)
