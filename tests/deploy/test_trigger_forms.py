"""Every example DAG can be triggered from its UI form with its defaults plus the fields a user must fill.

A person triggers the ten DAGs one after the other in the browser (the module's first step), and the runs go on in
the deployment side by side, as a platform team's would; each test then follows its run to its end, rejecting in the UI
what asks a second person. (One after the other, each form's run held the tier for the whole run: the fleet DAG's run
alone, refused by its closed window, is about 150 s of wave tasks.) Each DAG names its own group, so no run waits on
another's change lock.

"Unpause on trigger" stays checked, as a person leaves it: no example DAG has a schedule of its own, so each form
creates exactly one run (counted by REST once every run ended). The one schedule the tier gives (the streams
migration's, deployment.STREAMS_SCHEDULE, as docs/deploy.md shows) makes Airflow start the latest window's run when
the DAG is unpaused; that run is refused at its first task (no controller configured, the example's application)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from kip848_harness.clients import consume, create_topics, produce
from tests.deploy.browser import fill_param, open_trigger_form, shot, signed_in, submit_trigger_form
from tests.deploy.deployment import STREAMS_SCHEDULE, Deployment, wait_for

FORM_TOPIC = "deploy-form-orders"
#: What a user must type into each DAG's trigger form; everything else keeps its default. Each group (a classic group
#: with committed offsets) is named by one DAG only: runs on one group would refuse each other at the change lock.
MUST_FILL: dict[str, dict[str, str]] = {
    "kafka_cluster_inventory": {},
    "kafka_enable_streams_protocol": {},
    "kafka_group_config_change": {"group_id": "deploy-form-config-app"},
    "kip848_consumer_rolling_upgrade": {"group_id": "deploy-form-rolling-app"},
    "kip848_consumer_offline_migration": {"group_id": "deploy-form-offline-app"},
    "kip1071_streams_offline_migration": {},
    "kip1071_streams_rollback_to_classic": {"application_id": "deploy-form-streams-app"},
    "kip848_fleet_migration": {},
    # a group id that does not exist (form_groups does not create it): nothing to delete, the run says so
    "kip1071_delete_streams_group": {"group_id": "deploy-form-deleted-streams-app"},
    # streams.version=0 with its defaults: asks for approval when no streams group has members, else refused
    "kafka_disable_group_feature": {},
}
#: form values that name no group to create (form_groups skips them)
ABSENT_GROUPS = {"deploy-form-deleted-streams-app"}
#: DAGs whose run with these inputs must ask a person (the others may have nothing to change)
ASKS_APPROVAL = {"kafka_group_config_change", "kip848_consumer_rolling_upgrade"}
#: the runbooks' approval screenshots (docs/runbooks/*.md), taken here as the approver sees them
APPROVAL_SHOTS = {"kafka_enable_streams_protocol": "enable_streams_protocol_approval",
                  "kafka_group_config_change": "group_config_change_approval",
                  "kip848_consumer_rolling_upgrade": "rolling_upgrade_approval"}
TERMINAL = {"success", "failed", "skipped", "upstream_failed"}
#: DAGs with downtime: they run only inside their maintenance window (the default one may be closed now)
WINDOWED = {"kip1071_streams_offline_migration", "kip848_consumer_offline_migration",
            "kip1071_streams_rollback_to_classic", "kip848_fleet_migration"}
#: DAGs triggered by their own test, after the others ended: kafka_disable_group_feature takes the change lock
#: feature:streams.version that kafka_enable_streams_protocol's run holds while it asks for approval (triggered
#: together, one of them would be refused "locked": tests/e2e/test_locked_runs.py covers that)
LATE = ("kafka_disable_group_feature",)
#: the longest run first: the others overlap with it
TRIGGER_ORDER = ["kip848_fleet_migration", *sorted(set(MUST_FILL) - {"kip848_fleet_migration", *LATE})]
#: the tests' order: the late DAGs last
TEST_ORDER = [*sorted(set(MUST_FILL) - set(LATE)), *LATE]


@pytest.fixture(scope="module")
def form_groups(deployment: Deployment) -> list[str]:
    """The groups the forms' id fields name, each with committed offsets."""
    create_topics(deployment.bootstrap, {FORM_TOPIC: 2})
    produce(deployment.bootstrap, FORM_TOPIC, (f"v{i}" for i in range(20)))
    groups = [v for fill in MUST_FILL.values() for v in fill.values() if v not in ABSENT_GROUPS]
    for group in groups:
        # the config change's default key is a consumer group's (consumer.session.timeout.ms): its group is one
        protocol = "consumer" if group == MUST_FILL["kafka_group_config_change"]["group_id"] else "classic"
        consume(deployment.bootstrap, group, [FORM_TOPIC], 20, group_protocol=protocol)
    return groups


