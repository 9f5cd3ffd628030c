"""The waits' memory between polls: members proving they are alive, and an emptied group that must stay empty.

The group coordinator lists a member until its session times out, Stable and with its epoch unchanged, whether its
process runs or crashed a second after joining; and a member that rejoins after the group was seen empty is an
instance that was never stopped. So:

* a ``migrated`` wait with ``liveness_s`` counts a member only once it proved it is alive: progress (a committed
  offset of one of its *current* partitions advanced since it was first seen) or staying listed under the same
  member id through the liveness window. A member that left is forgotten; its next incarnation starts over. The
  verdict is met only when the group's own verdict is and every live member is proven;
* an ``empty`` wait is met after its settle window of empty polls, and a member seen after the group was empty
  (or after this wait forced members out) fails the wait, naming the member as a person looks for it;
* all of it survives the trip through JSON (a deferred trigger carries ``WaitState``).

``now`` is driven explicitly: nothing here sleeps.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from airflow_provider_kip848.kafka.errors import GroupNotEmpty, GroupNotFound
from airflow_provider_kip848.kafka.model import (
    ConsumerGroupDescription,
    ConsumerGroupMember,
    GroupOffsets,
    GroupType,
    MemberProtocol,
    PartitionOffsets,
    TopicPartition,
)
from airflow_provider_kip848.kafka.rules.conditions import (
    ConditionResult,
    GroupCondition,
    WaitState,
    follow,
    judge,
    member_names,
)

LIVENESS_S = 45.0
TWO = GroupCondition("migrated", group_type="consumer", min_members=2, liveness_s=LIVENESS_S)
ONE = GroupCondition("migrated", group_type="consumer", min_members=1, liveness_s=LIVENESS_S)
GROUP_SUMMARY = "type consumer, 2 of 2 live member(s) on the new protocol, 2 expected"


def member(member_id: str, *partitions: str, live: bool = True, client_id: str | None = None) -> dict:
    """A member as ``judge`` details it."""
    return {"member_id": member_id, "client_id": client_id or f"app-{member_id}", "host": f"/10.0.0.{len(member_id)}",
            "instance_id": None, "member_epoch": 7 if live else -2, "protocol": "consumer", "live": live,
            "partitions": list(partitions)}


def poll(*members: dict, committed: dict[str, int] | None = None, met: bool = True) -> ConditionResult:
    """One poll's raw verdict (what ``judge`` gives for a migrated condition, offsets included)."""
    return ConditionResult(met, GROUP_SUMMARY, {"exists": True, "type": "consumer", "state": "Stable",
                                                "members": list(members), "classic_members": 0,
                                                "committed": dict(committed or {})})


# -- liveness -----------------------------------------------------------------------------------------------------


def test_a_member_is_not_proven_at_first_sight():
    state = WaitState()
    verdict = follow(ONE, poll(member("a", "orders:0"), committed={"orders:0": 10}), state, now=100.0)
    assert not verdict.met
    assert verdict.summary == f"{GROUP_SUMMARY}; not yet proven alive: app-a (0.0 of 45 s)"
    assert verdict.detail["proven"] == {}
    assert verdict.detail["unproven"] == [{"since": 100.0, "client_id": "app-a", "host": "/10.0.0.1",
                                           "instance_id": None}]
    assert state.members["a"]["offsets"] == {"orders:0": 10}


def test_a_member_is_proven_by_progress_on_its_own_partition():
    state = WaitState()
    follow(TWO, poll(member("a", "orders:0"), member("b", "orders:1"), committed={"orders:0": 10, "orders:1": 5}),
           state, now=100.0)
    verdict = follow(TWO, poll(member("a", "orders:0"), member("b", "orders:1"),
                               committed={"orders:0": 12, "orders:1": 5}), state, now=105.0)
    assert verdict.detail["proven"] == {"a": "progress"}
    assert not verdict.met
    assert verdict.summary.endswith("not yet proven alive: app-b (5.0 of 45 s)")
    verdict = follow(TWO, poll(member("a", "orders:0"), member("b", "orders:1"),
                               committed={"orders:0": 12, "orders:1": 6}), state, now=106.0)
    assert verdict.met
    assert verdict.summary == f"{GROUP_SUMMARY}; every member proven alive (2 by progress, 0 through the 45 s window)"


def test_a_first_commit_on_a_partition_never_committed_before_is_progress():
    state = WaitState()
    follow(ONE, poll(member("a", "orders:0")), state, now=0.0)
    assert not follow(ONE, poll(member("a", "orders:0")), state, now=1.0).met  # still nothing committed
    assert follow(ONE, poll(member("a", "orders:0"), committed={"orders:0": 1}), state, now=2.0).met


