"""The suite's own safety net: a test that hangs inside dag.test() still ends at its timeout.

pytest-timeout arms SIGALRM for each test; Airflow's DAG-file import timeout arms and then clears the same timer,
which silently cancelled the test's timeout in every dag.test(): a run waiting on an approval nobody answered hung
the worker until CI's 90-minute limit. tests/conftest.py switches the import timeout off in test processes.
"""

from __future__ import annotations

import signal

from tests.e2e.helpers import run_dag, state


def test_a_dag_run_leaves_the_tests_timeout_armed(airflow_db, kafka_conn, unique, run_files):
    assert signal.getitimer(signal.ITIMER_REAL)[0] > 0, "pytest-timeout armed no alarm for this test"
    # a run that ends at once: the group does not exist and the DAG is not told to configure it
    run, _, report = run_dag("kafka_group_config_change", {"group_id": unique("no-such-group"), "action": "set",
                                                           "key": "streams.num.standby.replicas", "value": "2"})
    assert state(run) == "failed" and report["failed_tasks"] == ["validate"]
    assert signal.getitimer(signal.ITIMER_REAL)[0] > 0, "dag.test() cancelled the test's timeout"