#: the DAG the tier gives a schedule ([kip848] <dag_id>_schedule): the others must have none
SCHEDULED_BY_THE_TIER = STREAMS_SCHEDULE[0].removesuffix("_schedule")
#: each DAG's runs before this module's forms were submitted (other tests of the tier trigger some DAGs too)
RUNS_BEFORE: dict[str, set[str]] = {}
#: the DAGs that were paused when their form was opened: its "Unpause on trigger" (checked) unpaused them
UNPAUSED_BY_THE_FORM: set[str] = set()


def trigger_from_form(page, deployment: Deployment, screenshots, dag_id: str) -> dict[str, Any]:
    """Fill ``dag_id``'s form as MUST_FILL says, submit it with "Unpause on trigger" as the form has it (checked),
    and return the new manual run."""
    before = {r["dag_run_id"] for r in deployment.runs(dag_id)}
    RUNS_BEFORE.setdefault(dag_id, before)
    paused = deployment.api("alice", "GET", f"/dags/{dag_id}").json()["is_paused"]
    open_trigger_form(page, deployment, dag_id)
    if paused:  # the form offers the checkbox only for a paused DAG (another test of the tier may have unpaused it)
        expect(page.get_by_text(f"Unpause {dag_id} on trigger")).to_be_visible()
        UNPAUSED_BY_THE_FORM.add(dag_id)
    for name, value in MUST_FILL[dag_id].items():
        fill_param(page, name, value)
    if dag_id == "kip848_consumer_rolling_upgrade":
        shot(page, screenshots, "trigger_form")
    submit_trigger_form(page)
    return wait_for(lambda: next((r for r in deployment.runs(dag_id) if r["dag_run_id"] not in before
                                  and r["run_type"] == "manual"), None),
                    60, f"a new {dag_id} run", alive=deployment.check)


@pytest.fixture(scope="module")
def triggered(deployment: Deployment, browser, screenshots, form_groups) -> dict[str, dict[str, Any] | Exception]:
    """alice triggers every DAG but the LATE ones from its form: each DAG's new run, or what went wrong (its own
    test reports it)."""
    runs: dict[str, dict[str, Any] | Exception] = {}
    with signed_in(browser, deployment, "alice") as page:
        for dag_id in TRIGGER_ORDER:
            try:
                runs[dag_id] = trigger_from_form(page, deployment, screenshots, dag_id)
            except Exception as exc:  # noqa: BLE001 - reported by this DAG's own test
                runs[dag_id] = exc
    return runs


def test_the_forms_cover_every_example_dag(deployment: Deployment):
    assert set(MUST_FILL) == deployment.dag_ids()


