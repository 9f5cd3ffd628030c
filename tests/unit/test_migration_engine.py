"""The migration engine's typed state and its waits' bookkeeping, without a cluster (the moves themselves run
against real brokers in tests/integration/test_fleet_operator.py and the fleet's e2e and deploy tests).

* every path's steps, and the runs of consecutive waits that one deferral follows;
* ``MoveState`` survives JSON both ways and refuses what does not parse (a record is never guessed);
* ``advance_staged``: a group goes through its conditions in one poll as far as they hold, keeps its memory
  for the one that does not, hands back a fatal error instead of raising, and asks for a new client after a
  retriable one. ``now`` is driven explicitly: nothing here sleeps.
"""

from __future__ import annotations

import json
import logging

import pytest

from airflow_provider_kip848.engine.state import (
    ARRIVALS,
    CHANGING_STEPS,
    PATHS,
    WAITS,
    MoveState,
    Step,
    path_of,
    wait_stage,
)
from airflow_provider_kip848.fleet.results import MIGRATE, ROLLBACK
from airflow_provider_kip848.kafka.errors import CoordinatorUnavailable, InvalidArgument
from airflow_provider_kip848.kafka.rules.conditions import (
    ConditionResult,
    GroupCondition,
    advance_staged,
    pending_condition,
    staged_wait,
)

LOG = logging.getLogger(__name__)


def test_each_path_has_its_runbook_order_and_its_runs_of_waits():
    assert path_of(MIGRATE, "offline") == (Step.LOCK, Step.SNAPSHOT, Step.STOP, Step.WAIT_EMPTY, Step.RESTORE,
                                           Step.START, Step.WAIT_MIGRATED, Step.WAIT_LAG, Step.COMPARE)
    offline = path_of(MIGRATE, "offline")
    assert wait_stage(offline, offline.index(Step.WAIT_EMPTY)) == (Step.WAIT_EMPTY,)
    assert wait_stage(offline, offline.index(Step.WAIT_MIGRATED)) == (Step.WAIT_MIGRATED, Step.WAIT_LAG)
    assert wait_stage(offline, offline.index(Step.RESTORE)) == ()
    online = path_of(MIGRATE, "online")
    assert Step.STOP not in online and wait_stage(online, online.index(Step.WAIT_MIGRATED)) == (
        Step.WAIT_MIGRATED, Step.WAIT_LAG)
    for (kind, _), steps in PATHS.items():
        assert steps[0] is Step.LOCK and steps[-1] is Step.COMPARE
        # every path arrives somewhere, and the way back always stops the application first
        assert any(s in ARRIVALS for s in steps)
        if kind == ROLLBACK:
            assert steps[1] is Step.STOP and Step.START_BACK in steps
    assert WAITS.isdisjoint(CHANGING_STEPS)
    with pytest.raises(InvalidArgument, match="no migration path"):
        path_of(MIGRATE, "sideways")


def test_a_move_state_round_trips_and_refuses_a_record_that_does_not_parse():
    state = MoveState(app="orders", kind=MIGRATE, path="offline", started_at=100.0)
    state.record(Step.LOCK, 100.0, 101.0, ok=True, detail="held")
    state.position, state.gone, state.baseline = 3, True, {"known": True, "instances": []}
    state.liveness["g:consumer"] = 7.5
    state.waits["g"] = {"removed": [{"member_id": "m"}]}
    again = MoveState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert again == state and again.next_step is Step.WAIT_EMPTY and not again.finished
    assert again.changed() is False
    again.record(Step.STOP, 102.0, 103.0, ok=True, detail="stopped")
    assert again.changed() is True
    good = state.to_dict()
    for bad in ({**good, "kind": "sideways"}, {**good, "position": -1}, {**good, "position": True},
                {**good, "gone": "yes"}, {**good, "attempts": 0}, {**good, "deferrals": -1}, {**good, "steps": {"a": 1}},
                {**good, "app": ""}, {**good, "started_at": "soon"}, {**good, "result": []}):
        with pytest.raises(InvalidArgument):
            MoveState.from_dict(bad)


class Script:
    """The cluster's facts poll by poll, per group: what ``evaluate_condition`` would return."""

    def __init__(self, **facts) -> None:
        self.facts = {g: list(v) for g, v in facts.items()}

    def __call__(self, group_id: str, condition: GroupCondition) -> ConditionResult:
        fact = self.facts[group_id].pop(0)
        if isinstance(fact, Exception):
            raise fact
        return fact


def _empty(members: int) -> ConditionResult:
    detail = {"members": [{"member_id": f"m{i}", "client_id": f"c{i}", "live": True} for i in range(members)]}
    return ConditionResult(members == 0, f"{members} member(s)", detail)


def test_a_group_passes_every_condition_that_holds_in_one_poll_and_keeps_waiting_on_the_next():
    clock = iter([10.0, 11.0, 12.0, 13.0, 14.0, 15.0])
    entry = staged_wait("g", [("wait_migrated", GroupCondition("type", group_type="consumer"), 60.0),
                              ("wait_lag", GroupCondition("lag", max_lag=0), 60.0)], started=5.0)
    script = Script(g=[ConditionResult(True, "type consumer"), ConditionResult(False, "total lag 3"),
                       ConditionResult(True, "total lag 0")])
    assert advance_staged(entry, script, 300.0, LOG, lambda: next(clock)) == "waiting"
    assert [m["step"] for m in entry["met"]] == ["wait_migrated"]
    assert pending_condition(entry)["step"] == "wait_lag" and entry["last"] == "total lag 3"
    assert advance_staged(entry, script, 300.0, LOG, lambda: next(clock)) == "waiting"
    assert pending_condition(entry) is None
    # each condition's record starts when the one before it held (the first: the stage's start)
    assert [(m["step"], m["started_at"]) for m in entry["met"]] == [("wait_migrated", 5.0), ("wait_lag", 11.0)]


def test_a_member_back_after_the_group_was_empty_is_handed_back_as_the_error_that_ends_the_wait():
    clock = iter([1.0, 2.0, 3.0, 4.0])
    entry = staged_wait("g", [("wait_empty", GroupCondition("empty", settle_s=5.0), 60.0)], started=0.0)
    script = Script(g=[_empty(0), _empty(1)])
    assert advance_staged(entry, script, 300.0, LOG, lambda: next(clock)) == "waiting"  # empty, settling
    outcome = advance_staged(entry, script, 300.0, LOG, lambda: next(clock))
    assert isinstance(outcome, Exception) and "came back" in str(outcome)
    assert entry["met"] == [] and pending_condition(entry)["step"] == "wait_empty"


def test_a_coordinator_that_moves_asks_for_a_new_client_and_one_that_never_loads_ends_the_wait():
    clock = iter([0.0, 100.0, 400.0])  # one reading per failed poll
    entry = staged_wait("g", [("wait_lag", GroupCondition("lag", max_lag=0), 600.0)], started=0.0)
    unavailable = CoordinatorUnavailable("the coordinator is loading", group_id="g")
    script = Script(g=[unavailable, unavailable, unavailable])
    assert advance_staged(entry, script, 300.0, LOG, lambda: next(clock)) == "broken"
    assert advance_staged(entry, script, 300.0, LOG, lambda: next(clock)) == "broken"
    outcome = advance_staged(entry, script, 300.0, LOG, lambda: next(clock))
    assert isinstance(outcome, CoordinatorUnavailable) and "unavailable for 400 s in a row" in str(outcome)
