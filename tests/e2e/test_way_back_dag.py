"""The rolling upgrade's way back at the DAG level (issue 46, item 4), on a real supervisord and the session's broker.

The finding: an instance stopped by hand during the Migrated wait; the rollback's ``roll.sh classic`` (the
supervisord recipe) read ``supervisorctl restart`` of the STOPPED process as a failure and exited 1;
``wait_previous_protocol`` was skipped and the run ended ``failed`` with instances on both protocols, said nowhere.
Here the same run must leave every instance on classic, and a way back that cannot bring one instance back must
name it and the report must say the group is mixed.
"""

from __future__ import annotations

import threading

from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from tests.conftest import wait_until
from tests.e2e.helpers import approve, run_dag, state
from tests.e2e.test_rolling_by_instance import DAG, application, conf, settled


def live(admin, group):
    return {(m.client_id, m.protocol.value) for m in admin.describe_group(group).members
            if m.member_epoch is None or m.member_epoch >= 0}


class _StopByHand(threading.Thread):
    """Stops ``process`` with supervisorctl once every instance's member is on the consumer protocol (the roll is
    done, the Migrated wait runs), as a person on the host would."""

    def __init__(self, app, admin, group, process, count):
        super().__init__(daemon=True)
        self.app, self.admin, self.group, self.process, self.count = app, admin, group, process, count
        self.stopped = threading.Event()

    def run(self):
        # the roll is over: every member on the consumer protocol and every process RUNNING (roll.sh's last wait)
        wait_until(lambda: {p for _, p in live(self.admin, self.group)} == {"consumer"}
                   and len(live(self.admin, self.group)) == self.count
                   and {self.app.state(p) for p in self.app.process_names} == {"RUNNING"},
                   timeout=240, what="rolled to consumer")
        self.app.supervisor.run_ctl("stop", self.process, check=True)
        self.stopped.set()


def test_an_instance_stopped_by_hand_during_the_wait_is_brought_back_on_classic_by_the_recipe(
        airflow_db, kafka_conn, bootstrap, unique, tmp_path, controllers, supervisor, run_files):
    app, group = application(supervisor, bootstrap, unique, tmp_path, instances=2)
    app.install("classic")
    name = controllers.add(group, "command", app.target())  # the platform's roll: the recipe's roll.sh
    admin = KafkaAdmin(ClientSettings(bootstrap))
    first, second = app.process_names
    try:
        app.start("classic")
        wait_until(lambda: settled(admin, group, "classic", 2), timeout=90, what="2 classic instances")
        hand = _StopByHand(app, admin, group, first, 2)  # roll.sh is past it (stopping the last races its wait)
        hand.start()
        run, _, report = run_dag(DAG, conf(group, tmp_path, name, rollout_timeout_minutes=1), decide=approve)
        assert hand.stopped.is_set(), "instance 0 was stopped by hand during the wait"
        print("the run:", state(run), report["outcome"], report.get("split", {}).get("summary"))
        assert report["outcome"] == "timed_out_rolled_back", report
        assert "roll_application" not in report["failed_tasks"], report["failed_tasks"]
        assert "rollback_on_timeout" not in report["failed_tasks"], report["failed_tasks"]
        split = report["split"]
        assert split["back"] and not split["mixed"], split
        assert "every instance is back on classic" in split["summary"], split
        assert set(app.pids()) == {first.split(":")[1], second.split(":")[1]}, app.pids()
        wait_until(lambda: live(admin, group) == {("app-0", "classic"), ("app-1", "classic")}, timeout=60,
                   what="both members on classic")
        assert admin.describe_group(group).type is GroupType.CLASSIC
        assert "- after the way back: every instance is back on classic" in \
            run_files.report_md(DAG, run.run_id).replace("\\", "")
    finally:
        app.remove()
        admin.close()


def test_a_way_back_that_cannot_bring_an_instance_back_names_it_and_the_report_says_mixed(
        airflow_db, kafka_conn, bootstrap, unique, tmp_path, controllers, supervisor, run_files):
    """Three instances rolled by the recipe's roll.sh; instance 0 stopped by hand during the wait; instance 1
    cannot start on classic (its crash planted on classic): the way back brings instance 0 back, stops at
    instance 1 (it ran: restarting instance 2 too could take down a second one), and the report says the group
    is mixed, naming instance 1 and instance 2's member still on the consumer protocol."""
    app, group = application(supervisor, bootstrap, unique, tmp_path, instances=3)
    app.crash_markers = True
    app.startretries = 0
    app.install("classic")
    name = controllers.add(group, "command", app.target())
    admin = KafkaAdmin(ClientSettings(bootstrap))
    zero, one, _ = app.process_names
    try:
        app.start("classic")
        wait_until(lambda: settled(admin, group, "classic", 3), timeout=90, what="3 classic instances")
        app.crash_on(1, "classic")  # the running process is not affected; a start on classic fails
        hand = _StopByHand(app, admin, group, zero, 3)
        hand.start()
        run, _, report = run_dag(DAG, conf(group, tmp_path, name, rollout_timeout_minutes=1), decide=approve)
        assert hand.stopped.is_set()
        split = report["split"]
        print("the run:", state(run), report["outcome"], split["summary"])
        assert state(run) == "failed" and "rollback_on_timeout" in report["failed_tasks"], report
        assert "roll_application" not in report["failed_tasks"], report["failed_tasks"]
        assert "- after the way back: **the group is mixed" in run_files.report_md(DAG, run.run_id)
        assert split["mixed"] and not split["back"] and split["summary"].startswith("the group is mixed"), split
        assert any(e.startswith(f"{one} (FATAL") for e in split["not_back"]), split
        assert f"{group}: app-2 on consumer" in split["members_not_back"], split
        assert f"instances not back on classic: {one} (FATAL) is not running" in \
            run_files.report_md(DAG, run.run_id).replace("\\", "")
        assert ("app-0", "classic") in live(admin, group) and ("app-2", "consumer") in live(admin, group)
    finally:
        app.remove()
        admin.close()
