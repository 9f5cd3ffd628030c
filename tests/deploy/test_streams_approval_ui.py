"""The offline streams migration's approval in the web UI shows the application's controller (the deployment's
``command`` entry: WordCountDemo under a real supervisord), the exact commands it will run, the instances the
platform shows and the client configuration the lint read from it, and the restart's rebalance delay it will set
(and put back); a rejection there changes nothing: no stop, no group config."""

from __future__ import annotations

import time

from playwright.sync_api import expect

from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.windows import open_window
from tests.deploy.browser import UI_TIMEOUT_MS, shot, signed_in
from tests.deploy.deployment import Deployment, wait_for
from tests.e2e.test_streams_offline_migration import classic_wordcount

DAG_ID = "kip1071_streams_offline_migration"
APP_ID = "deploy-approval-wordcount"
DELAY = "streams.initial.rebalance.delay.ms"


def test_the_restart_delay_is_in_the_approval_and_a_rejection_changes_nothing(deployment: Deployment, kafka, browser,
                                                                            screenshots, controllers, supervisor):
    admin = KafkaAdmin(ClientSettings(deployment.bootstrap))
    controller = classic_wordcount(kafka, admin, APP_ID, f"w{time.time_ns()}", controllers, supervisor=supervisor)
    try:
        deployment.api("alice", "PATCH", f"/dags/{DAG_ID}", json={"is_paused": False}).raise_for_status()
        response = deployment.api("alice", "POST", f"/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": {
            "application_id": APP_ID, "restart_rebalance_delay_ms": 0, "poll_seconds": 0.5,
            "app_controller": APP_ID, **open_window()}})
        response.raise_for_status()
        run_id = response.json()["dag_run_id"]
        detail = deployment.wait_approval(DAG_ID, run_id)
        assert DELAY in detail["body"], detail["body"]

        with signed_in(browser, deployment, "bob") as page:  # the approver reads what the run will do
            page.goto(f"{deployment.base_url}/dags/{DAG_ID}/runs/{run_id}/tasks/approval/required_actions")
            expect(page.get_by_text("Who may approve")).to_be_visible(timeout=UI_TIMEOUT_MS)
            expect(page.get_by_text(DELAY).first).to_be_visible()
            expect(page.get_by_text("for the restart only: put back once the streams group is Stable").first
                   ).to_be_visible()
            # the controller, its exact commands, the platform's instances and the config the lint read from it
            expect(page.get_by_text(f"application controller: {APP_ID} (kind command)").first).to_be_visible()
            expect(page.get_by_text(f"{supervisor.ctl} stop").first).to_be_visible()
            expect(page.get_by_text("instances now (the platform): 1 instance(s) running").first).to_be_visible()
            expect(page.get_by_text(f"client config linted: controller '{APP_ID}'").first).to_be_visible()
            shot(page, screenshots, "streams_offline_restart_delay_approval")
            page.get_by_role("button", name="Reject").click()
            wait_for(lambda: not deployment.pending_approvals(DAG_ID, run_id), 60, "rejection recorded",
                     alive=deployment.check)

        deployment.wait_run(DAG_ID, run_id)
        states = deployment.states(DAG_ID, run_id)
        assert states.get("report") == "success", states
        assert states.get("stop_application") != "success", states
        # nothing changed: the delay was never set, the application still runs on classic
        assert DELAY not in admin.describe_group_config(APP_ID).dynamic
        assert controller.pids() and admin.describe_group(APP_ID).type is GroupType.CLASSIC
    finally:
        controller.remove()
        admin.close()
