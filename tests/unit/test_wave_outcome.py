"""The wave verdicts a caller acts on (strict: no report is unknown, never a pass), the standalone master's
endpoints read from a Spark connection, and the wave operator's refusals of bad input before Spark starts."""

from __future__ import annotations

import json

import pytest

from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.spark import wave
from airflow_provider_kip848.spark.standalone import DriverStatus, PythonSubmission, StandaloneMaster


def _report(*groups, passed=None):
    gs = [{"group_id": g, "passed": ok, "verdicts": [{"check": "lag", "passed": ok, "summary": "s"}]}
          for g, ok in groups]
    return {"passed": all(ok for _, ok in groups) if passed is None else passed, "overall": {}, "groups": gs,
            "context": {"application_id": "app-1", "master": "spark://h:7077"}}


def test_every_group_passing_is_a_pass():
    out = wave.outcome(["a", "b"], _report(("a", True), ("b", True)))
    assert (out["verdict"], out["passed"]) == ("pass", True)
    assert {g: v["verdict"] for g, v in out["groups"].items()} == {"a": "pass", "b": "pass"}
    assert out["application_id"] == "app-1"
    assert len(json.dumps(out)) < 2000  # an XCom, not a report


def test_no_report_is_unknown_for_every_group_never_a_pass():
    out = wave.outcome(["a", "b"], None, reason="driver ended FAILED")
    assert (out["verdict"], out["passed"]) == ("unknown", False)
    assert all(v["verdict"] == "unknown" and v["detail"] == "driver ended FAILED" for v in out["groups"].values())


def test_a_group_the_report_does_not_judge_is_unknown_and_a_failure_wins_over_unknown():
    assert wave.outcome(["a", "b"], _report(("a", True)))["groups"]["b"]["verdict"] == "unknown"
    assert wave.outcome(["a", "b"], _report(("a", True)))["verdict"] == "unknown"
    out = wave.outcome(["a", "b"], _report(("a", False)))
    assert out["verdict"] == "fail" and out["groups"]["a"]["failed_checks"] == ["lag"]


def test_a_report_that_contradicts_itself_is_not_a_pass():
    assert wave.outcome(["a"], _report(("a", True), passed=False))["verdict"] == "unknown"
    empty = {"passed": True, "overall": {}, "groups": [{"group_id": "a", "passed": True, "verdicts": []}]}
    assert wave.outcome(["a"], empty)["verdict"] == "fail"  # a group with no check run did not pass


def test_reading_a_missing_or_broken_report_says_why(tmp_path):
    assert wave.read_report(tmp_path / "none.json") == (None, f"the job wrote no report at {tmp_path / 'none.json'}")
    (tmp_path / "bad.json").write_text("{not json")
    assert "unreadable" in wave.read_report(tmp_path / "bad.json")[1]
    (tmp_path / "other.json").write_text("[1]")
    assert "not a wave validation report" in wave.read_report(tmp_path / "other.json")[1]


@pytest.mark.parametrize("host, port, extra, expected", [
    ("spark://m1", 7077, {"rest-port": 6066}, ("spark://m1:7077", "http://m1:6066")),
    ("spark://m1:7078", None, {}, ("spark://m1:7078", "http://m1:6066")),
    ("spark://m1", 7077, {"rest-port": "16066", "rest-scheme": "https"}, ("spark://m1:7077", "https://m1:16066")),
])
def test_the_standalone_master_of_a_spark_connection(host, port, extra, expected):
    m = StandaloneMaster.from_connection(host, port, extra)
    assert (m.master_url, m.rest_url) == expected


@pytest.mark.parametrize("host, port, extra, message", [
    ("yarn", None, {}, "standalone master"),
    ("spark://m1:7077,m2:7077", None, {}, "several"),
    ("spark://m1", None, {}, "no port"),
    ("spark://m1", 7077, {"rest-port": "x"}, "rest-port"),
    ("spark://m1", 7077, {"rest-scheme": "ftp"}, "not valid"),
])
def test_a_connection_that_is_not_one_standalone_master_is_refused(host, port, extra, message):
    with pytest.raises(InvalidArgument, match=message):
        StandaloneMaster.from_connection(host, port, extra)


def test_the_cluster_mode_request_runs_python_through_pythonrunner_and_carries_no_secret():
    request = PythonSubmission("/shared/main.py", ["/shared/pkg.zip"], ["--spec", "/shared/spec.json"],
                               spark_properties={"spark.cores.max": "2"}).request(
        StandaloneMaster("spark://m:7077", "http://m:6066"), spark_version="4.2.0", runner_jar="/opt/spark-core.jar")
    assert request["mainClass"] == "org.apache.spark.deploy.PythonRunner"
    assert request["appResource"] == "file:/opt/spark-core.jar"
    assert request["appArgs"] == ["/shared/main.py", "/shared/pkg.zip", "--spec", "/shared/spec.json"]
    assert request["sparkProperties"]["spark.submit.deployMode"] == "cluster"
    assert request["sparkProperties"]["spark.cores.max"] == "2"


def test_driver_states():
    assert DriverStatus.from_response("d", {"success": True, "driverState": "FINISHED"}).terminal
    failed = DriverStatus.from_response("d", {"success": True, "driverState": "KILLED"})
    assert failed.terminal and failed.failed
    assert DriverStatus.from_response("d", {"success": False}).state is None


def test_the_operator_refuses_bad_input_when_the_dag_is_parsed():
    from airflow_provider_kip848.operators.wave_validation import KafkaWaveValidationOperator

    with pytest.raises(InvalidArgument, match="mode"):
        KafkaWaveValidationOperator(task_id="v", groups=[], output_dir="/tmp/x", mode="yarn")
    with pytest.raises(InvalidArgument, match="output_dir"):
        KafkaWaveValidationOperator(task_id="v", groups=[], output_dir="")
    # a templated mode is checked when it is rendered
    KafkaWaveValidationOperator(task_id="v", groups=[], output_dir="/tmp/x", mode="{{ params.mode }}")


def test_bad_input_is_refused_before_any_spark_job_starts(monkeypatch, tmp_path, context):
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_provider_kip848.kafka.model import OffsetSnapshot
    from airflow_provider_kip848.operators.wave_validation import KafkaWaveValidationOperator
    from tests.conftest import set_kafka_connection

    set_kafka_connection(monkeypatch, "kafka_admin_default", "127.0.0.1:1")  # never contacted
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_YARN", json.dumps({"conn_type": "spark", "host": "yarn"}))

    def refused(match, **kwargs):
        args = {"task_id": "v", "output_dir": str(tmp_path / "out"), "groups": [{"group_id": "g", "lag": {
            "after": str(tmp_path / "missing.json")}}], **kwargs}
        with pytest.raises(AirflowFailException, match=match):
            KafkaWaveValidationOperator(**args).execute(context)

    refused("missing.json")  # a snapshot that cannot be read
    refused("asks for no check", groups=[{"group_id": "g"}])
    refused("non-empty list", groups=[])
    snapshot = tmp_path / "s.json"
    snapshot.write_text(OffsetSnapshot("c", "g", "consumer", "Stable", "2026-01-01T00:00:00+00:00", ()).to_json())
    refused("standalone master", mode="cluster", spark_conn_id="spark_yarn",
            groups=[{"group_id": "g", "lag": {"after": str(snapshot)}}])
    assert not (tmp_path / "out").exists()  # nothing was staged: no spec (with secrets) written anywhere