def test_a_commit_that_does_not_advance_proves_nothing():
    state = WaitState()
    follow(ONE, poll(member("a", "orders:0"), committed={"orders:0": 10}), state, now=0.0)
    for now, offset in ((1.0, 10), (2.0, 7)):  # the same offset, then an offset reset backwards
        verdict = follow(ONE, poll(member("a", "orders:0"), committed={"orders:0": offset}), state, now=now)
        assert not verdict.met and verdict.detail["proven"] == {}


def test_progress_on_a_partition_the_member_no_longer_holds_proves_nothing():
    state = WaitState()
    follow(TWO, poll(member("a", "orders:0", "orders:1"), member("b", "orders:2"),
                     committed={"orders:0": 10, "orders:1": 20, "orders:2": 30}), state, now=0.0)
    # a rebalance moved orders:1 to b, which commits on it: that is b's progress, not a's
    moved = poll(member("a", "orders:0"), member("b", "orders:2", "orders:1"),
                 committed={"orders:0": 10, "orders:1": 25, "orders:2": 30})
    verdict = follow(TWO, moved, state, now=5.0)
    assert verdict.detail["proven"] == {}  # b took orders:1 at 25: its baseline there is 25
    assert state.members["b"]["offsets"] == {"orders:2": 30, "orders:1": 25}
    verdict = follow(TWO, poll(member("a", "orders:0"), member("b", "orders:2", "orders:1"),
                               committed={"orders:0": 10, "orders:1": 40, "orders:2": 30}), state, now=6.0)
    assert verdict.detail["proven"] == {"b": "progress"}
    assert not verdict.met and "not yet proven alive: app-a (6.0 of 45 s)" in verdict.summary


def test_a_member_listed_through_the_liveness_window_is_proven():
    state = WaitState()
    members = (member("a", "orders:0"), member("b", "orders:1"))
    committed = {"orders:0": 10, "orders:1": 5}  # an idle topic: nobody commits
    follow(TWO, poll(*members, committed=committed), state, now=1000.0)
    almost = follow(TWO, poll(*members, committed=committed), state, now=1044.9)
    assert not almost.met and "app-a (44.9 of 45 s)" in almost.summary and "app-b (44.9 of 45 s)" in almost.summary
    verdict = follow(TWO, poll(*members, committed=committed), state, now=1045.0)
    assert verdict.met
    assert verdict.detail["proven"] == {"a": "window", "b": "window"} and verdict.detail["unproven"] == []
    assert verdict.summary.endswith("every member proven alive (0 by progress, 2 through the 45 s window)")


def test_the_summary_counts_members_proven_by_progress_and_through_the_window():
    state = WaitState()
    follow(TWO, poll(member("a", "orders:0"), member("b", "orders:1"), committed={"orders:0": 1, "orders:1": 1}),
           state, now=0.0)
    verdict = follow(TWO, poll(member("a", "orders:0"), member("b", "orders:1"),
                               committed={"orders:0": 2, "orders:1": 1}), state, now=50.0)
    assert verdict.met and verdict.detail["proven"] == {"a": "progress", "b": "window"}
    assert verdict.summary.endswith("(1 by progress, 1 through the 45 s window)")


def test_a_member_that_disappears_is_forgotten_and_a_new_member_id_starts_over():
    state = WaitState()
    follow(TWO, poll(member("a"), member("b")), state, now=0.0)
    # b crashed and its next incarnation joined with a new member id (same client id)
    follow(TWO, poll(member("a"), member("c", client_id="app-b")), state, now=30.0)
    assert set(state.members) == {"a", "c"}
    verdict = follow(TWO, poll(member("a"), member("c", client_id="app-b")), state, now=45.0)
    assert verdict.detail["proven"] == {"a": "window"}
    assert not verdict.met and verdict.summary.endswith("not yet proven alive: app-b (15.0 of 45 s)")
    assert follow(TWO, poll(member("a"), member("c", client_id="app-b")), state, now=75.0).met
    # a member missing from one poll is forgotten too: listed again, it starts over
    follow(TWO, poll(member("c", client_id="app-b"), met=False), state, now=80.0)
    assert set(state.members) == {"c"}
    verdict = follow(TWO, poll(member("a"), member("c", client_id="app-b")), state, now=81.0)
    assert not verdict.met and "app-a (0.0 of 45 s)" in verdict.summary


def test_met_only_when_the_group_verdict_is_met_and_every_live_member_is_proven():
    state = WaitState()
    follow(TWO, poll(member("a"), member("b")), state, now=0.0)
    # every member proven, but the group itself is not there (e.g. a member still on the classic protocol)
    not_migrated = follow(TWO, poll(member("a"), member("b"), met=False), state, now=60.0)
    assert not not_migrated.met and not_migrated.summary == GROUP_SUMMARY
    assert not_migrated.detail["proven"] == {"a": "window", "b": "window"}
    assert follow(TWO, poll(member("a"), member("b")), state, now=61.0).met


