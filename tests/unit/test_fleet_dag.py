"""The fleet migration DAG's shape and its outcome rule (its behaviour on brokers: tests/e2e/test_fleet_migration.py)."""

from __future__ import annotations

import importlib.util

import pytest

from airflow_provider_kip848.fleet.budget import WaveVerdict
from airflow_provider_kip848.fleet.results import WaveRecord
from tests.conftest import REPO


@pytest.fixture(scope="module")
def module():
    spec = importlib.util.spec_from_file_location("kip848_fleet_migration", REPO / "dags" / "kip848_fleet_migration.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_each_wave_slot_chains_open_approval_recheck_moves_judge_and_way_back(module):
    dag = module.dag_object
    assert module.MAX_WAVES >= 2
    for n in range(1, module.MAX_WAVES + 1):
        p = f"wave_{n}"
        chain = ["open", "approval", "recheck", "migrate", "judge", "to_roll_back", "rollback"]
        for up, down in zip(chain, chain[1:], strict=False):
            assert f"{p}.{up}" in dag.get_task(f"{p}.{down}").upstream_task_ids, (up, down)
        # a wave opens (and judges, and finds what to bring back) whatever happened before it
        for task in ("open", "judge", "to_roll_back"):
            assert dag.get_task(f"{p}.{task}").trigger_rule == "all_done", task
        assert dag.get_task(f"{p}.open").upstream_task_ids == ({"plan"} if n == 1 else {f"wave_{n - 1}.rollback"})
        for mapped in ("migrate", "rollback"):  # one task instance per application
            assert type(dag.get_task(f"{p}.{mapped}")).__name__ == "MappedOperator", mapped
    assert dag.get_task("report").trigger_rule == "all_done"
    assert dag.get_task("report").upstream_task_ids == {f"wave_{module.MAX_WAVES}.rollback"}
    assert dag.max_active_runs == 1


def _record(number: int, proceed: bool = True, failed: tuple[str, ...] = ()) -> WaveRecord:
    return WaveRecord(number=number, canary=number == 1, wave_hash="h", apps=("a",), group_ids=("g",),
                      verdict=WaveVerdict(wave=number, proceed=proceed, reason="r", failed_apps=failed))


PLANNED = {"nothing_to_do": False, "plan": {"waves": [{}, {}, {}]}}


@pytest.mark.parametrize("case, args, expected", [
    ("no plan", ({"dry_run": False}, None, [], {}), "failed"),
    ("dry run", ({"dry_run": True}, PLANNED, [], {}), "dry_run"),
    ("nothing", ({"dry_run": False}, {**PLANNED, "nothing_to_do": True}, [], {}), "nothing_to_do"),
    ("all waves", ({"dry_run": False}, PLANNED, [_record(1), _record(2), _record(3)], {}), "completed"),
    ("slots left", ({"dry_run": False}, PLANNED, [_record(1), _record(2)], {}), "partial"),
    ("budget stop", ({"dry_run": False}, PLANNED, [_record(1), _record(2, False, ("b",))], {}), "stopped"),
    ("within budget", ({"dry_run": False}, PLANNED, [_record(1), _record(2, True, ("b",)), _record(3)], {}),
     "completed_with_failures"),
    ("recheck failed", ({"dry_run": False}, PLANNED, [_record(1)], {"wave_2.recheck": "failed"}), "failed"),
])
def test_the_fleet_outcome(module, case, args, expected):
    assert module.fleet_outcome(*args) == expected, case


def test_a_rejected_wave_is_the_outcome_unless_the_budget_stopped_first(module):
    assert module.fleet_outcome({"dry_run": False}, PLANNED, [_record(1)], {}, rejected=True) == "rejected"
    stopped = [_record(1, False, ("a",))]
    assert module.fleet_outcome({"dry_run": False}, PLANNED, stopped, {}, rejected=True) == "stopped"
