"""A deferrable sensor in a real DAG run (dag.test): it defers, its trigger runs, the task resumes and finishes."""

from __future__ import annotations

import json
import sys
import threading
import time

from kip848_harness.clients import ConsumerProcess, create_topics, produce
from tests.conftest import REPO, wait_until


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
        time.sleep(4)
        for i in range(2):
            members[i].stop()
            members[i] = ConsumerProcess.start(bootstrap, group, [topic], protocol="consumer", client_id=f"c{i}",
                                               log_file=str(tmp_path / f"c{i}-new.log"))
            time.sleep(3)

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