def test_departed_members_need_no_proof_and_are_not_remembered():
    state = WaitState()
    follow(ONE, poll(member("a"), member("gone", live=False)), state, now=0.0)
    assert set(state.members) == {"a"}
    verdict = follow(ONE, poll(member("a"), member("gone", live=False)), state, now=45.0)
    assert verdict.met and verdict.detail["proven"] == {"a": "window"}


def test_without_a_liveness_window_the_group_verdict_stands():
    plain = GroupCondition("migrated", group_type="consumer", min_members=1)
    raw = poll(member("a"))
    state = WaitState()
    assert follow(plain, raw, state, now=0.0) is raw
    assert state.members == {}


def test_liveness_over_judged_group_descriptions_and_offsets():
    """The same rules over what ``judge`` builds from a described group and its committed offsets."""

    def described(offset: int) -> ConditionResult:
        p0, p1 = (TopicPartition("orders", 0),), (TopicPartition("orders", 1),)
        members = (ConsumerGroupMember("m-1", "orders-1", "/10.0.0.1", assignment=p0, target_assignment=p0,
                                       member_epoch=4, protocol=MemberProtocol.CONSUMER),
                   ConsumerGroupMember("m-2", "orders-2", "/10.0.0.2", assignment=p1, target_assignment=p1,
                                       member_epoch=4, protocol=MemberProtocol.CONSUMER))
        desc = ConsumerGroupDescription("orders", GroupType.CONSUMER, "Stable", "uniform", 1, members,
                                        group_epoch=4, target_assignment_epoch=4)
        offsets = GroupOffsets("orders", (PartitionOffsets("orders", 0, offset, 0, 100),
                                          PartitionOffsets("orders", 1, 50, 0, 100)))
        return judge(TWO, description=desc, offsets=offsets)

    first = described(10)
    assert first.met  # the group's own verdict: two live members on the consumer protocol
    assert [m["partitions"] for m in first.detail["members"]] == [["orders:0"], ["orders:1"]]
    assert first.detail["committed"] == {"orders:0": 10, "orders:1": 50}
    state = WaitState()
    assert not follow(TWO, first, state, now=0.0).met
    verdict = follow(TWO, described(11), state, now=3.0)
    assert verdict.detail["proven"] == {"m-1": "progress"}
    assert "not yet proven alive: orders-2 (3.0 of 45 s)" in verdict.summary
    assert follow(TWO, described(11), state, now=45.0).met


def test_a_wait_state_with_members_round_trips_through_json_between_polls():
    state = WaitState()
    follow(TWO, poll(member("a", "orders:0"), member("b", "orders:1"), committed={"orders:0": 10}), state, now=0.0)
    carried = WaitState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert carried == state
    assert carried.members["b"]["offsets"] == {"orders:1": None}
    # the resumed wait goes on where it was: a's progress, b's first commit, measured from the first sight
    verdict = follow(TWO, poll(member("a", "orders:0"), member("b", "orders:1"),
                               committed={"orders:0": 11, "orders:1": 3}), carried, now=2.0)
    assert verdict.met and verdict.detail["proven"] == {"a": "progress", "b": "progress"}
    full = WaitState(empty_since=1.5, removed=[{"member_id": "m0", "client_id": "app-0", "host": "h",
                                                "instance_id": "i0"}], unavailable_since=2.5, emptied_at=1.0,
                     members={"a": {"since": 0.0, "client_id": "app-a", "host": None, "instance_id": None,
                                    "offsets": {"orders:0": 10}}})
    assert WaitState.from_dict(json.loads(json.dumps(full.to_dict()))) == full
    assert WaitState.from_dict(None) == WaitState()


# -- the empty rule -----------------------------------------------------------------------------------------------

EMPTY = GroupCondition("empty", settle_s=10)


def group(*members: ConsumerGroupMember, state: str = "Stable") -> ConsumerGroupDescription:
    return ConsumerGroupDescription("orders", GroupType.CONSUMER, state, "uniform", 1, members)


def consumer(i: int, instance_id: str | None = None) -> ConsumerGroupMember:
    return ConsumerGroupMember(f"m{i}", f"orders-{i}", f"/10.0.0.{i}", instance_id=instance_id, member_epoch=3,
                               protocol=MemberProtocol.CONSUMER)


