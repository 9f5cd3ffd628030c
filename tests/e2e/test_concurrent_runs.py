"""Two runs against the same group at once: the second is refused, says who holds the group, changes nothing.

Run A of ``kafka_group_config_change`` takes the group's change lock and waits
for its approval; while it waits, run B of the same DAG and group is started in
another process (another worker, as far as the lock knows). B's ``lock`` task
fails naming A; its report's outcome is ``locked``; the group is unchanged.
A is then approved and applies its change, and releases the lock. A lock left
behind by a run that has ended (its worker died before the report) is taken
over by the next run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

from airflow_provider_kip848.kafka.lock import ChangeLock, LockHolder
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from tests.conftest import REPO
from tests.e2e.helpers import approve, run_dag, state

KEY = "consumer.session.timeout.ms"

RUN_B = """
import json, os, sys
from tests.e2e.helpers import run_dag, state
os.environ["KIP848_ARTIFACTS_URL"] = sys.argv[2]  # the test's location (tests/conftest.py sets the session's)
run, answers, report = run_dag("kafka_group_config_change", json.loads(sys.argv[1]))
print("RESULT " + json.dumps({"state": state(run), "run_id": run.run_id, "report": report}, default=str))
"""


def conf(group, value):
    """A run's conf; its report and audit records go to the test's own locations (``run_files``: the environment
    the second worker process inherits too)."""
    return {"group_id": group, "key": KEY, "value": value, "action": "set", "allow_absent_group": True}


def test_second_run_on_the_same_group_is_refused_and_says_why(airflow_db, kafka_conn, bootstrap, unique, run_files):
    group = unique("locked")
    lock = ChangeLock(KafkaAdmin(ClientSettings(bootstrap)), f"group:{group}")
    second: dict = {}

    def start_run_b_while_a_waits(detail):
        if second:
            return
        holder = lock.holder()
        second["holder_while_a_waits"] = holder.to_dict() if holder else None
        proc = subprocess.run([sys.executable, "-c", RUN_B, json.dumps(conf(group, "50000")), str(run_files.root)],
                              cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                              timeout=240)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        second["result"] = json.loads(lines[-1][7:]) if lines else {"stderr": "\n".join(ln for ln in proc.stderr.splitlines() if "Error" in ln)[-4000:]}

    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        run_a, answers, report_a = run_dag("kafka_group_config_change", conf(group, "48000"),
                                           decide=approve, before_answer=start_run_b_while_a_waits)
        assert second["holder_while_a_waits"]["run_id"] == run_a.run_id, "A held the lock while it waited"
        b = second["result"]
        assert b.get("state") == "failed", b
        report_b = b["report"]
        assert report_b["outcome"] == "locked" and report_b["failed_tasks"][0] == "lock"
        refused = report_b["lock"]["refused"]
        assert f"group:{group} is locked by DAG kafka_group_config_change run {run_a.run_id}" in refused
        assert "Wait for that run to finish" in refused and lock.topic in refused
        assert "change lock: **refused**" in run_files.report_md("kafka_group_config_change", b["run_id"])

        assert state(run_a) == "success" and report_a["outcome"] == "changed", report_a
        assert report_a["lock"]["held"] and report_a["lock"]["released"] is True
        assert lock.holder() is None, "A released the lock when it finished"
        assert admin.describe_group_config(group).dynamic == {KEY: "48000"}, "only A's change was applied"
        assert [r["run_id"] for r in _audit(run_files.audit)] == [run_a.run_id]

        # a worker died before the report: A's lock is left behind; A has ended, so the next run takes it over
        lock.acquire(LockHolder(owner=f"kafka_group_config_change/{run_a.run_id}",
                                dag_id="kafka_group_config_change", run_id=run_a.run_id))
        run_c, _, report_c = run_dag("kafka_group_config_change", conf(group, "50000"), decide=approve)
        assert state(run_c) == "success" and report_c["outcome"] == "changed", report_c
        assert report_c["lock"]["took_over_from"]["run_id"] == run_a.run_id
        assert lock.holder() is None
        assert admin.describe_group_config(group).dynamic == {KEY: "50000"}
    lock.admin.close()


def test_lock_is_exclusive_under_contention(kafka, unique):
    """Eight acquirers at once (separate clients): exactly one wins, the others are told who."""
    from airflow_provider_kip848.kafka.errors import ResourceLocked

    resource = f"group:{unique('contended')}"
    outcomes: list = []

    def contender(i: int) -> None:
        with KafkaAdmin(ClientSettings(kafka.bootstrap_servers)) as admin:
            try:
                outcomes.append(("won", ChangeLock(admin, resource).acquire(LockHolder(owner=f"run-{i}")).holder.owner))
            except ResourceLocked as exc:
                outcomes.append(("refused", exc.holder["owner"] if exc.holder else None))

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    winners = [who for outcome, who in outcomes if outcome == "won"]
    assert len(outcomes) == 8 and len(winners) == 1, outcomes
    assert {who for outcome, who in outcomes if outcome == "refused"} <= {winners[0], "(unknown: the lock topic has no holder record)"}
    with KafkaAdmin(ClientSettings(kafka.bootstrap_servers)) as admin:
        lock = ChangeLock(admin, resource)
        assert lock.holder().owner == winners[0]
        assert lock.acquire(LockHolder(owner=winners[0])).reentered, "the holder re-enters (a retried task)"
        assert not lock.release("someone-else") and lock.holder().owner == winners[0]
        assert lock.release(winners[0]) and lock.holder() is None


def _audit(path):
    from airflow_provider_kip848.changecontrol.audit import changes, read_audit

    return changes(read_audit(str(path)))
