"""A run that cannot take its change lock ends the same way in every DAG: outcome ``locked``, the run FAILED, the
holder named (DAG, run, task, who triggered it, since when), nothing changed.

Another run holds the lock (its holder record written as that run's lock task writes it; a run this Airflow does
not know, so it is never taken over as stale). Each change DAG is run once, for real (not a dry run: dry runs take
no lock), and stops at its ``lock`` task, which comes before anything it changes; its report task still runs.
Before the fix the three downtime DAGs and the rolling upgrade ended green (their own failing outcomes did not
list ``locked``) while the group-config change ended failed, and the fleet's outcome was ``failed``.
"""

from __future__ import annotations

import os

import pytest

from airflow_provider_kip848.changecontrol.window import MaintenanceWindow
from airflow_provider_kip848.kafka.lock import ChangeLock, LockHolder
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.fleet_tasks import MIGRATION
from kip848_harness.clients import consume, create_topics, produce
from kip848_harness.windows import open_window
from tests.e2e.helpers import load_dag, run_dag, shown, state

#: dag -> (the resource its lock task locks, given the group; what its form needs beyond the group and defaults)
DAGS = {
    "kafka_group_config_change": (lambda g: f"group:{g}", {"key": "consumer.session.timeout.ms", "value": "50000",
                                                           "action": "set"}),
    "kafka_enable_streams_protocol": (lambda g: "feature:share.version", {"feature": "share.version", "level": 1}),
    "kafka_disable_group_feature": (lambda g: "feature:share.version", {"feature": "share.version", "level": 0}),
    "kip1071_delete_streams_group": (lambda g: f"group:{g}", {}),
    "kip848_consumer_rolling_upgrade": (lambda g: f"group:{g}", {}),
    "kip848_consumer_offline_migration": (lambda g: f"group:{g}", {"app_controller": "CONTROLLER"}),
    "kip1071_streams_offline_migration": (lambda g: f"group:{g}", {"app_controller": "CONTROLLER"}),
    "kip1071_streams_rollback_to_classic": (lambda g: f"group:{g}", {"app_controller": "CONTROLLER"}),
    "kip848_fleet_migration": (lambda g: f"fleet:{MIGRATION}", {}),
}


#: the tasks a locked run may still run: reads before the lock, the report, and what changes nothing after it
READ_ONLY = {"window_guard", "controller", "report", "metrics_before", "metrics_during", "metrics_after",
             "delay_was_lowered"}


@pytest.fixture(scope="module")
def held_group(kafka):
    """An empty classic group with committed offsets (what a locked run must leave as it is)."""
    bootstrap = kafka.bootstrap_servers
    topic, group = f"locked-runs-in-{os.getpid()}", f"locked-runs-{os.getpid()}"
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, [b"1", b"2", b"3", b"4"])
    consume(bootstrap, group, [topic], 3, group_protocol="classic")
    return group


@pytest.fixture(scope="module")
def noop_controller(controllers):
    """A registered controller whose commands change nothing (the offline DAGs' controller task runs before the
    lock and needs one)."""
    return controllers.add("locked-runs-noop", "command", {
        "commands": {"stop": "true", "start": "true", "status": "echo '[]'",
                     "config": "echo group.protocol=classic"}})


def cluster(admin: KafkaAdmin, group: str) -> dict:
    """Everything a run stopped at its lock may not have changed."""
    return {"features": {n: f.finalized_level for n, f in admin.describe_features().features.items()},
            "configs": admin.describe_group_config(group).dynamic,
            "offsets": {str(tp): o for tp, o in admin.group_offsets(group).committed.items()},
            # the run's own group: other tests' groups on the worker's broker change on their own
            "listing": sorted((g.group_id, g.type.value) for g in admin.list_groups() if g.group_id == group)}


@pytest.mark.parametrize("dag_id", list(DAGS))
def test_a_run_that_cannot_take_the_lock_ends_locked_and_failed_naming_the_holder(
        dag_id, airflow_db, kafka_conn, bootstrap, held_group, noop_controller, run_files, capfd):
    resource, extra = DAGS[dag_id]
    params = set(load_dag(dag_id).params)
    group_param = "application_id" if "application_id" in params else "group_id"
    conf = {**{k: v for k, v in open_window().items() if k in params},
            **({group_param: held_group} if group_param in params else {}),
            **{k: noop_controller if v == "CONTROLLER" else v for k, v in extra.items()}, "dry_run": False}
    conf = {k: v for k, v in conf.items() if k in params}
    other = LockHolder(owner="kip848_consumer_offline_migration/manual__elsewhere",
                       dag_id="kip848_consumer_offline_migration", run_id="manual__elsewhere", task_id="lock",
                       triggered_by="alice", host="worker-9")
    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        lock = ChangeLock(admin, resource(held_group))
        lock.acquire(other)
        try:
            before = cluster(admin, held_group)
            capfd.readouterr()
            run, answers, report = run_dag(dag_id, conf)
            out, err = capfd.readouterr()
            named = ("DAG kip848_consumer_offline_migration run manual__elsewhere task lock, triggered by alice "
                     "(on worker-9 since ")
            assert state(run) == "failed", (dag_id, report)
            assert report["outcome"] == "locked" and answers == [], report
            states = {ti.task_id: ti.state for ti in run.get_task_instances()}
            # before the lock only reads ran (the window, the controller's check); after it, only the report and
            # the side branches that read the brokers' metrics or decide to do nothing
            ran = {t for t, s in states.items() if s == "success"}
            assert states["lock"] == "failed" and ran <= READ_ONLY, (sorted(ran - READ_ONLY), states)
            lock_section = report["lock"] if "lock" in report else report["locks"]["fleet"]
            assert named in lock_section["refused"] and named in lock_section["held_by"], lock_section
            assert "Wait for that run to finish" in lock_section["refused"]
            markdown = run_files.report_md(dag_id, run.run_id)
            assert "change lock: **refused**" in markdown and named in shown(markdown)  # names are inert text
            assert f"Change lock on {resource(held_group)} refused: held by {named}" in out + err, "the task log"
            window = (report.get("results") or {}).get("window")
            if window is not None:  # the guard's result (its log line is INFO, below the tests' log level)
                understood = MaintenanceWindow.parse(conf["window_days"], conf["window_start"], conf["window_end"],
                                                     conf["window_tz"]).understood()
                assert window["understood"]["understood"] == understood and window["max_hours"] == 12, window
            assert cluster(admin, held_group) == before, "nothing changed"
            assert lock.holder().owner == other.owner, "the other run still holds its lock"
        finally:
            lock.release(other.owner)
