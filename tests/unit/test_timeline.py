"""The group timeline: gaps from committed offsets, settling, rebalances, unknown looks, serialisation."""

from __future__ import annotations

import pytest

from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.model.groups import GroupState, GroupType
from airflow_provider_kip848.kafka.timeline import MAX_SERIES_POINTS, GapTracker, GroupObservation, Timeline, fold

C, K, S = GroupType.CLASSIC, GroupType.CONSUMER, GroupType.STREAMS


def look(at, type_=C, state=GroupState.STABLE, members=None, epoch=None, committed=None, end=None):
    return GroupObservation(at=at, type=type_, state=state, members=members if members is not None else {"classic": 2},
                            group_epoch=epoch, committed=committed or {}, log_end=end or {})


def offline_migration():
    """A classic group of 2 processing t:0 (one record per second arrives), stopped at 10, Empty at 12,
    converted, the first consumer member at 15, both Stable at 17; processing resumes at 18."""
    looks = []
    for t in range(0, 10):  # processing: committed follows the log end
        looks.append(look(t, committed={"t:0": t}, end={"t:0": t + 1}))
    looks.append(look(10, members={"classic": 1}, state=GroupState.PREPARING_REBALANCE,
                      committed={"t:0": 9}, end={"t:0": 11}))
    looks.append(look(11, members={"classic": 1}, state=GroupState.COMPLETING_REBALANCE,
                      committed={"t:0": 9}, end={"t:0": 12}))
    looks.append(look(12, members={}, state=GroupState.EMPTY, committed={"t:0": 9}, end={"t:0": 13}))
    looks.append(look(13, type_=K, members={}, state=GroupState.EMPTY, epoch=0, committed={"t:0": 9}, end={"t:0": 14}))
    looks.append(look(15, type_=K, members={"consumer": 1}, state=GroupState.RECONCILING, epoch=1,
                      committed={"t:0": 9}, end={"t:0": 16}))
    looks.append(look(17, type_=K, members={"consumer": 2}, state=GroupState.STABLE, epoch=2,
                      committed={"t:0": 9}, end={"t:0": 18}))
    looks.append(look(18, type_=K, members={"consumer": 2}, state=GroupState.STABLE, epoch=2,
                      committed={"t:0": 18}, end={"t:0": 19}))
    looks.append(look(19, type_=K, members={"consumer": 2}, state=GroupState.STABLE, epoch=2,
                      committed={"t:0": 19}, end={"t:0": 20}))
    return looks


def test_an_offline_migration_gives_its_gap_settling_and_rebalances():
    s = fold(offline_migration(), target_type=K, expected_members=2).summary()
    assert (s.first_member_left_at, s.empty_at, s.stable_on_target_at, s.settle_s) == (10, 12, 17, 7)
    # t:0 last moved at 9 (9 -> ... waiting) and next at 18
    assert s.longest_gap is not None and (s.longest_gap.partition, s.longest_gap.seconds) == ("t:0", 9)
    assert (s.longest_gap.started_at, s.longest_gap.ended_at, s.longest_gap.open) == (9, 18, False)
    # classic: one entry into PreparingRebalance seen; the conversion; consumer epochs 0 -> 1 -> 2
    assert (s.rebalances_seen, s.type_changes, s.rebalances_exact) == (1 + 1 + 2, 1, False)
    assert (s.looks, s.unknown_looks, s.resolution_s) == (18, 0, 2)


def test_a_partition_with_nothing_to_read_is_not_stalled():
    looks = [look(t, committed={"t:0": 5, "t:1": t}, end={"t:0": 5, "t:1": t + 1}) for t in range(10)]
    gaps = fold(looks, target_type=K).summary().gaps
    assert "t:0" not in gaps  # caught up all along: no gap however long it did not move
    assert gaps["t:1"].seconds == 1  # moved at every look


def test_a_stall_starts_when_records_begin_to_wait_not_at_the_last_commit():
    # caught up at 5 from t=0 to t=5, a record arrives at t=6, processed at t=8
    looks = [look(t, committed={"p:0": 5}, end={"p:0": 5}) for t in range(6)]
    looks += [look(6, committed={"p:0": 5}, end={"p:0": 6}), look(7, committed={"p:0": 5}, end={"p:0": 6}),
              look(8, committed={"p:0": 6}, end={"p:0": 6})]
    gap = fold(looks, target_type=K).summary().gaps["p:0"]
    assert (gap.started_at, gap.ended_at, gap.seconds) == (6, 8, 2)


def test_a_gap_still_open_at_the_last_look_is_reported_open():
    looks = [look(0, committed={"p:0": 1}, end={"p:0": 3}), look(4, committed={"p:0": 1}, end={"p:0": 9})]
    gap = fold(looks, target_type=K).summary().longest_gap
    assert gap is not None and (gap.seconds, gap.open) == (4, True)


def test_an_offset_moved_back_is_not_progress():
    looks = [look(0, committed={"p:0": 10}, end={"p:0": 12}), look(1, committed={"p:0": 2}, end={"p:0": 12}),
             look(5, committed={"p:0": 12}, end={"p:0": 12})]
    gap = fold(looks, target_type=K).summary().gaps["p:0"]
    assert (gap.started_at, gap.ended_at) == (1, 5)  # from the reset, not from the look before it


