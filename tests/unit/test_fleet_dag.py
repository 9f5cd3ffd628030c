"""The fleet migration DAG's shape and its outcome rule (its behaviour on brokers: tests/e2e/test_fleet_migration.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from airflow_provider_kip848.fleet import plan_waves, select
from airflow_provider_kip848.fleet.budget import WaveVerdict
from airflow_provider_kip848.fleet.ownership import OwnershipMap
from airflow_provider_kip848.fleet.results import WaveRecord
from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.operators import fleet_tasks
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


def test_the_shipped_dag_has_six_wave_slots_of_the_same_tasks(module):
    """The product's default: without ``KIP848_FLEET_MAX_WAVES`` the DAG file parses to six wave slots, each with
    the tasks of a slot of the session's DAG, which has fewer slots (tests/conftest.py sets two: an unused slot
    costs every test run of the DAG four task runs)."""
    env = {k: v for k, v in os.environ.items() if k != "KIP848_FLEET_MAX_WAVES"}
    code = ("import importlib.util, json, sys\n"
            "spec = importlib.util.spec_from_file_location('kip848_fleet_migration', sys.argv[1])\n"
            "m = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(m)\n"
            "print(json.dumps({'max_waves': m.MAX_WAVES, 'tasks': sorted(m.dag_object.task_ids)}))\n")
    parsed = subprocess.run([sys.executable, "-c", code, str(REPO / "dags" / "kip848_fleet_migration.py")], env=env,
                            capture_output=True, text=True, timeout=300)
    assert parsed.returncode == 0, parsed.stderr[-3000:]
    shipped = json.loads(parsed.stdout.strip().splitlines()[-1])
    assert shipped["max_waves"] == 6
    tasks = module.dag_object.task_ids
    slot = {t.split(".", 1)[1] for t in tasks if t.startswith("wave_1.")}
    outside = {t for t in tasks if not t.startswith("wave_")}
    assert {"open", "approval", "recheck", "migrate", "judge", "to_roll_back", "rollback"} <= slot
    assert set(shipped["tasks"]) == outside | {f"wave_{n}.{t}" for n in range(1, 7) for t in slot}


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
    assert fleet_tasks.fleet_outcome(*args) == expected, case


def test_a_rejected_wave_is_the_outcome_unless_the_budget_stopped_first(module):
    assert fleet_tasks.fleet_outcome({"dry_run": False}, PLANNED, [_record(1)], {}, rejected=True) == "rejected"
    stopped = [_record(1, False, ("a",))]
    assert fleet_tasks.fleet_outcome({"dry_run": False}, PLANNED, stopped, {}, rejected=True) == "stopped"


def test_each_wave_validates_its_migrated_applications_in_one_spark_application_before_the_judge(module):
    from airflow_provider_kip848.operators.wave_validation import KafkaWaveValidationOperator

    dag = module.dag_object
    for n in range(1, module.MAX_WAVES + 1):
        p = f"wave_{n}"
        for up, down in (("migrate", "to_validate"), ("to_validate", "validate"), ("validate", "judge")):
            assert f"{p}.{up}" in dag.get_task(f"{p}.{down}").upstream_task_ids, (up, down)
        # prepared whatever became of the moves (a failed application is not validated, the others are)
        assert dag.get_task(f"{p}.to_validate").trigger_rule == "all_done"
        validate = dag.get_task(f"{p}.validate")
        assert isinstance(validate, KafkaWaveValidationOperator)
        assert validate.fail_on_failure is False  # the judge counts failed groups against the budget
        assert validate.mode == "{{ params.validation_mode }}"
    mode = dag.params.get_param("validation_mode")
    assert mode.value == "local" and mode.schema["enum"] == ["local", "client", "cluster"]


class _TI:
    def __init__(self, xcoms):
        self.xcoms = xcoms

    def xcom_pull(self, task_ids=None, key="return_value", **_):
        return self.xcoms.get((task_ids, key))


def _app(app, *groups, ok=True):
    from airflow_provider_kip848.fleet.results import ApplicationResult, GroupOutcome

    return ApplicationResult(app=app, team="t", wave=1, kind="migrate", path="offline", ok=ok,
                             groups=tuple(GroupOutcome(g, ok) for g in groups))


def test_a_group_whose_validation_is_not_a_pass_fails_its_application_for_the_budget_and_the_way_back(module):
    from airflow_provider_kip848.fleet import Application, ErrorBudget, Wave
    from airflow_provider_kip848.fleet.applications import PlannedGroup

    results = [_app("a", "a-1"), _app("b", "b-1", "b-2"), _app("c", "c-1"), _app("d", "d-1", ok=False)]
    planned = {"groups": [{"group_id": g} for g in ("a-1", "b-1", "b-2", "c-1")], "output_dir": "/x"}
    verdicts = {"verdict": "fail", "summary": "s", "groups": {
        "a-1": {"verdict": "pass"}, "b-1": {"verdict": "pass"}, "b-2": {"verdict": "fail", "detail": "offsets"}}}
    ti = _TI({("wave_1.to_validate", "return_value"): planned, ("wave_1.validate", "wave_verdicts"): verdicts})
    judged = fleet_tasks.validated_results(1, results, ti, {})
    assert [r.ok for r in judged] == [True, False, False, False]
    b, c = judged[1], judged[2]
    assert [g.ok for g in b.groups] == [True, False] and "validation fail: offsets" in b.detail
    assert "validation unknown" in c.detail  # c-1 has no verdict in the report: never a pass
    wave = Wave(number=1, migration="classic_to_consumer", applications=tuple(
        Application(app=r.app, team="t", rule_index=0, status="ready", path="offline", reason="", groups=tuple(
            PlannedGroup(g.group_id, "classic", "Stable", 1, "pending", "offline_only", "", path="offline")
            for g in r.groups)) for r in results))
    verdict = ErrorBudget(max_failed_apps=1).judge_wave(wave, [g for r in judged for g in r.group_results])
    assert set(verdict.failed_apps) == {"b", "c", "d"} and not verdict.proceed


def test_no_validation_verdict_at_all_is_unknown_for_every_validated_group(module):
    results = [_app("a", "a-1"), _app("b", "b-1")]
    planned = {"groups": [{"group_id": "a-1"}, {"group_id": "b-1"}], "output_dir": "/x"}
    judged = fleet_tasks.validated_results(1, results, _TI({("wave_1.to_validate", "return_value"): planned}), {})
    assert [r.ok for r in judged] == [False, False]
    # the validation could not even be prepared: every migrated group is unknown
    judged = fleet_tasks.validated_results(1, results, _TI({}), {"wave_1.to_validate": "failed"})
    assert [r.ok for r in judged] == [False, False]
    # nothing was migrated (no validation planned, none failed): the moves' results stand
    assert fleet_tasks.validated_results(1, results, _TI({}), {"wave_1.to_validate": "skipped"}) == results


def test_the_plan_tells_the_approvers_when_airflow_has_fewer_slots_than_a_wave_moves_at_once():
    at_once = min(fleet_tasks.PARALLELISM, 10)
    note = fleet_tasks.slot_capacity_note(10, 4)
    assert note is not None and "`core.parallelism` is 4" in note and f"at least {at_once + 2} slots" in note
    assert fleet_tasks.slot_capacity_note(10, at_once + 2) is None  # a slot per application and two for the run
    assert fleet_tasks.slot_capacity_note(10, at_once + 1) is not None
    assert fleet_tasks.slot_capacity_note(0, 1) is None  # nothing to move: nothing to say


# -- the run's selection (issue 31.1): every application only in so many words -----------------------------------


@pytest.mark.parametrize("params, what", [
    ({}, "the run selects no application: apps, teams and prefixes are empty"),
    ({"apps": [], "teams": [], "prefixes": [], "all_applications": False}, "the run selects no application"),
    ({"all_applications": True, "teams": ["payments"]}, "all_applications and teams at once"),
    ({"all_applications": True, "apps": ["a"], "prefixes": ["p-"]}, "all_applications and apps, prefixes at once"),
    ({"all_applications": "maybe"}, "all_applications must be true or false"),
])
def test_empty_filters_never_select_every_application(params, what):
    with pytest.raises(InvalidArgument) as refused:
        fleet_tasks.selection_filters({"readiness": ["ready_online"], **params})
    assert what in str(refused.value) and refused.value.remedy


def test_the_filters_a_run_names_are_what_it_selects():
    assert fleet_tasks.selection_filters({"all_applications": True, "apps": [], "readiness": ["ready_online"]}) == {
        "apps": None, "teams": None, "prefixes": None, "readiness": ["ready_online"]}
    assert fleet_tasks.selection_filters({"teams": ["t"], "prefixes": [], "readiness": []}) == {
        "apps": None, "teams": ["t"], "prefixes": None, "readiness": []}  # an empty readiness: select() refuses it


def test_each_wave_approval_says_what_the_run_selected(module):
    from tests.unit.test_fleet_planning import entry, inventory, ownership

    plan = plan_waves(select(inventory(entry("orders-a"), entry("pay-eu-1")), ownership(), apps=["orders"]),
                      canary=0)
    planned = {"plan": plan.to_dict(), "plan_hash": plan.plan_hash}

    class TI:
        def xcom_pull(self, task_ids=None, key="return_value"):
            return planned if task_ids == "plan" else None

    params = {**module.dag_object.params.dump(), "dry_run": False}
    opened = fleet_tasks.open_wave_step(1, params, {"ti": TI()})
    assert opened["markdown"].startswith("Selection: applications orders.\n\n### Wave 1")


def test_wave_one_approval_says_how_many_waves_are_beyond_the_run_s_slots(module):
    """The runbook's promise: with more waves than slots, wave 1's approvers read how many are left for a later run."""
    from tests.unit.test_fleet_planning import entry, inventory

    count = module.MAX_WAVES + 2
    rules = "".join(f"  - prefix: app{i}-\n    app: app{i}\n    team: t\n" for i in range(count))
    owners = OwnershipMap.from_text(f"version: 1\nrules:\n{rules}", source="map.yaml")
    selected = select(inventory(*(entry(f"app{i}-a") for i in range(count))), owners, teams=["t"])
    plan = plan_waves(selected, canary=0, wave_size=1)
    assert len(plan.waves) == module.MAX_WAVES + 2, len(plan.waves)
    planned = {"plan": plan.to_dict(), "plan_hash": plan.plan_hash, "slots": module.MAX_WAVES}

    class TI:
        def xcom_pull(self, task_ids=None, key="return_value"):
            return planned if task_ids == "plan" else None

    params = {**module.dag_object.params.dump(), "dry_run": False}
    first = fleet_tasks.open_wave_step(1, params, {"ti": TI()})["markdown"]
    assert f"**2 wave(s) of the plan are beyond this run's {module.MAX_WAVES} slots**" in first, first
    assert "this run ends partial" in first

    class Judged(TI):
        def xcom_pull(self, task_ids=None, key="return_value"):
            if task_ids == fleet_tasks.wave_task(1, fleet_tasks.JUDGE):
                return {"verdict": {"proceed": True, "reason": ""}}
            return super().xcom_pull(task_ids, key)

    second = fleet_tasks.open_wave_step(2, params, {"ti": Judged()})["markdown"]
    assert "beyond this run's" not in second, second
