"""Test-only DAG: a deferrable KafkaGroupMigratedSensor, its result written to a file named by the run conf."""

from __future__ import annotations

import json
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_provider_kip848.sensors.group import KafkaGroupMigratedSensor

with DAG(
    dag_id="test_wait_migrated",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={"group_id": Param("", type="string"), "out": Param("", type="string")},
) as dag:
    wait = KafkaGroupMigratedSensor(task_id="wait_migrated", group_id="{{ params.group_id }}", expected_members=2,
                                    deferrable=True, poll_interval=0.5, timeout=180)

    @task
    def record(result: dict, params: dict | None = None) -> None:
        Path(params["out"]).write_text(json.dumps(result))

    record(wait.output)
