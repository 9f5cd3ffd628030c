"""A live KIP-848 rolling upgrade in the deployment: the snapshot is written by one Celery worker and
compared by the other (they share no disk but the deployment's artifact location), the migrated
sensor waits Deferred in the triggerer, and the run's report is read in the UI. A producer writes
throughout the rollout and the lag wait (issue 32): the lag wait ends by its rule, not at its deadline."""

from __future__ import annotations

import time
from pathlib import Path

from playwright.sync_api import expect

from airflow_provider_kip848.kafka.errors import GroupNotFound
from airflow_provider_kip848.kafka.model import MemberProtocol
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import ConsumerProcess, create_topics, produce
from tests.deploy.browser import shot, signed_in
from tests.deploy.deployment import Deployment, wait_for
from tests.e2e.helpers import Feeder

DAG_ID = "kip848_consumer_rolling_upgrade"
INSTANCES = 2


class App:
    """The team's consumer application: instances restarted one by one by its own deployment tooling."""

    def __init__(self, bootstrap: str, group: str, topic: str, output: str, logs: Path) -> None:
        self.bootstrap, self.group, self.topic, self.output, self.logs = bootstrap, group, topic, output, logs
        self.members = [self._start(i, "classic") for i in range(INSTANCES)]

    def _start(self, i: int, protocol: str) -> ConsumerProcess:
        return ConsumerProcess.start(self.bootstrap, self.group, [self.topic], protocol=protocol,
                                     client_id=f"app-{i}", output_topic=self.output,
                                     log_file=str(self.logs / f"app-{i}-{protocol}-{time.time_ns()}.log"))

    def roll(self, admin: KafkaAdmin) -> None:
        for i in range(INSTANCES):
            self.members[i].stop()
            self.members[i] = self._start(i, "consumer")
            wait_for(lambda n=i + 1: sum(m.protocol is MemberProtocol.CONSUMER
                                                for m in admin.describe_group(self.group).members)
                     >= n, 90, f"instance {i} back on the consumer protocol")

    def stop(self) -> None:
        for m in self.members:
            m.stop()


