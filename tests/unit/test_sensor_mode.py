"""The waits' mode: deferred by default, the deployment's [kip848] default_deferrable when a DAG does not choose.

Real Airflow configuration (an ``AIRFLOW__KIP848__DEFAULT_DEFERRABLE`` environment variable, as a deployment sets
it) and real sensors; building a sensor reads no broker, so no Kafka is needed here.
"""

from __future__ import annotations

import pytest

from airflow_provider_kip848.get_provider_info import get_provider_info
from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.sensors.group import KafkaGroupConditionSensor, KafkaGroupStateSensor
from tests.conftest import REPO

ENV = "AIRFLOW__KIP848__DEFAULT_DEFERRABLE"


def _wait(**kwargs: object) -> KafkaGroupStateSensor:
    return KafkaGroupStateSensor(task_id="wait", group_id="orders", states=["Empty"], **kwargs)


def test_the_option_is_declared_in_the_provider_config_as_a_boolean_defaulting_to_true():
    option = get_provider_info()["config"]["kip848"]["options"]["default_deferrable"]
    assert option["type"] == "boolean" and option["default"] == "True"
    assert "triggerer" in option["description"]


def test_a_wait_defers_unless_the_deployment_or_the_dag_says_otherwise(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert _wait().deferrable is True  # unset: deferred, no worker slot held while a migration waits
    monkeypatch.setenv(ENV, "False")  # a deployment without a triggerer
    assert _wait().deferrable is False
    assert _wait(deferrable=True).deferrable is True  # an explicit argument wins, both ways
    monkeypatch.setenv(ENV, "true")
    assert _wait(deferrable=False).deferrable is False


def test_an_option_that_is_not_true_or_false_fails_the_dag_naming_it(monkeypatch):
    monkeypatch.setenv(ENV, "perhaps")
    with pytest.raises(InvalidArgument, match=r"\[kip848\] default_deferrable"):
        _wait()
    with pytest.raises(InvalidArgument, match="deferrable"):
        _wait(deferrable="sometimes")


def test_the_example_dags_waits_follow_the_deployment(monkeypatch):
    """The runbooks do not pin the mode: every wait of every example DAG takes the deployment's."""
    from airflow.dag_processing.dagbag import DagBag

    for setting, expected in (("True", True), ("False", False)):
        monkeypatch.setenv(ENV, setting)
        bag = DagBag(dag_folder=str(REPO / "dags"))
        assert bag.import_errors == {}
        waits = [task for dag in bag.dags.values() for task in dag.tasks
                 if isinstance(task, KafkaGroupConditionSensor)]
        assert len(waits) >= 10
        assert {task.task_id: task.deferrable for task in waits} == {task.task_id: expected for task in waits}
