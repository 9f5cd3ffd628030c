"""A deferrable sensor in a real DAG run (dag.test): it defers, its trigger runs, the task resumes and finishes."""

from __future__ import annotations

import json
import sys
import threading

from airflow_provider_kip848.testing.clients import ConsumerProcess, create_topics, produce
from airflow_provider_kip848.testing.waiting import wait_until as poll
from tests.conftest import REPO, wait_until
from tests.e2e.helpers import WAITING, task_state


def test_migrated_sensor_defers_through_dag_test_while_members_roll(airflow_db, kafka_conn, native, bootstrap, unique,
                                                                       tmp_path, monkeypatch):
    topic, group = unique("dagroll"), unique("dagroll-group")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, (f"v{i}" for i in range(20)))
    members = [ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id=f"c{i}",
                                     log_file=str(tmp_path / f"c{i}.log")) for i in range(2)]
    out = tmp_path / "result.json"

    monkeypatch.syspath_prepend(str(REPO / "tests" / "e2e" / "dags"))
    sys.modules.pop("test_wait_migrated", None)
    from test_wait_migrated import dag

    def roll() -> None:  # the deployment, not the DAG, restarts the consumers one by one
        # once the sensor waits (its trigger polls the group), and each new member in before the next restart
        poll(lambda: task_state("test_wait_migrated", None, "wait_migrated") in WAITING, timeout=120,
             what="the sensor waiting", interval=0.2)
        for i in range(2):
            members[i].stop()
            members[i] = ConsumerProcess.start(bootstrap, group, [topic], protocol="consumer", client_id=f"c{i}",
                                               log_file=str(tmp_path / f"c{i}-new.log"))
            poll(lambda n=i + 1: sum(m.protocol.value == "consumer" for m in native.describe_group(group).members)
                 >= n, timeout=120, what=f"{i + 1} member(s) on the consumer protocol")

    roller = threading.Thread(target=roll, daemon=True)
    try:
        wait_until(lambda: len(native.describe_group(group).members) == 2, what="two classic members")
        roller.start()
        run = dag.test(run_conf={"group_id": group, "out": str(out)}, use_executor=False)
        roller.join(60)
    finally:
        for m in members:
            m.stop()
    assert str(run.state) in ("success", "DagRunState.SUCCESS")
    result = json.loads(out.read_text())
    assert result["mode"] == "deferred", "the wait ran in the trigger, not by poking"
    assert result["polls"] > 1
    assert result["detail"]["classic_members"] == 0 and len(result["detail"]["members"]) == 2