def test_snapshot_by_one_worker_compared_by_the_other(deployment: Deployment, browser, screenshots, tmp_path):
    topic, output, group = "deploy-roll-orders", "deploy-roll-orders-out", "deploy-roll-orders-app"
    bootstrap = deployment.bootstrap
    create_topics(bootstrap, {topic: 4, output: 4})
    produce(bootstrap, topic, (f"v{i}" for i in range(200)), keys=(str(i) for i in range(200)))
    admin = KafkaAdmin(ClientSettings(bootstrap))
    app = App(bootstrap, group, topic, output, tmp_path)
    try:
        def caught_up() -> bool:
            try:
                d = admin.describe_group(group)
            except GroupNotFound:  # not formed yet
                return False
            return d.state == "Stable" and len(d.members) == INSTANCES and admin.group_offsets(group).total_lag == 0

        wait_for(caught_up, 120, "classic app caught up")

        deployment.stop_worker("worker2")  # worker1 alone runs everything up to the rollout
        deployment.api("alice", "PATCH", f"/dags/{DAG_ID}", json={"is_paused": False}).raise_for_status()
        response = deployment.api("alice", "POST", f"/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": {
            "group_id": group, "output_topic": output, "id_source": "key", "allowed_duplicates": 1000,
            "client_properties": {"group.protocol": "consumer", "enable.auto.commit": "false"},
            "expected_instances": INSTANCES, "poll_seconds": 1, "rollout_timeout_minutes": 8, "reader": "python"}})
        response.raise_for_status()
        run_id = response.json()["dag_run_id"]
        deployment.answer(deployment.wait_approval(DAG_ID, run_id), "bob", "Approve").raise_for_status()

        snapshot = deployment.wait_task(DAG_ID, run_id, "snapshot_before", {"success", "failed"})
        assert snapshot["state"] == "success", deployment.failed_task_logs(DAG_ID, run_id)
        written = deployment.xcom(DAG_ID, run_id, "snapshot_before")
        assert written["path"].startswith(str(deployment.artifacts)), written
        assert Path(written["path"]).is_file()
        deployment.wait_task(DAG_ID, run_id, "wait_migrated", {"deferred"})

        with signed_in(browser, deployment, "alice") as page:  # the waiting sensor, as the UI shows it
            page.goto(f"{deployment.base_url}/dags/{DAG_ID}/runs/{run_id}/tasks/wait_migrated")
            expect(page.get_by_text("Deferred").first).to_be_visible()
            shot(page, screenshots, "deferred_sensor")

        # worker1 leaves (its disk with it); worker2, which has seen nothing of this run, takes over
        deployment.stop_worker("worker1")
        deployment.start_worker("worker2")
        # live traffic (~50 records/s) from the snapshot before the roll until the lag wait has ended: the lag
        # never stays at 0 meanwhile. It starts after the DAG read the output's offsets before (capture_output_before
        # runs before the snapshot) and stops once the lag wait is done, seconds before the DAG reads them after
        # (snapshot_after, then capture_output_after): the output's id range is then whole (record_continuity)
        feeder = Feeder(bootstrap, topic, lambda: False, first=200, every_s=0.02, limit=1_000_000)
        feeder.start()
        try:
            app.roll(admin)
            lag_wait = deployment.wait_task(DAG_ID, run_id, "wait_lag_drained", {"success", "failed"}, timeout=600)
            assert feeder.is_alive() and feeder.error is None, "the producer ran throughout the lag wait"
        finally:
            written = feeder.stop()
        assert lag_wait["state"] == "success", deployment.failed_task_logs(DAG_ID, run_id)

        run = deployment.wait_run(DAG_ID, run_id, timeout=900)
        states = deployment.states(DAG_ID, run_id)
        assert run["state"] == "success", f"{states}\n{deployment.failed_task_logs(DAG_ID, run_id)}"
        assert states["validate"] == "success"
        validation = deployment.xcom(DAG_ID, run_id, "validate")
        passed = {v["check"]: v["passed"] for v in validation["verdicts"]}
        assert validation["passed"] and passed == {"offsets_preserved": True, "lag": True,
                                                   "record_continuity": True, "output_timing": True}, validation
        report = deployment.xcom(DAG_ID, run_id, "report")
        assert report["outcome"] == "migrated", report
        lag, migrated = deployment.xcom(DAG_ID, run_id, "wait_lag_drained"), deployment.xcom(DAG_ID, run_id,
                                                                                                "wait_migrated")
        assert lag["detail"]["rule"] in ("baseline", "not_growing") and "caught up by the" in lag["summary"], lag
        assert written > 0
        # how long after the broker's own convergence (migrated: Stable, every member reconciled) the lag wait
        # ended with the producer running: shown, not asserted (docs/performance.md)
        print(f"figures: deployment rolling upgrade lag wait ended {lag['met_at'] - migrated['met_at']:.1f} s after "
              f"the group was migrated, by the {lag['detail']['rule']} rule, {written} records written; "
              f"{lag['summary']}")

        # the compare (validate) ran after worker1 was gone: only worker2 could have read worker1's snapshot
        # (this run's logs only: other DAGs of the shared deployment have validate tasks too)
        worker1_home = deployment.root / "homes" / "worker1"
        run_logs = Path("logs") / f"dag_id={DAG_ID}" / f"run_id={run_id}" / "task_id=validate"
        assert (deployment.root / "homes" / "worker2" / run_logs).is_dir(), "validate did not run on worker2"
        assert not (worker1_home / run_logs).exists(), "validate ran on worker1"
        assert not list(worker1_home.rglob("before.json")), "the snapshot is not on a worker's own disk"

        with signed_in(browser, deployment, "alice") as page:  # the report where the UI shows it
            page.goto(f"{deployment.base_url}/dags/{DAG_ID}/runs/{run_id}/tasks/report/xcom")
            expect(page.get_by_text("migrated").first).to_be_visible()
            shot(page, screenshots, "report_in_ui")
    finally:
        app.stop()
        admin.close()
        if "worker1" not in deployment.procs:
            deployment.start_worker("worker1")
        if "worker2" not in deployment.procs:
            deployment.start_worker("worker2")
