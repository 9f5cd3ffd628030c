"""A fleet migration in the deployment: two applications of real consumers under a real supervisord, two waves,
each approved by a second person through Airflow's HITL; the per-application moves wait Deferred in the real
triggerer; the fleet runs page (Browse > Fleet migration runs) shows the waves and each application's task
instance, and is captured for the docs (docs/screenshots/fleet_runs.png); the run's fleet report is read on its report
page (tests/deploy/reports.py). While the run goes on, ``runs.json`` is watched: a deferred move shows the step it
waits in (per application and group, from what the move records), and no wave reads "unknown" (a wave whose
validation runs reads "validating"). Afterwards a group's "fleet runs" link on the fleet page lists this run (its
conf names prefixes, not groups: the UI's own Dag Runs filter misses it), linked to its report.

A producer writes to the offline-forced application's input throughout the run (issue 32): its offline move (stop,
Empty, start on the consumer protocol) ends its lag wait by the rule against the lag before, not at a deadline, and
the test prints how long after the broker's convergence (wait_migrated) that was (docs/performance.md).

The applications' controllers are the deployment's: ``command`` entries of its registry, one running
supervisorctl on the Celery worker, the other over SSH (a real sshd, through an Airflow SSH connection created
in the deployment)."""

from __future__ import annotations

import json
from urllib.parse import quote

import yaml
from playwright.sync_api import expect

from airflow_provider_kip848.kafka.errors import GroupNotFound
from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import create_topics, produce
from kip848_harness.supervised import SupervisedConsumerApp
from kip848_harness.windows import open_window
from tests.deploy.browser import UI_TIMEOUT_MS, shot, signed_in
from tests.deploy.deployment import Deployment, wait_for
from tests.deploy.reports import check_report_in_ui
from tests.e2e.helpers import Feeder

DAG_ID = "kip848_fleet_migration"
#: app -> path forced by the ownership map (None: the verdicts decide)
APPS = {"deploy-billing": "offline", "deploy-catalog": None}
#: the applications whose commands run over SSH (the others on the Celery worker)
SSH = {"deploy-catalog": "deploy_app_hosts"}


