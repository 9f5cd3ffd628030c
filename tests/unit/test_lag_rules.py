"""The lag wait's rules on recorded polls (kafka/rules/lag.py through conditions.follow): the baseline rule, the
not-growing rule, max_lag as the absolute override, unknown lags, and a dead consumer (with and without records
arriving) that no rule passes. The same rules run against a live producer in
tests/integration/test_lag_wait_live.py."""

from __future__ import annotations

import pytest

from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.model import GroupOffsets, OffsetSnapshot, PartitionOffsets
from airflow_provider_kip848.kafka.rules.conditions import ConditionResult, GroupCondition, WaitState, follow, judge
from airflow_provider_kip848.kafka.rules.lag import LagMargin, baseline_from_snapshot, keep_samples
from airflow_provider_kip848.spark import checks

#: a live consumer's lag between two auto-commits, and the lag the snapshot saw before the change
BASELINE = {"t:0": 10, "t:1": 12}


def offsets(*parts: tuple[int, int | None, int]) -> GroupOffsets:
    """Partitions t:0, t:1 ... as (partition, committed, log end), log start 0."""
    return GroupOffsets("g", tuple(PartitionOffsets("t", p, committed, 0, end) for p, committed, end in parts))


def run(condition: GroupCondition, polls: list[tuple[float, GroupOffsets]]) -> list[ConditionResult]:
    """Each poll judged as a wait judges it (judge, then follow with the wait's memory), at its moment."""
    state, out = WaitState(), []
    for at, seen in polls:
        # through the JSON the deferred trigger carries between polls
        state = WaitState.from_dict(state.to_dict())
        out.append(follow(condition, judge(condition, offsets=seen), state, at))
    return out


def live(t: float, rate: int = 20, lag: int = 15) -> GroupOffsets:
    """A live consumer at ``t`` s: records arriving at ``rate``/s on both partitions, committing, ``lag`` behind."""
    end = 1000 + int(rate * t)
    return offsets((0, end - lag, end), (1, end - lag - 3, end))


def dead(t: float, rate: int, committed: int = 900) -> GroupOffsets:
    """A consumer that stopped at ``committed``: records arriving at ``rate``/s (0: nobody writes)."""
    end = 1000 + int(rate * t)
    return offsets((0, committed, end), (1, committed, end))


BASE = GroupCondition("lag", baseline=BASELINE)
NO_BASE = GroupCondition("lag")


def test_the_margin_is_a_fraction_of_the_lag_before_plus_records():
    assert LagMargin().allowance(10) == 10 + 5 + 100
    assert LagMargin(0.0, 0).allowance(7) == 7
    assert LagMargin(1.0, 2).allowance(0) == 2


def test_baseline_rule_passes_a_live_consumer_at_its_level_before_on_the_second_poll():
    first, second = run(BASE, [(0.0, live(0)), (5.0, live(5))])
    assert not first.met and "one more poll" in first.summary  # a lag within the allowance alone proves nothing
    assert second.met and second.detail["rule"] == "baseline"
    assert "caught up by the baseline rule" in second.summary
    assert second.detail["baseline"]["total_lag_before"] == 22


def test_baseline_rule_waits_while_the_lag_is_above_the_level_before_plus_the_margin():
    backlog = [(float(t), offsets((0, 1000 + 50 * t, 2000 + 20 * t), (1, 1000 + 50 * t, 2000 + 20 * t)))
               for t in range(0, 30, 5)]
    results = run(BASE, backlog)
    assert not any(r.met for r in results)
    assert "above" in results[-1].summary and "baseline rule" in results[-1].summary


def test_baseline_rule_checks_each_partition_not_only_the_total():
    skewed = [(0.0, offsets((0, 1000, 1000), (1, 880, 1000))), (5.0, offsets((0, 1100, 1100), (1, 980, 1100)))]
    result = run(GroupCondition("lag", baseline={"t:0": 100, "t:1": 0}, window_s=600), skewed)[-1]
    # total 120 <= 100 + 50 + 100, but t:1 lags 120 > 0 + 0 + 100
    assert not result.met and "t:1 (120 > 100)" in result.summary


def test_not_growing_rule_is_the_fallback_without_a_baseline_after_its_window():
    results = run(NO_BASE, [(float(t), live(t)) for t in range(0, 40, 5)])
    assert not any(r.met for r in results[:6])  # 0..25 s: the 30 s window has not passed
    assert results[6].met and results[6].detail["rule"] == "not_growing"
    assert "caught up by the not-growing rule" in results[6].summary and "over 30 s" in results[6].summary
    assert "no baseline" in NO_BASE.describe() and "not growing" in NO_BASE.describe()


def test_not_growing_rule_holds_while_a_backlog_drains_and_fails_when_it_grows():
    draining = [(float(t), offsets((0, 1000 + 50 * t, 3000 + 20 * t))) for t in range(0, 40, 5)]
    assert run(NO_BASE, draining)[-1].met
    falling_behind = [(float(t), offsets((0, 1000 + 10 * t, 1000 + 30 * t))) for t in range(0, 70, 5)]
    results = run(GroupCondition("lag", margin_records=10, margin_fraction=0.0), falling_behind)
    assert not any(r.met for r in results) and "lag grew" in results[-1].summary


@pytest.mark.parametrize("condition", [BASE, NO_BASE], ids=["baseline", "no-baseline"])
def test_a_dead_consumer_with_records_arriving_is_never_caught_up(condition):
    # its committed offsets stay while records arrive; its lag (100 + 2/s) stays within the baseline's allowance
    # for a while, so only the progress check stops it
    results = run(condition, [(float(t), dead(t, rate=2)) for t in range(0, 120, 5)])
    assert not any(r.met for r in results)
    assert "no commit on t:0, t:1" in results[-1].summary