def test_an_empty_verdict_is_met_after_the_settle_window_of_empty_polls():
    state = WaitState()
    empty = judge(EMPTY, description=group(state="Empty"))
    first = follow(EMPTY, empty, state, now=100.0)
    assert not first.met and first.summary.endswith("empty for 0.0 of 10 s")
    assert (state.emptied_at, state.empty_since) == (100.0, 100.0)
    assert not follow(EMPTY, empty, state, now=109.9).met
    settled = follow(EMPTY, empty, state, now=110.0)
    assert settled.met and settled.summary.endswith("empty for 10.0 s (settle window 10 s)")
    assert settled.detail["empty_for_s"] == 10.0
    assert state.emptied_at == 100.0  # when it was first empty, kept


def test_members_before_the_group_was_ever_empty_are_a_stop_in_progress():
    state = WaitState()
    still = follow(EMPTY, judge(EMPTY, description=group(consumer(0), consumer(1))), state, now=0.0)
    assert not still.met and still.summary == "2 member(s), state Stable"
    assert (state.emptied_at, state.empty_since) == (None, None)
    assert not follow(EMPTY, judge(EMPTY, description=group(state="Empty")), state, now=5.0).met
    assert follow(EMPTY, judge(EMPTY, description=None), state, now=15.0).met  # a deleted group is empty too


def test_without_a_settle_window_the_first_empty_poll_is_enough():
    state = WaitState()
    absent_ok = GroupCondition("empty", allow_absent=True)
    verdict = follow(absent_ok, judge(absent_ok, description=None), state, now=7.0)
    assert verdict.met and verdict.summary == "the group does not exist"


def test_an_empty_wait_on_a_group_never_seen_fails_naming_similar_ids_in_code_points():
    nfd, nfc = "hc-gru\u0308ppe", "hc-gr\u00fcppe"
    absent = judge(GroupCondition("empty"), description=None)
    assert not absent.met
    with pytest.raises(GroupNotFound) as err:
        follow(GroupCondition("empty"), replace(absent, detail={**absent.detail, "group_id": nfd,
                                                                 "similar": [nfc]}), WaitState(), now=0.0)
    assert "does not exist on this cluster, and has not since this wait began" in str(err.value)
    assert "U+0075 U+0308" in str(err.value) and "U+00FC" in str(err.value) and not err.value.retriable
    # seen during this wait, then gone: deleted (an Empty group without committed offsets), so empty
    state = WaitState()
    follow(EMPTY, judge(EMPTY, description=group(state="Empty")), state, now=0.0)
    assert state.seen_at == 0.0
    assert follow(EMPTY, judge(EMPTY, description=None), state, now=10.0).met


def test_a_member_after_the_group_was_empty_fails_the_wait_and_is_named():
    state = WaitState()
    follow(EMPTY, judge(EMPTY, description=group(state="Empty")), state, now=100.0)
    back = judge(EMPTY, description=group(consumer(3, instance_id="orders-static-3")))
    with pytest.raises(GroupNotEmpty) as err:
        follow(EMPTY, back, state, now=103.0)
    message = str(err.value)
    assert "A member came back 3.0 s after the group was empty" in message
    assert "orders-3 on /10.0.0.3 (group.instance.id orders-static-3)" in message
    assert "An instance of the application is still running" in message
    assert state.empty_since is None


def test_a_member_after_the_wait_forced_members_out_fails_the_wait():
    state = WaitState(removed=[{"member_id": "m1", "client_id": "orders-1", "host": "/10.0.0.1",
                                "instance_id": None}])
    with pytest.raises(GroupNotEmpty, match=r"came back after the members left behind were forced out: "
                                            r"orders-1 on /10\.0\.0\.1\."):
        follow(EMPTY, judge(EMPTY, description=group(consumer(1))), state, now=50.0)


def test_the_empty_rule_survives_the_trip_through_json():
    state = WaitState()
    follow(EMPTY, judge(EMPTY, description=group(state="Empty")), state, now=100.0)
    carried = WaitState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert carried.emptied_at == 100.0 and carried.seen_at == 100.0
    with pytest.raises(GroupNotEmpty, match="2.5 s after the group was empty: orders-0 on /10.0.0.0"):
        follow(EMPTY, judge(EMPTY, description=group(consumer(0))), carried, now=102.5)


def test_the_time_since_empty_is_right_when_the_group_was_empty_at_time_zero():
    """An ``emptied_at`` of 0.0 is a time, not "unset": the message says how long ago the group was empty."""
    state = WaitState(emptied_at=0.0)
    with pytest.raises(GroupNotEmpty, match="3.0 s after the group was empty"):
        follow(EMPTY, judge(EMPTY, description=group(consumer(0))), state, now=3.0)


def test_member_names_are_what_a_person_looks_for():
    assert member_names([{"member_id": "m1", "client_id": "orders-1", "host": "/10.0.0.1", "instance_id": "s1"},
                         {"member_id": "m2", "client_id": "", "host": ""}]) == (
        "orders-1 on /10.0.0.1 (group.instance.id s1), m2 on ?")
