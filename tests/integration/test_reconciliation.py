"""A member held reconciling fails a migrated wait, named with both epochs (real broker, real consumers).

Two confluent-kafka consumers on the consumer protocol (KIP-848) share a 2-partition topic. The first one's
``on_revoke`` callback blocks when the second joins, so it never acknowledges giving a partition away: the
coordinator keeps it at its old member epoch while the group's assignment epoch moves on, and the second one
cannot own its target partition. Listed, live and on the new protocol, the group would pass a wait that only
counted members; the wait must instead fail after its reconcile bound, naming the member with both epochs
(what ``kafka-consumer-groups --describe --members --verbose`` shows as CURRENT-EPOCH / TARGET-EPOCH), and it must
point at the right process (issue 46): the member *behind* the assignment epoch is the one to look at, and the
other is named as waiting for the partition it holds (the coordinator's UNREVOKED_PARTITIONS and
UNRELEASED_PARTITIONS, which the describe does not carry: read from the epochs and the assignments).
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from confluent_kafka import Consumer

from airflow_provider_kip848.kafka.api import evaluate_condition
from airflow_provider_kip848.kafka.errors import MemberNotReconciled
from airflow_provider_kip848.kafka.rules.conditions import GroupCondition, WaitState, follow
from kip848_harness.clients import create_topics
from tests.conftest import wait_until


class PollingConsumer(threading.Thread):
    """A consumer polling in its own thread; ``hold_revoke`` blocks its on_revoke callback until released."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, *, hold_revoke: bool = False) -> None:
        super().__init__(daemon=True, name=name)
        self.release, self.revoking, self.stop = threading.Event(), threading.Event(), threading.Event()
        self.hold = hold_revoke
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                                  "client.id": name, "auto.offset.reset": "earliest"})
        self.consumer.subscribe([topic], on_revoke=self._on_revoke)

    def _on_revoke(self, consumer, partitions) -> None:
        if self.hold and partitions and not self.stop.is_set():
            self.revoking.set()
            self.release.wait(120)  # held: the coordinator waits for this member to give the partition up

    def run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.2)

    def close(self) -> None:
        self.stop.set()
        self.release.set()
        self.join(30)
        self.consumer.close()


def test_a_member_held_reconciling_fails_the_migrated_wait_naming_both_epochs(native, bootstrap, unique):
    topic, group = unique("reconcile"), unique("reconcile-group")
    create_topics(bootstrap, {topic: 2})
    first = PollingConsumer(bootstrap, group, topic, "held-1", hold_revoke=True)
    second = None
    try:
        first.start()
        wait_until(lambda: (d := native.describe_consumer_group(group)).state == "Stable" and len(d.members) == 1
                   and len(d.members[0].assignment) == 2, what="the first member owns both partitions")
        one = GroupCondition("migrated", group_type="consumer", min_members=1)
        assert follow(one, evaluate_condition(native, group, one), WaitState(), time.time()).met  # reconciled

        second = PollingConsumer(bootstrap, group, topic, "joiner-2")
        second.start()
        assert first.revoking.wait(60), "the coordinator never asked the first member to revoke"
        two = GroupCondition("migrated", group_type="consumer", min_members=2, reconcile_s=3.0)
        state = WaitState()
        verdicts: list[str] = []

        deadline = time.monotonic() + 60
        with pytest.raises(MemberNotReconciled) as failed:  # polled as the sensors poll, until the wait ends
            while time.monotonic() < deadline:
                verdicts.append(follow(two, evaluate_condition(native, group, two), state, time.time()).summary)
                time.sleep(0.5)
        message = str(failed.value)
        desc = native.describe_consumer_group(group)
        held = next(m for m in desc.members if m.client_id == "held-1")
        joiner = next(m for m in desc.members if m.client_id == "joiner-2")
        print("the describe of a member held revoking:", json.dumps(desc.to_dict()))
        assert held.member_epoch < desc.target_assignment_epoch  # still behind, as the error says
        assert f"look at held-1 on {held.host} (member epoch {held.member_epoch}, assignment epoch " \
               f"{desc.target_assignment_epoch}" in message, message
        # the joiner reached the assignment epoch but not its target: it waits for what held-1 has not given up
        assert joiner.member_epoch == desc.target_assignment_epoch, desc
        waited = sorted(str(tp) for tp in set(joiner.target_assignment) - set(joiner.assignment))
        assert waited, desc
        assert f"waits for {', '.join(waited)}, held by the member behind, held-1" in message, message
        assert message.index("look at held-1") < message.index("joiner-2"), message
        assert verdicts and all("not reconciled" in v for v in verdicts), verdicts

        first.release.set()  # the callback returns: both members reconcile and the same wait holds
        again = WaitState()
        wait_until(lambda: follow(two, evaluate_condition(native, group, two), again, time.time()).met, timeout=60,
                   what="both members reconciled once the revocation is acknowledged")
    finally:
        for c in (first, second):
            if c is not None:
                c.close()