def test_a_dead_consumer_without_records_arriving_is_caught_up_only_at_its_level_before():
    stuck = [(float(t), dead(t, rate=0, committed=700)) for t in range(0, 120, 5)]  # lag 300 per partition
    assert not any(r.met for r in run(NO_BASE, stuck))
    results = run(BASE, stuck)
    assert not any(r.met for r in results) and "not 0" not in results[-1].summary
    assert "above its lag before the change" in results[-1].summary
    # stopped where it was before the change: that is the level before (the baseline rule's own verdict)
    same = run(GroupCondition("lag", baseline={"t:0": 300, "t:1": 300}), stuck)
    assert same[1].met and same[1].detail["rule"] == "baseline"


def test_an_unknown_lag_is_never_caught_up():
    uncommitted = [(float(t), offsets((0, 1000 + 20 * t, 1010 + 20 * t), (1, None, 50 + t))) for t in range(0, 60, 5)]
    for condition in (BASE, NO_BASE):
        results = run(condition, uncommitted)
        assert not any(r.met for r in results)
        assert "lag unknown on 1 partition(s)" in results[-1].summary and "t:1" in results[-1].summary
    no_log_end = [(float(t), GroupOffsets("g", (PartitionOffsets("t", 0, 10, 0, None),))) for t in range(0, 60, 5)]
    assert not any(r.met for r in run(NO_BASE, no_log_end))


def test_a_partition_the_window_did_not_see_is_not_judged_as_not_growing():
    grows = [(float(t), live(t)) for t in range(0, 35, 5)]
    more = offsets((0, 1700, 1710), (1, 1700, 1710), (2, 5, 5))
    assert not run(NO_BASE, [*grows[:-1], (30.0, more)])[-1].met


def test_max_lag_is_the_absolute_override():
    rule = GroupCondition("lag", max_lag=25, baseline=BASELINE)
    assert "absolute override" in rule.describe()
    result = run(rule, [(0.0, live(0, lag=10))])[0]
    assert result.met and result.detail["rule"] == "max_lag"  # at once, no second poll
    assert not run(rule, [(0.0, live(0, lag=15))])[0].met  # 15 + 18 > 25, although the baseline rule would pass
    assert not run(GroupCondition("lag", max_lag=0), [(float(t), live(t)) for t in range(0, 60, 5)])[-1].met


def test_the_per_partition_cap_holds_under_every_rule():
    capped = GroupCondition("lag", baseline=BASELINE, max_partition_lag=5)
    assert not any(r.met for r in run(capped, [(float(t), live(t)) for t in range(0, 60, 5)]))


def test_the_samples_kept_are_one_window_and_the_state_stays_small():
    state = WaitState()
    for t in range(0, 600, 5):
        follow(NO_BASE, judge(NO_BASE, offsets=live(t)), state, float(t))
    assert len(state.lag_samples) <= 8 and state.lag_samples[0]["at"] >= 600 - 5 - 30 - 5
    assert keep_samples([{"at": 0.0}, {"at": 10.0}], 20.0, 30.0) == [{"at": 0.0}, {"at": 10.0}]


def test_the_baseline_comes_from_the_snapshot_each_partition_s_lag_before():
    snap = OffsetSnapshot("c", "g", "classic", "Stable", "now", (PartitionOffsets("t", 0, 90, 0, 100),
                                                                 PartitionOffsets("t", 1, None, 0, 40)))
    assert baseline_from_snapshot(snap) == {"t:0": 10, "t:1": None}
    # a partition unknown before has an allowance of the margin's records alone
    rule = GroupCondition("lag", baseline=baseline_from_snapshot(snap), margin_records=5)
    results = run(rule, [(0.0, offsets((0, 100, 110), (1, 30, 40))), (5.0, offsets((0, 105, 115), (1, 35, 45)))])
    assert not results[-1].met and "t:1 (10 > 5)" in results[-1].summary


@pytest.mark.parametrize("bad", [dict(margin_fraction=-0.1), dict(margin_records=-1), dict(margin_records=1.5),
                                 dict(window_s=0), dict(max_lag=-1), dict(max_lag=True),
                                 dict(baseline={"t:0": "10"}), dict(baseline=[1])])
def test_bad_lag_arguments_are_refused(bad):
    with pytest.raises(InvalidArgument):
        GroupCondition("lag", **bad)


def test_the_condition_survives_the_trigger_s_json():
    again = GroupCondition.from_dict(BASE.to_dict())
    assert again == BASE and again.baseline == BASELINE


def test_the_validation_s_lag_check_without_max_total_lag_is_against_the_lag_before():
    before = [{"topic": "t", "partition": 0, "lag": 10}, {"topic": "t", "partition": 1, "lag": 12}]
    live = [{"topic": "t", "partition": 0, "lag": 14}, {"topic": "t", "partition": 1, "lag": 3}]
    verdict = checks.lag_verdict_against_before(live, before, margin=LagMargin())
    assert verdict.passed and "the lag before the change 22" in verdict.summary
    assert not checks.lag_verdict(live, max_total_lag=0).passed  # the old rule on a live application
    behind = [{"topic": "t", "partition": 0, "lag": 10}, {"topic": "t", "partition": 1, "lag": 119}]
    failed = checks.lag_verdict_against_before(behind, before, margin=LagMargin())
    assert not failed.passed and failed.offending == [{"topic": "t", "partition": 1, "lag": 119, "allowed": 118}]
