"""Which member a reconcile failure points at (issue 46, item 5), on recorded descriptions.

KIP-848's reconciliation: a member that must give partitions up stays at its member epoch, behind the group's
assignment epoch, until its heartbeat stops reporting them owned; a member whose target holds such a partition
moves to the assignment epoch without it and waits. The failure must name the one behind as the one to look at,
and the others as waiting for what it holds. The same rule on a real broker: tests/integration/test_reconciliation.py.
"""

from __future__ import annotations

import pytest

from airflow_provider_kip848.kafka.errors import MemberNotReconciled
from airflow_provider_kip848.kafka.model import (
    ConsumerGroupDescription,
    ConsumerGroupMember,
    GroupType,
    MemberProtocol,
    TopicPartition,
)
from airflow_provider_kip848.kafka.rules.conditions import GroupCondition, WaitState, follow, judge, who_holds_up

P0, P1, P2 = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("orders", 2)
TWO = GroupCondition("migrated", group_type="consumer", min_members=2, reconcile_s=30.0)


def owning(i: int, epoch: int, owned: tuple, target: tuple) -> ConsumerGroupMember:
    return ConsumerGroupMember(f"m{i}", f"app-{i}", f"10.0.0.{i}", assignment=owned, target_assignment=target,
                               member_epoch=epoch, protocol=MemberProtocol.CONSUMER)


def at(epoch: int, *members) -> ConsumerGroupDescription:
    return ConsumerGroupDescription("g", GroupType.CONSUMER, "Reconciling", "uniform", 1, tuple(members),
                                    group_epoch=epoch, target_assignment_epoch=epoch)


def fail(description: ConsumerGroupDescription) -> MemberNotReconciled:
    state = WaitState()
    follow(TWO, judge(TWO, description=description), state, now=0.0)
    with pytest.raises(MemberNotReconciled) as err:
        follow(TWO, judge(TWO, description=description), state, now=30.0)
    return err.value


def test_the_member_behind_the_assignment_epoch_is_named_first_and_the_waiting_one_waits_for_it():
    # the waiting member is listed first: the message still leads with the one behind
    error = fail(at(5, owning(1, 5, (), (P1,)), owning(0, 4, (P0, P1), (P0,))))
    message = str(error)
    assert "look at app-0 on 10.0.0.0 (member epoch 4, assignment epoch 5" in message, message
    assert "app-1 on 10.0.0.1 (member epoch 5, assignment epoch 5, owns 0 of 1 target) waits for orders:1, held by " \
           "the member behind, app-0" in message, message
    assert message.index("look at app-0") < message.index("app-1 on")
    assert [m["client_id"] for m in error.members] == ["app-0", "app-1"]  # type: ignore[attr-defined]


def test_a_partition_held_by_no_listed_member_says_so():
    # the member that held orders:1 left the listing (its session runs out): nobody listed is behind
    words, ordered = who_holds_up(judge(TWO, description=at(5, owning(0, 5, (P0,), (P0,)),
                                                             owning(1, 5, (), (P1,)))).detail["members"], 5)
    assert "waits for orders:1, held by no member listed" in words, words
    assert "look at" not in words and [m["client_id"] for m in ordered] == ["app-1"]


def test_two_members_behind_are_both_named_to_look_at():
    words, ordered = who_holds_up(judge(TWO, description=at(7, owning(0, 6, (P0, P2), (P0,)),
                                                             owning(1, 6, (P1,), (P1, P2)),
                                                             owning(2, 7, (), (P2,)))).detail["members"], 7)
    assert words.startswith("look at app-0 on 10.0.0.0") and "app-1 on 10.0.0.1" in words.split(";")[0], words
    assert "app-2 on 10.0.0.2" in words and "waits for orders:2, held by app-0" not in words \
        and "waits for orders:2, held by the member behind, app-0" in words, words
    assert [m["client_id"] for m in ordered] == ["app-0", "app-1", "app-2"]