def test_unknown_looks_are_never_facts():
    looks = [look(0, committed={"p:0": 0}, end={"p:0": 1}), GroupObservation.unknown(1, "coordinator moving"),
             look(2, committed={"p:0": 2}, end={"p:0": 3})]
    tl = fold(looks, target_type=K)
    s = tl.summary()
    assert (s.first_member_left_at, s.empty_at, s.unknown_looks, s.resolution_s) == (None, None, 1, 2)
    series = tl.series()
    assert series["classic members"][1] == (1, None) and series["lag (records)"][1] == (1, None)
    assert series["committed records/s"][2] == (2, None)  # no rate across an unknown look


def test_consumer_group_epochs_are_counted_exactly():
    looks = [look(t, type_=K, members={"consumer": 3}, epoch=e) for t, e in enumerate((4, 4, 6, 7, 7))]
    s = fold(looks, target_type=K).summary()
    assert (s.rebalances_seen, s.rebalances_exact) == (3, True)


def test_settled_needs_every_member_on_the_target_protocol_and_the_expected_count():
    mixed = look(2, type_=K, members={"consumer": 1, "classic": 1}, epoch=3)
    short = look(3, type_=K, members={"consumer": 1}, epoch=4)
    full = look(4, type_=K, members={"consumer": 2}, epoch=5)
    s = fold([look(0), look(1, members={"classic": 1}), mixed, short, full], target_type=K,
             expected_members=2).summary()
    assert (s.first_member_left_at, s.stable_on_target_at, s.settle_s) == (1, 4, 3)
    s = fold([look(0), look(1, members={"classic": 1}), mixed, short], target_type=K).summary()
    assert s.stable_on_target_at == 3  # no expected count: every member on consumer is enough


def test_a_timeline_handed_over_midway_ends_as_one_that_was_not():
    looks = offline_migration()
    whole = fold(looks, target_type=K, expected_members=2)
    first = fold(looks[:8], target_type=K, expected_members=2)
    resumed = Timeline.from_dict(first.to_dict())
    for obs in looks[8:]:
        resumed.add(obs)
    assert resumed.summary().to_dict() == whole.summary().to_dict()
    assert resumed.series() == whole.series()


def test_bad_input_is_refused():
    with pytest.raises(InvalidArgument):
        Timeline(target_type=GroupType.SHARE)
    with pytest.raises(InvalidArgument):
        Timeline(target_type=K, expected_members=0)
    tl = fold([look(5)], target_type=K)
    with pytest.raises(InvalidArgument, match="time order"):
        tl.add(look(4))
    with pytest.raises(InvalidArgument, match="Not a group timeline"):
        Timeline.from_dict({"target_type": "consumer"})


def test_the_plot_series_stays_bounded_and_keeps_unknown_looks():
    looks = [look(t, committed={"p:0": t}, end={"p:0": t + 1}) if t != 7 else GroupObservation.unknown(7, "x")
             for t in range(3 * MAX_SERIES_POINTS)]
    tl = fold(looks, target_type=K)
    assert len(tl.points) <= MAX_SERIES_POINTS
    assert any(p[1] is None for p in tl.points)  # the unknown look survived the thinning
    rates = [y for _, y in tl.series()["committed records/s"] if y is not None]
    assert rates and all(r == pytest.approx(1.0) for r in rates)


def test_gap_tracker_round_trip():
    tracker = GapTracker()
    for obs in offline_migration()[:12]:
        tracker.add(obs)
    again = GapTracker.from_dict(tracker.to_dict())
    assert {k: v.to_dict() for k, v in again.gaps().items()} == {k: v.to_dict() for k, v in tracker.gaps().items()}


def test_streams_target():
    looks = [look(0), look(1, members={}, state=GroupState.EMPTY),
             look(3, type_=S, members={"streams": 1}, state=GroupState.NOT_READY, epoch=1),
             look(4, type_=S, members={"streams": 1}, state=GroupState.STABLE, epoch=2)]
    s = fold(looks, target_type=S).summary()
    assert (s.first_member_left_at, s.empty_at, s.stable_on_target_at, s.type_changes) == (1, 1, 4, 1)


def test_settled_on_follows_consecutive_looks_and_the_way_back():
    from airflow_provider_kip848.triggers.timeline import settled_for

    to_streams_and_back = [
        look(0), look(1, members={}, state=GroupState.EMPTY),
        look(2, type_=S, members={"streams": 1}, state=GroupState.NOT_READY, epoch=1),
        look(3, type_=S, members={}, state=GroupState.EMPTY, epoch=2),
        look(4, type_=C, members={"classic": 1}), look(5, type_=C, members={"classic": 2}),
        look(9, type_=C, members={"classic": 2}),
    ]
    tl = fold(to_streams_and_back, target_type=S)
    assert tl.settled_on() == ("classic", 4)
    assert not settled_for(tl, 9, 5)  # not on the target, and no way back declared
    assert settled_for(tl, 9, 5, way_back_type="classic") and not settled_for(tl, 8.9, 5, way_back_type="classic")
    # at the start the group is Stable on classic too, but it has not been to the target and back
    assert not settled_for(fold(to_streams_and_back[:1], target_type=S), 100, 5, way_back_type="classic")
    on_target = fold([look(0), look(1, members={}), look(2, type_=S, members={"streams": 1}, epoch=1),
                      look(8, type_=S, members={"streams": 1}, epoch=1)], target_type=S)
    assert settled_for(on_target, 8, 5) and not settled_for(on_target, 6, 5)