def test_fleet_run_in_the_deployment(deployment: Deployment, browser, screenshots, tmp_path, controllers,
                                     supervisor, sshd):
    bootstrap = deployment.bootstrap
    admin = KafkaAdmin(ClientSettings(bootstrap))
    # the application host's SSH connection, as an admin creates it in the deployment (key and host key in it)
    ssh = json.loads(sshd.connection_uri("deploy_app_hosts"))
    deployment.api("alice", "POST", "/connections", json={
        "connection_id": "deploy_app_hosts", "conn_type": "ssh", "host": ssh["host"], "port": ssh["port"],
        "login": ssh["login"], "extra": json.dumps(ssh["extra"])}).raise_for_status()
    rules, apps, groups = [], [], []
    for app, path in APPS.items():
        group, topic = f"{app}-g0", f"{app}-in"
        create_topics(bootstrap, {topic: 2})
        produce(bootstrap, topic, (f"v{i}" for i in range(30)), keys=(str(i) for i in range(30)))
        controller = SupervisedConsumerApp(supervisor, group, tmp_path / app, bootstrap_servers=bootstrap,
                                           group_id=group, topics=[topic], instances=1)
        controller.install("classic")
        controllers.add(app, "command", controller.target(ssh_conn_id=SSH.get(app)),
                        description=f"{app} under supervisord" + (" (over SSH)" if app in SSH else ""))
        controller.start("classic")
        apps.append(controller)
        groups.append(group)
        rules.append({"prefix": f"{app}-", "app": app, "team": "commerce", "app_controller": app,
                      "expected_instances": 1, **({"migration": path} if path else {})})
    # the map is a file of the deployment's ownership folder ([kip848] ownership_dir): the run names it by its name
    (deployment.ownership_dir / "ownership.yaml").write_text(yaml.safe_dump({"version": 1, "rules": rules}))
    feeder: Feeder | None = None
    try:
        def caught_up() -> bool:
            try:
                return all((d := admin.describe_group(g)).state == "Stable" and len(d.members) == 1
                           and admin.group_offsets(g).total_lag == 0 for g in groups)
            except GroupNotFound:  # not formed yet
                return False

        wait_for(caught_up, 120, "both applications Stable and caught up")
        # live traffic (~20 records/s) into the offline application from before the run until it has ended
        feeder = Feeder(bootstrap, "deploy-billing-in", lambda: False, first=30, every_s=0.05, limit=1_000_000)
        feeder.start()
        deployment.api("alice", "PATCH", f"/dags/{DAG_ID}", json={"is_paused": False}).raise_for_status()
        response = deployment.api("alice", "POST", f"/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": {
            "ownership_file": "ownership.yaml", "prefixes": ["deploy-billing-", "deploy-catalog-"], "canary": 1,
            "wave_size": 1, "remove_members_after": 2, "empty_settle_seconds": 2, "poll_seconds": 1,
            "start_timeout_minutes": 3, **open_window()}})
        response.raise_for_status()
        run_id = response.json()["dag_run_id"]
        deferred_seen = []
        # what the runs page says while the run goes on: each wave's status, each move's step when deferred
        statuses: set[str] = set()
        steps: set[tuple[str, str | None, str | None]] = set()
        runs_json = deployment.session("alice")

        def watched() -> dict | None:
            body = runs_json.get(f"{deployment.base_url}/kip848/runs.json", params={"run_id": run_id},
                                 timeout=60).json()
            run = body["runs"][0] if body["runs"] else None
            for w in (run or {}).get("waves") or []:
                statuses.add(w["status"])
                for a in w["applications"]:
                    for g in a["groups"] if a["step"] else []:
                        steps.add((a["migrate"]["state"], a["step"]["step"], g["step"]))
            return run if run and run["state"] in ("success", "failed") else None

        for wave in (1, 2):  # each wave asks its own approval, answered by a second person
            detail = deployment.wait_approval(DAG_ID, run_id, timeout=300)
            assert detail["task_instance"]["task_id"] == f"wave_{wave}.approval", detail
            assert "Wave hash" in detail["body"]
            assert f"| `{list(APPS)[wave - 1]}` |" in detail["body"], "the approver sees the application's controller"
            deployment.answer(detail, "bob", "Approve").raise_for_status()

            def migrating(w: int = wave) -> list[str] | None:
                tis = deployment.api("alice", "GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances",
                                     params={"task_id": f"wave_{w}.migrate", "limit": 50}).json()["task_instances"]
                states = [t["state"] for t in tis if t["task_id"] == f"wave_{w}.migrate"]
                watched()
                return states if states and all(s in ("deferred", "success", "failed") for s in states) else None

            deferred_seen += wait_for(migrating, 300, f"wave {wave}'s move deferred or done", interval=0.5,
                                      alive=deployment.check)
        try:
            wait_for(watched, 600, f"{DAG_ID} run {run_id} finished (watched on the runs page)",
                     alive=deployment.check)
            assert feeder.is_alive() and feeder.error is None, "the producer ran throughout the run"
        finally:
            written = feeder.stop()
        run = deployment.wait_run(DAG_ID, run_id, timeout=600)
        states = deployment.states(DAG_ID, run_id)
        assert run["state"] == "success", f"{states}\n{deployment.failed_task_logs(DAG_ID, run_id)}"
        assert "deferred" in deferred_seen, deferred_seen  # the waits ran in the triggerer, no slot held
        assert deployment.xcom(DAG_ID, run_id, "report")["outcome"] == "completed"
        for g in groups:
            assert admin.group_listing(g).type is GroupType.CONSUMER, g
        # while a move was deferred, the page named the wait each group was in (never unknown), and no wave's
        # status was unknown on the way (its validation: validating)
        deferred_steps = {(step, group) for state, step, group in steps if state == "deferred"}
        assert deferred_steps and all(s and s.startswith("wait_") and g and g != "unknown"
                                      for s, g in deferred_steps), steps
        assert "unknown" not in statuses, statuses
        # the offline move under live traffic: its lag wait passed by a rule against the lag before the move
        billing = deployment.xcom(DAG_ID, run_id, "wave_1.migrate", map_index=0)
        assert billing["app"] == "deploy-billing" and billing["path"] == "offline" and billing["ok"], billing
        ended = {s["step"]: s for s in billing["steps"] if s.get("group_id") == groups[0]}
        assert ended["wait_lag"]["ok"] and ("caught up by the baseline rule" in ended["wait_lag"]["detail"]
                                            or "caught up by the not-growing rule" in ended["wait_lag"]["detail"]), ended
        assert written > 0
        print(f"figures: deployment fleet offline move lag wait ended "
              f"{ended['wait_lag']['ended_at'] - ended['wait_migrated']['ended_at']:.1f} s after the group was "
              f"migrated, {written} records written; {ended['wait_lag']['detail']}")
        print(f"wave statuses seen during the run: {sorted(statuses)}; steps: {sorted(map(str, steps))}")

        with signed_in(browser, deployment, "alice") as page:
            page.get_by_role("button", name="Browse").click()
            page.get_by_role("menuitem", name="Fleet migration runs").click()
            page.wait_for_url(f"{deployment.base_url}/plugin/kip848-fleet-runs**")
            runs = page.frame_locator("iframe[title='Fleet migration runs']")
            for wave in (1, 2):
                row = runs.locator(f"tr.wave[data-wave='{wave}']").first
                expect(row).to_be_visible(timeout=UI_TIMEOUT_MS)
                expect(row).to_have_attribute("data-status", "done_ok")
                expect(row).to_contain_text("bob")
            for wave, app in enumerate(APPS, 1):  # each wave's applications, unfolded
                runs.locator(f"details.wave-apps[data-wave='{wave}'] summary").first.click()
                row = runs.locator(f"tr.app[data-app='{app}']").first
                expect(row).to_be_visible(timeout=UI_TIMEOUT_MS)
                expect(row).to_have_attribute("data-state", "success")
            shot(page, screenshots, "fleet_runs")
            # the run links to its report (the reports page)
            expect(runs.locator(f"section.run[data-run-id='{run_id}'] a.report")).to_have_attribute(
                "href", f"/kip848-reports/{DAG_ID}/{quote(run_id, safe='')}")
            # an application links to its mapped task instance in the UI
            runs.locator("tr.app[data-app='deploy-billing'] a.airflow").first.click()
            page.wait_for_url(f"{deployment.base_url}/dags/{DAG_ID}/runs/**/tasks/wave_1.migrate/mapped/0**")

            # from the fleet page, a group's "fleet runs" link lists the fleet runs whose plan moved it: this one
            page.get_by_role("button", name="Browse").click()
            page.get_by_role("menuitem", name="Kafka fleet").click()
            fleet = page.frame_locator("iframe[title='Kafka fleet']")
            row = fleet.locator(f"tr.group[data-group='{groups[0]}']")
            expect(row).to_be_visible(timeout=UI_TIMEOUT_MS)
            row.locator("a.fleet-runs").click()
            expect(fleet.locator("#group-filter")).to_have_text(groups[0])
            expect(fleet.locator(f"section.run[data-run-id='{run_id}']")).to_be_visible()
        # the same run's report page (extra link, navigation, charts, theme, screenshots): no run of its own
        check_report_in_ui(deployment, browser, screenshots, DAG_ID, run_id)
    finally:
        if feeder is not None:
            feeder.stop()  # again when the run ended early: a no-op after the first
        for c in apps:
            c.remove()
        admin.close()
