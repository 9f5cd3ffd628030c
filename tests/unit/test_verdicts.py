"""The verdict rules of the waits, on recorded facts: live members, the Empty settle window, a member
that comes back after a forced removal, a coordinator that stays unavailable, the coordinator partition.

The same rules run against real clusters in tests/integration/test_cluster_faults.py.
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_kip848.kafka.errors import (
    CoordinatorUnavailable,
    GroupNotEmpty,
    KafkaConnectionError,
    MemberNotReconciled,
)
from airflow_provider_kip848.kafka.model import (
    ConsumerGroupDescription,
    ConsumerGroupMember,
    GroupType,
    MemberProtocol,
    StreamsGroupDescription,
    StreamsGroupMember,
    StreamsTask,
    TaskAssignment,
    TopicPartition,
    coordinator_partition,
)
from airflow_provider_kip848.kafka.model.groups import java_string_hash
from airflow_provider_kip848.kafka.rules.conditions import (
    GroupCondition,
    WaitState,
    follow,
    follow_failure,
    judge,
)


def member(i: int, protocol=MemberProtocol.CONSUMER, epoch: int | None = 5, instance: str | None = None):
    return ConsumerGroupMember(f"m{i}", f"app-{i}", f"10.0.0.{i}", instance_id=instance, member_epoch=epoch,
                               protocol=protocol, target_assignment=None if epoch is None else ())


def group(*members, type_=GroupType.CONSUMER, state="Stable"):
    """At group and assignment epoch 5 (a consumer group's members at epoch 5 are reconciled)."""
    epoch = None if type_ is GroupType.CLASSIC else 5
    return ConsumerGroupDescription("g", type_, state, "uniform", 1, tuple(members), group_epoch=epoch,
                                    target_assignment_epoch=epoch)


def test_migrated_needs_the_expected_live_members_and_ignores_departed_static_members():
    three = GroupCondition("migrated", group_type="consumer", min_members=3)
    # one of three instances dead: a static member that shut down stays listed with epoch -2
    dead_static = group(member(0), member(1), member(2, epoch=-2, instance="app-2"))
    verdict = judge(three, description=dead_static)
    assert not verdict.met
    assert verdict.summary == ("type consumer, 2 of 2 live member(s) on the new protocol, 3 expected "
                               "(1 departed member(s) not counted)")
    assert judge(three, description=group(member(0), member(1), member(2))).met
    # a classic member still live keeps it unmigrated even with enough members
    assert not judge(three, description=group(member(0), member(1), member(2, MemberProtocol.CLASSIC))).met


def test_migrated_back_to_classic_counts_classic_members():
    """The offline way back (consumer -> classic) ends with classic members in a classic group."""
    two = GroupCondition("migrated", group_type="classic", min_members=2)
    classic = [member(i, MemberProtocol.CLASSIC, epoch=None) for i in range(2)]
    assert judge(two, description=group(*classic, type_=GroupType.CLASSIC)).met
    assert not judge(two, description=group(classic[0], type_=GroupType.CLASSIC)).met  # one instance missing
    # still a consumer group: not back yet
    assert not judge(two, description=group(member(0), member(1))).met
    with pytest.raises(Exception, match="share"):
        GroupCondition("migrated", group_type="share")


def test_an_empty_verdict_needs_the_settle_window():
    empty = GroupCondition("empty", settle_s=10)
    state = WaitState()
    raw = judge(empty, description=group(state="Empty"))
    assert raw.met
    assert not follow(empty, raw, state, now=100.0).met
    assert not follow(empty, raw, state, now=109.0).met
    assert follow(empty, raw, state, now=110.5).met
    # a member still there before the group was first empty only delays the window
    state = WaitState()
    follow(empty, judge(empty, description=group(member(0))), state, now=95.0)
    assert state.empty_since is None and state.emptied_at is None
    assert not follow(empty, raw, state, now=100.0).met
    assert follow(empty, raw, state, now=110.0).met
    # a member seen after the group was empty is an instance still running: the wait fails, naming it
    state = WaitState()
    follow(empty, raw, state, now=100.0)
    with pytest.raises(GroupNotEmpty, match=r"came back 5\.0 s after the group was empty: app-0 on 10\.0\.0\.0"):
        follow(empty, judge(empty, description=group(member(0))), state, now=105.0)


def test_a_member_back_after_forced_removal_fails_the_wait_and_is_named():
    empty = GroupCondition("empty", settle_s=10)
    state = WaitState(removed=[{"member_id": "m0", "client_id": "app-0", "host": "10.0.0.0", "instance_id": None}])
    follow(empty, judge(empty, description=group(state="Empty")), state, now=100.0)
    back = judge(empty, description=group(member(0, MemberProtocol.CLASSIC, epoch=None), type_=GroupType.CLASSIC))
    with pytest.raises(GroupNotEmpty, match=r"came back .*app-0 on 10\.0\.0\.0.*still running"):
        follow(empty, back, state, now=103.0)


def test_the_member_forced_out_still_listed_before_the_group_was_seen_empty_is_waited_for_not_called_back():
    """The removal not shown yet (a CI run: the LeaveGroup answered by a coordinator killed before it replicated, the
    next describe still listing the member): the same classic member id, the group never seen empty since. Not an
    instance back (a classic member that rejoins gets a new member id): the wait goes on, and ends once the member is
    gone. A member of another id is still one back, and so is a consumer-protocol member of the same id (it keeps
    its client-made id when it rejoins: tests/unit/test_liveness.py)."""
    empty = GroupCondition("empty", settle_s=0)
    state = WaitState(removed=[{"member_id": "m0", "client_id": "app-0", "host": "10.0.0.0", "instance_id": None}])
    still = judge(empty, description=group(member(0, MemberProtocol.CLASSIC, epoch=None), type_=GroupType.CLASSIC))
    waiting = follow(empty, still, state, now=100.0)
    assert not waiting.met and "the removal has not shown yet" in waiting.summary and "app-0" in waiting.summary
    assert follow(empty, judge(empty, description=group(state="Empty")), state, now=101.0).met
    other = WaitState(removed=[{"member_id": "m9", "client_id": "app-9", "host": "10.0.0.9", "instance_id": None}])
    with pytest.raises(GroupNotEmpty, match=r"came back .*app-0 on 10\.0\.0\.0"):
        follow(empty, still, other, now=100.0)


def test_a_group_that_does_not_exist_is_empty_once_settled_when_absence_is_allowed():
    empty = GroupCondition("empty", settle_s=2, allow_absent=True)
    state = WaitState()
    raw = judge(empty, description=None)
    assert not follow(empty, raw, state, now=0.0).met
    assert follow(empty, raw, state, now=2.0).met


def test_a_coordinator_unavailable_too_long_ends_the_wait_other_retriable_errors_do_not():
    state = WaitState()
    loading = CoordinatorUnavailable("The coordinator of group 'g' kept answering CoordinatorLoadInProgressError",
                                     group_id="g", partition=7, leader=2, error="CoordinatorLoadInProgressError")
    follow_failure(loading, state, now=0.0, unavailable_limit_s=60)
    follow_failure(loading, state, now=59.0, unavailable_limit_s=60)
    with pytest.raises(CoordinatorUnavailable, match="unavailable for 60 s in a row") as err:
        follow_failure(loading, state, now=60.0, unavailable_limit_s=60)
    assert (err.value.partition, err.value.leader) == (7, 2)
    # a broker restarting (connection errors) does not count against the coordinator's limit
    state = WaitState()
    for t in range(0, 600, 30):
        follow_failure(KafkaConnectionError("down"), state, now=float(t), unavailable_limit_s=60)
    # an answer in between resets the count
    state = WaitState()
    follow_failure(loading, state, now=0.0, unavailable_limit_s=60)
    follow(GroupCondition("type", group_type="consumer"), judge(GroupCondition("type", group_type="consumer"),
                                                                description=group()), state, now=50.0)
    follow_failure(loading, state, now=100.0, unavailable_limit_s=60)
    assert state.unavailable_since == 100.0


def test_non_retriable_errors_end_the_wait_at_once():
    with pytest.raises(GroupNotEmpty):
        follow_failure(GroupNotEmpty("x"), WaitState(), now=0.0, unavailable_limit_s=60)


def test_wait_state_travels_as_json():
    import json

    state = WaitState(empty_since=1.5, removed=[{"member_id": "m"}], unavailable_since=None)
    assert WaitState.from_dict(json.loads(json.dumps(state.to_dict()))) == state
    assert WaitState.from_dict(None) == WaitState()


#: (text, Java's String.hashCode(), Utils.abs(hashCode) % 50), printed by a Java 17 program on this machine
JAVA_HASHES = [("", 0, 0), ("hello", 99162322, 22), ("orders-app", 772757305, 5), ("zzzzzzzzzzzzzz", -1886561600, 0),
               ("\u00e9", 233, 33), ("\U0001F600", 1772899, 49), ("polygenelubricants", -2147483648, 0)]


@pytest.mark.parametrize("text, expected, _partition", JAVA_HASHES)
def test_java_string_hash(text, expected, _partition):
    assert java_string_hash(text) == expected


@pytest.mark.parametrize("text, _hash, partition", JAVA_HASHES)
def test_coordinator_partition_is_kafkas(text, _hash, partition):
    assert coordinator_partition(text, 50) == partition


@pytest.mark.parametrize("kwargs", [{"min_members": 0}, {"min_members": "3"}, {"min_members": True}])
def test_a_bad_expected_member_count_is_refused(kwargs):
    with pytest.raises(ValueError):
        GroupCondition("migrated", group_type="consumer", **kwargs)


@pytest.mark.parametrize("settle", [-1, "10", True])
def test_a_bad_settle_window_is_refused(settle):
    with pytest.raises(ValueError):
        GroupCondition("empty", settle_s=settle)


def test_a_partition_with_records_and_no_commit_is_never_a_drained_lag():
    from airflow_provider_kip848.kafka.model import GroupOffsets, PartitionOffsets

    lag = GroupCondition("lag", max_lag=0)
    fresh = GroupOffsets("g", (PartitionOffsets("t", 0, 10, 0, 10), PartitionOffsets("t", 1, None, 0, 7)))
    verdict = judge(lag, offsets=fresh)
    assert not verdict.met and "lag unknown on 1 partition(s)" in verdict.summary and "t:1" in verdict.summary
    # an assigned partition without records and without a commit has nothing to consume: drained
    empty_log = GroupOffsets("g", (PartitionOffsets("t", 0, 10, 0, 10), PartitionOffsets("t", 1, None, 0, 0)))
    assert judge(lag, offsets=empty_log).met


# -- reconciled members (kafka-consumer-groups --describe --members --verbose: CURRENT-EPOCH / TARGET-EPOCH) ---------

P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def owning(i: int, epoch: int, owned: tuple, target: tuple) -> ConsumerGroupMember:
    return ConsumerGroupMember(f"m{i}", f"app-{i}", f"10.0.0.{i}", assignment=owned, target_assignment=target,
                               member_epoch=epoch, protocol=MemberProtocol.CONSUMER)


def at(epoch: int, *members, state="Stable") -> ConsumerGroupDescription:
    return ConsumerGroupDescription("g", GroupType.CONSUMER, state, "uniform", 1, tuple(members),
                                    group_epoch=epoch, target_assignment_epoch=epoch)


TWO_MIGRATED = GroupCondition("migrated", group_type="consumer", min_members=2, reconcile_s=30.0)


def test_migrated_needs_the_group_stable_and_every_member_reconciled():
    assert judge(TWO_MIGRATED, description=at(5, owning(0, 5, (P0,), (P0,)), owning(1, 5, (P1,), (P1,)))).met
    # a member still at the previous epoch: it has not acknowledged the new assignment
    behind = judge(TWO_MIGRATED, description=at(5, owning(0, 4, (P0, P1), (P0,)), owning(1, 5, (), (P1,)),
                                                 state="Reconciling"))
    assert not behind.met
    assert "app-0 on 10.0.0.0 (member epoch 4, assignment epoch 5, owns 2 of 1 target)" in behind.summary
    assert "state Reconciling, not Stable" in behind.summary
    # at the epoch but not yet owning its target (a partition still to be revoked elsewhere)
    short = judge(TWO_MIGRATED, description=at(5, owning(0, 5, (P0,), (P0,)), owning(1, 5, (), (P1,))))
    assert not short.met and "app-1 on 10.0.0.1 (member epoch 5, assignment epoch 5, owns 0 of 1 target)" in \
        short.summary
    # Stable is required even when every member looks reconciled
    assert not judge(TWO_MIGRATED, description=at(5, owning(0, 5, (P0,), (P0,)), owning(1, 5, (P1,), (P1,)),
                                                  state="Assigning")).met


def test_a_description_without_epochs_is_never_taken_as_reconciled():
    unknown = ConsumerGroupDescription("g", GroupType.CONSUMER, "Stable", "uniform", 1,
                                       (owning(0, 5, (P0,), (P0,)), owning(1, 5, (P1,), (P1,))))
    verdict = judge(TWO_MIGRATED, description=unknown)
    assert not verdict.met and "app-0 (epochs unknown)" in verdict.summary


def test_a_streams_member_must_own_its_target_tasks():
    def streams(epoch: int, active: tuple, target: tuple) -> StreamsGroupDescription:
        m = StreamsGroupMember("s0", "p0", "wordcount-0", member_epoch=epoch,
                               assignment=TaskAssignment(active=active), target_assignment=TaskAssignment(active=target))
        return StreamsGroupDescription("wc", "Stable", 1, group_epoch=3, target_assignment_epoch=3,
                                       topology_epoch=0, members=(m,))

    one = GroupCondition("migrated", group_type="streams", min_members=1)
    t0, t1 = StreamsTask("0", 0), StreamsTask("0", 1)
    assert judge(one, description=streams(3, (t0, t1), (t1, t0))).met
    assert not judge(one, description=streams(3, (t0,), (t0, t1))).met
    assert "member epoch 2, assignment epoch 3" in judge(one, description=streams(2, (t0, t1), (t0, t1))).summary


def test_a_member_stuck_behind_at_one_epoch_fails_the_wait_naming_both_epochs():
    state = WaitState()
    stuck = at(5, owning(0, 4, (P0, P1), (P0,)), owning(1, 5, (), (P1,)), state="Reconciling")
    assert not follow(TWO_MIGRATED, judge(TWO_MIGRATED, description=stuck), state, now=0.0).met
    assert not follow(TWO_MIGRATED, judge(TWO_MIGRATED, description=stuck), state, now=29.0).met
    # the state travels through JSON with a deferred trigger
    state = WaitState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert set(state.reconciling) == {"m0", "m1"}
    with pytest.raises(MemberNotReconciled, match=r"app-0 on 10\.0\.0\.0 \(member epoch 4, assignment epoch 5") as err:
        follow(TWO_MIGRATED, judge(TWO_MIGRATED, description=stuck), state, now=30.0)
    assert "at group epoch 5" in str(err.value) and not err.value.retriable


def test_a_member_that_moves_to_another_epoch_is_progressing_and_its_clock_starts_again():
    state = WaitState()
    condition = TWO_MIGRATED
    first = at(5, owning(0, 4, (P0, P1), (P0,)), owning(1, 5, (), (P1,)), state="Reconciling")
    follow(condition, judge(condition, description=first), state, now=0.0)
    moved = at(6, owning(0, 5, (P0, P1), (P0,)), owning(1, 6, (), (P1,)), state="Reconciling")
    assert not follow(condition, judge(condition, description=moved), state, now=25.0).met
    assert not follow(condition, judge(condition, description=moved), state, now=50.0).met  # 25 s at epoch 5
    done = at(6, owning(0, 6, (P0,), (P0,)), owning(1, 6, (P1,), (P1,)))
    assert follow(condition, judge(condition, description=done), state, now=54.0).met
    assert state.reconciling == {}
