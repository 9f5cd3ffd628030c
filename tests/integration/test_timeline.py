"""A group's timeline looked at on the real broker: a classic consumer stopped, records left waiting, the
application restarted on the consumer protocol. The looks are the provider's own reads; what they give is
checked against what the test did and saw itself."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from airflow.sdk._shared.module_loading import import_string
from airflow.sdk.exceptions import AirflowFailException, TaskDeferred
from airflow.sdk.serde import deserialize, serialize

from airflow_provider_kip848.kafka.api import observe_group
from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.model import GroupState, GroupType, TopicPartition
from airflow_provider_kip848.kafka.timeline import Timeline
from airflow_provider_kip848.operators.timeline import KafkaGroupTimelineOperator
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
    assert s.type_changes == 1 and s.rebalances_seen >= 1  # the conversion (the new group's epoch since)
    gap = s.gaps[f"{topic}:0"]
    # the stall began when the records started waiting (seen at the next look) and ended when the new member's
    # commit was seen: within one look interval of what the test saw itself
    assert waiting_from - res <= gap.started_at <= restarted_at + res
    assert restarted_at < gap.ended_at <= committed_seen_at + res
    assert gap.seconds >= restarted_at - waiting_from - res
    assert s.longest_gap is not None and s.longest_gap.partition == f"{topic}:0"


def _tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


# -- the operator and its trigger, as the triggerer runs them -----------------------------------------------------

def _drive(op, context, first_defer):
    """Run the deferred watch as Airflow does: the trigger rebuilt from its JSON, run to its event, the event
    handed to ``execute_complete``; a ``chunk`` event defers again (the hand-over is exercised)."""
    deferred, handovers = first_defer, 0
    while True:
        classpath, kwargs = deferred.trigger.serialize()
        trigger = import_string(classpath)(**deserialize(serialize(kwargs)))
        event = asyncio.run(_first_event(trigger))
        try:
            return op.execute_complete(context, event=deserialize(serialize(event.payload))), handovers
        except TaskDeferred as again:
            deferred, handovers = again, handovers + 1


async def _first_event(trigger):
    async for event in trigger.run():
        return event
    return None


def test_the_watch_runs_in_the_triggerer_across_hand_overs_until_the_group_settles(kafka_conn, native, bootstrap,
                                                                                      unique, tmp_path, context):
    topic, group = unique("tlop"), unique("tlop-g")
    create_topics(bootstrap, {topic: 2})
    for p in (0, 1):
        produce(bootstrap, topic, (f"a{p}-{i}" for i in range(5)), partition=p)
    old = ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id="tlop-old",
                                log_file=str(tmp_path / "old.log"))
    wait_until(lambda: sum(native.group_offsets(group).committed.values()) == 10, timeout=90, what="10 committed")
    op = KafkaGroupTimelineOperator(task_id="watch", kafka_conn_id=kafka_conn, group_id=group, target_type="consumer",
                                    expected_members=1, max_minutes=3, look_interval=0.3, linger_seconds=1,
                                    chunk_seconds=0.5)
    with pytest.raises(TaskDeferred) as first:
        op.execute(context)
    outcome: dict = {}

    def watch() -> None:
        try:
            outcome["result"], outcome["handovers"] = _drive(op, context, first.value)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    new = None
    try:
        old.stop()
        wait_until(lambda: native.describe_group(group).state is GroupState.EMPTY, what="the group Empty")
        for p in (0, 1):
            produce(bootstrap, topic, (f"b{p}-{i}" for i in range(5)), partition=p)
        new = ConsumerProcess.start(bootstrap, group, [topic], protocol="consumer", client_id="tlop-new",
                                    log_file=str(tmp_path / "new.log"))
        watcher.join(180)
        assert not watcher.is_alive(), "the watch did not end"
    finally:
        old.stop()
        if new is not None:
            new.stop()
    assert "error" not in outcome, outcome.get("error")
    result = outcome["result"]
    assert result["status"] == "settled" and outcome["handovers"] >= 1, (outcome["handovers"], result["summary"])
    s = result["summary"]
    assert s["type_changes"] == 1 and s["settle_s"] is not None and s["settle_s"] > 0
    assert s["first_member_left_at"] <= s["empty_at"] <= s["stable_on_target_at"]
    assert set(s["gaps"]) == {f"{topic}:0", f"{topic}:1"} and not any(g["open"] for g in s["gaps"].values())
    with native as admin:  # the group is where the watch says: consumer, both partitions committed to the end
        assert admin.group_offsets(group).committed == {TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 10}
    assert Timeline.from_dict(result["timeline"]).summary().to_dict() == s


@pytest.mark.parametrize("bad", [{"target_type": "share"}, {"expected_members": 0}, {"max_minutes": "soon"},
                                 {"group_id": " padded "}])
def test_bad_input_fails_before_any_look(kafka_conn, unique, context, bad):
    kwargs = {"task_id": "watch", "kafka_conn_id": kafka_conn, "group_id": unique("g"), "target_type": "consumer",
              **bad}
    try:
        op = KafkaGroupTimelineOperator(**kwargs)
    except InvalidArgument:
        return  # refused when the DAG is parsed
    with pytest.raises(AirflowFailException):
        op.execute(context)