@pytest.mark.parametrize("dag_id", TEST_ORDER)
def test_trigger_from_the_form_with_defaults(deployment: Deployment, browser, screenshots, triggered, dag_id):
    if dag_id in LATE:  # the runs it would contend with have ended (their tests ran first)
        with signed_in(browser, deployment, "alice") as page:
            triggered[dag_id] = trigger_from_form(page, deployment, screenshots, dag_id)
    run = triggered[dag_id]
    if isinstance(run, Exception):
        raise run
    run_id = run["dag_run_id"]
    assert run["triggering_user_name"] == "alice"
    for name, value in MUST_FILL[dag_id].items():
        assert run["conf"].get(name) == value, run["conf"]

    # the run starts: its first tasks are run by a Celery worker and reach an end state
    def started() -> list[dict]:
        return [ti for ti in deployment.task_instances(dag_id, run_id).values()
                if ti["state"] in TERMINAL and ti["hostname"]]

    done = wait_for(started, 300, f"{dag_id}: a task run by a worker", interval=1, alive=deployment.check)
    assert done

    # the run either ends or asks a second person; bob reads the approval in the UI and rejects it there
    def asked_or_ended() -> list[dict] | dict | None:
        if pending := deployment.pending_approvals(dag_id, run_id):
            return pending
        current = deployment.run(dag_id, run_id)
        return current if current["state"] in ("success", "failed") else None

    waiting = wait_for(asked_or_ended, 300, f"{dag_id} run {run_id} asks or ends", interval=1,
                       alive=deployment.check)
    if dag_id in ASKS_APPROVAL:
        assert isinstance(waiting, list), f"{dag_id} did not ask for approval: {deployment.states(dag_id, run_id)}"
    if isinstance(waiting, list):
        with signed_in(browser, deployment, "bob") as page:
            page.goto(f"{deployment.base_url}/dags/{dag_id}/runs/{run_id}/tasks/approval/required_actions")
            expect(page.get_by_text("Who may approve")).to_be_visible()
            shot(page, screenshots, APPROVAL_SHOTS.get(dag_id, f"{dag_id}_approval"))
            page.get_by_role("button", name="Reject").click()
            wait_for(lambda: not deployment.pending_approvals(dag_id, run_id), 60, "rejection recorded",
                     alive=deployment.check)
    final = deployment.wait_run(dag_id, run_id)
    states = {t: ti["state"] for t, ti in deployment.task_instances(dag_id, run_id).items()}
    if dag_id == "kafka_cluster_inventory":
        assert final["state"] == "success", states
    if dag_id in WINDOWED:
        # with their defaults these runs never change anything, whatever the time: outside the maintenance window
        # (Saturday 02:00-05:00 UTC by default) the guard refuses them; inside it, the first check after the guard
        # does: the offline DAGs' form names no application controller, the fleet's deployment has no ownership map
        changing = ("approval", "stop_application", "wait_empty", "start_application", "set_group_configs",
                    "roll_application")
        assert not [t for t in changing if states.get(t) == "success"], states
        assert not [t for t, state in states.items() if t.endswith(".migrate") and state == "success"], states
        assert final["state"] == "failed", states
        if states.get("window_guard") != "failed":
            refusing = "plan" if dag_id == "kip848_fleet_migration" else "controller"
            assert states.get(refusing) == "failed" and states.get("report") == "failed", states
        return
    assert states.get("report") == "success", states


def test_unpause_on_trigger_started_no_run_of_its_own(deployment: Deployment, triggered):
    """Last (after every form's run and the late DAGs' ended): each form made exactly one run and left its DAG
    unpaused (the paused ones through the form's checkbox, the others by the test of the tier that triggered them
    first); no DAG the deployment did not schedule has a run that is not manual, whoever unpaused it. The tier's one schedule gave the streams
    migration exactly one scheduled run (the latest window's, started when a form or a test first unpaused it),
    refused at its first task before the change lock: no controller configured, the example's application."""
    assert set(RUNS_BEFORE) == set(MUST_FILL), "run after the forms' tests"
    assert UNPAUSED_BY_THE_FORM, "no form offered 'Unpause on trigger' (every DAG unpaused before)"
    for dag_id in MUST_FILL:
        runs = deployment.runs(dag_id)
        new = [r for r in runs if r["dag_run_id"] not in RUNS_BEFORE[dag_id]]
        manual = [r for r in new if r["run_type"] == "manual"]
        assert len(manual) == 1 and manual[0]["dag_run_id"] == triggered[dag_id]["dag_run_id"], (dag_id, new)
        assert not deployment.api("alice", "GET", f"/dags/{dag_id}").json()["is_paused"], dag_id
        scheduled = [r for r in runs if r["run_type"] != "manual"]
        if dag_id != SCHEDULED_BY_THE_TIER:
            assert new == manual and not scheduled, (dag_id, new, scheduled)
            continue
        assert [r["logical_date"][:16] for r in scheduled] == ["2026-01-01T02:00"], scheduled  # 0 2 1 1 * UTC
        run = deployment.wait_run(dag_id, scheduled[0]["dag_run_id"])
        states = deployment.states(dag_id, run["dag_run_id"])
        assert run["state"] == "failed" and states["window_guard"] == "failed", states
        assert states["lock"] != "success" and states["controller"] != "success", states
        log = deployment.failed_task_logs(dag_id, run["dag_run_id"])
        assert ("This scheduled run was refused before the change lock, nothing done: a run nobody triggered uses "
                "the Params' defaults, and it names no application controller") in log, log
        assert "its application_id is the example's ('streams-wordcount', the DAG's shipped default)" in log, log
