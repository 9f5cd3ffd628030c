"""PySpark validation on real Kafka data: both readers, planted faults found exactly, reports, both run modes."""

from __future__ import annotations

import json
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException
from confluent_kafka import Producer

from airflow_provider_kip848.kafka.api import take_snapshot
from airflow_provider_kip848.kafka.model import TopicPartition
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.validation import (
    KafkaTopicOffsetsOperator,
    KafkaValidationOperator,
    validation_spark_submit_operator,
)
from airflow_provider_kip848.spark.job import run_spec
from airflow_provider_kip848.spark.reader import read_kafka
from kip848_harness.clients import consume, create_topics, produce

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark(spark_session):
    return spark_session


def test_python_package_and_jvm_are_the_same_spark(spark):
    import pyspark

    assert pyspark.__version__ == spark.version == version("pyspark")
    try:
        client = version("pyspark-client")  # the Spark provider's dependency writes into the same package
    except PackageNotFoundError:
        client = None
    assert client in (None, pyspark.__version__), f"mixed install: pyspark {pyspark.__version__}, pyspark-client {client}"


def _ranges(native, topics):
    return native.topic_offsets(topics)


def test_both_readers_return_identical_rows(spark, native, bootstrap, unique):
    topic = unique("read")
    create_topics(bootstrap, {topic: 3})
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(600):
        headers = [("trace", f"t{i}".encode()), ("n", None)] if i % 3 == 0 else None
        producer.produce(topic, value=f"v{i}".encode(), key=None if i % 5 == 0 else str(i).encode(),
                         headers=headers, partition=i % 3)
    producer.flush(30)
    ranges = _ranges(native, [topic])
    # a middle slice too: fixed ranges, not whole partitions
    ranges[TopicPartition(topic, 1)] = (50, 150)
    settings = ClientSettings(bootstrap)
    rows = {}
    for backend in ("connector", "python"):
        df = read_kafka(spark, settings, ranges, backend=backend)
        assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                                      "timestampType", "headers"]
        rows[backend] = sorted(df.collect(), key=lambda r: (r.partition, r.offset))
    assert rows["connector"] == rows["python"]
    assert len(rows["python"]) == 200 + 100 + 200
    with_headers = [r for r in rows["python"] if r.headers]
    assert with_headers and with_headers[0].headers[0]["key"] == "trace"


def test_planted_duplicates_and_gaps_are_found_exactly(spark, native, bootstrap, unique):
    topic = unique("ids")
    create_topics(bootstrap, {topic: 3})
    before = {str(tp): {"log_start": a, "log_end": b} for tp, (a, b) in _ranges(native, [topic]).items()}
    missing = {17, 256, 257, 600, 999}
    duplicated = {0, 5, 42, 300, 301, 777, 998}
    ids = [i for i in range(1000) if i not in missing] + sorted(duplicated)
    produce(bootstrap, topic, (json.dumps({"id": i}) for i in ids), keys=(str(i) for i in ids))
    after = {str(tp): {"log_start": a, "log_end": b} for tp, (a, b) in _ranges(native, [topic]).items()}
    for reader in ("connector", "python"):
        (verdict,) = run_spec(spark, {"bootstrap_servers": bootstrap, "reader": reader, "continuity": {
            "between": [before, after], "id_source": "json:id", "expected_min": 0, "expected_max": 999}})
        assert not verdict.passed
        assert verdict.counts["duplicates"] == 7 and verdict.counts["missing_ids"] == 5
        assert {o["duplicated_id"] for o in verdict.offending if "duplicated_id" in o} == duplicated
        assert {o["missing_id"] for o in verdict.offending if "missing_id" in o} == missing
    (by_key,) = run_spec(spark, {"bootstrap_servers": bootstrap, "continuity": {
        "between": [before, after], "id_source": "key", "allowed_duplicates": 7, "expected_min": 0,
        "expected_max": 999}})
    assert by_key.counts["missing_ids"] == 5 and not by_key.passed


def test_output_timing_finds_each_partitions_longest_gap_to_the_millisecond(spark, native, bootstrap, unique):
    """Records with timestamps the test sets (as an application's output would carry them): the longest gap of
    each partition, the overall one, and the rate buckets, with both readers."""
    topic = unique("timing")
    create_topics(bootstrap, {topic: 2})
    before = {str(tp): {"log_start": a, "log_end": b} for tp, (a, b) in _ranges(native, [topic]).items()}
    t0 = 1_790_000_000_000  # ms
    stamps = {0: [t0 + i * 100 for i in range(20)] + [t0 + 9_000 + i * 100 for i in range(10)],  # 7.1 s gap
              1: [t0 + i * 250 for i in range(10)] + [t0 + 4_500]}  # 2.25 s gap
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, times in stamps.items():
        for i, at in enumerate(reversed(times)):  # written out of time order: the gap is by timestamp
            producer.produce(topic, value=f"{partition}-{i}".encode(), partition=partition, timestamp=at)
    assert producer.flush(30) == 0
    after = {str(tp): {"log_start": a, "log_end": b} for tp, (a, b) in _ranges(native, [topic]).items()}
    for reader in ("connector", "python"):
        (verdict,) = run_spec(spark, {"bootstrap_servers": bootstrap, "reader": reader,
                                      "output_timing": {"between": [before, after]}})
        assert verdict.passed and verdict.counts == {"records": 41, "partitions": 2}
        longest = verdict.data["longest"]
        assert longest == {"partition": f"{topic}:0", "seconds": 7.1, "started_at": (t0 + 1_900) / 1000,
                           "ended_at": (t0 + 9_000) / 1000}
        assert [(p["partition"], p["seconds"]) for p in verdict.data["partitions"]] == [
            (f"{topic}:0", 7.1), (f"{topic}:1", 2.25)]
        rate = dict((t, v) for t, v in verdict.data["rate"])
        assert sum(rate.values()) == 41 and rate[t0 / 1000 + 5] == 0  # 1 s buckets; none written at +5 s
        assert verdict.data["timestamp_types"] == {"CreateTime": 41}
    (limited,) = run_spec(spark, {"bootstrap_servers": bootstrap, "output_timing": {
        "between": [before, after], "max_gap_seconds": 5}})
    assert not limited.passed and limited.offending == [limited.data["longest"]]


def test_a_regressed_committed_offset_is_found_on_its_partition(spark, native, bootstrap, unique, tmp_path):
    topic, group = unique("reg"), unique("reg-group")
    create_topics(bootstrap, {topic: 3})
    produce(bootstrap, topic, (f"v{i}" for i in range(90)), keys=(str(i) for i in range(90)))
    consume(bootstrap, group, [topic], 90, group_protocol="consumer")
    first = tmp_path / "before.json"
    first.write_text(take_snapshot(native, group).to_json())
    native.alter_group_offsets(group, {TopicPartition(topic, 1): 10})
    second = tmp_path / "after.json"
    second.write_text(take_snapshot(native, group).to_json())
    (verdict, lag) = run_spec(spark, {"offsets_preserved": {"before": str(first), "after": str(second)},
                                      "lag": {"before": str(first), "after": str(second), "max_total_lag": 0}})
    assert not verdict.passed and verdict.counts["regressed"] == 1 and verdict.counts["equal"] == 2
    assert [(o["topic"], o["partition"]) for o in verdict.offending] == [(topic, 1)]
    assert not lag.passed and lag.counts["total_lag"] > 0
    assert lag.data["lag_before"] == {f"{topic}:{p}": 0 for p in range(3)}


def test_counts_explain_transaction_markers_only_when_told(spark, native, bootstrap, unique):
    topic = unique("txn")
    create_topics(bootstrap, {topic: 1})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("txn-id")})
    producer.init_transactions(30)
    for t in range(3):
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic, value=f"{t}-{i}".encode(), key=str(i).encode())
        producer.commit_transaction(30)
    ranges = {str(tp): list(r) for tp, r in _ranges(native, [topic]).items()}
    assert ranges[f"{topic}:0"] == [0, 33], "30 records and 3 commit markers"
    for reader in ("connector", "python"):
        (plain,) = run_spec(spark, {"bootstrap_servers": bootstrap, "reader": reader, "counts": {"ranges": ranges}})
        assert not plain.passed and plain.counts == {"records": 30, "offsets": 33, "missing_offsets": 3}
        (explained,) = run_spec(spark, {"bootstrap_servers": bootstrap, "reader": reader,
                                        "counts": {"ranges": ranges, "explained_by": "transactions"}})
        assert explained.passed and "explained by transactions" in explained.summary


def test_validation_operator_local_and_spark_submit(spark, kafka_conn, native, bootstrap, unique, tmp_path, context):
    topic, group = unique("op"), unique("op-group")
    create_topics(bootstrap, {topic: 2})
    capture = KafkaTopicOffsetsOperator(task_id="cap", topics=[topic])
    before = capture.execute(context)
    produce(bootstrap, topic, (json.dumps({"id": i}) for i in range(200)), keys=(str(i) for i in range(200)))
    consume(bootstrap, group, [topic], 200, group_protocol="consumer")
    after = capture.execute(context)
    snap = tmp_path / "snap.json"
    snap.write_text(take_snapshot(native, group).to_json())
    checks_spec = {"offsets_preserved": {"before": str(snap), "after": str(snap)},
                   "lag": {"before": str(snap), "after": str(snap), "max_total_lag": 0},
                   "continuity": {"between": [before, after], "id_source": "json:id", "expected_min": 0,
                                  "expected_max": 199},
                   "counts": {"between": [before, after]}}
    local = KafkaValidationOperator(task_id="v", checks=checks_spec, output_dir=str(tmp_path / "local"),
                                    reader="python").execute(context)
    assert local["passed"] and [v["check"] for v in local["verdicts"]] == [
        "offsets_preserved", "lag", "record_continuity", "partition_counts"]
    html = Path(local["files"]["html"]).read_text()
    assert "<svg" in html and f"{topic}:0" in html and "PASSED" in html
    assert json.loads(Path(local["files"]["json"]).read_text())["passed"] is True

    submitted = KafkaValidationOperator(task_id="v2", checks=checks_spec, output_dir=str(tmp_path / "submit"),
                                        run_mode="spark-submit").execute(context)
    assert submitted["passed"] and submitted["verdicts"] == local["verdicts"]

    broken = {**checks_spec, "continuity": {**checks_spec["continuity"], "expected_max": 205}}
    with pytest.raises(AirflowFailException, match="record_continuity: .* 6 missing id"):
        KafkaValidationOperator(task_id="v3", checks=broken, output_dir=str(tmp_path / "broken"),
                                reader="python").execute(context)


def test_spark_providers_submit_operator_runs_the_same_job(kafka_conn, bootstrap, unique, tmp_path, monkeypatch,
                                                           context, native):
    from airflow_provider_kip848.spark.submit import package_zip

    topic = unique("sso")
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, (str(i) for i in range(50)), keys=(str(i) for i in range(50)))
    ranges = {str(tp): list(r) for tp, r in native.topic_offsets([topic]).items()}
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"bootstrap_servers": bootstrap, "reader": "python",
                                "output_dir": str(tmp_path / "out"),
                                "continuity": {"ranges": ranges, "id_source": "value", "expected_min": 0,
                                               "expected_max": 49}}))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    op = validation_spark_submit_operator(task_id="sso", spec_path=str(spec), reader="python", conn_id="spark_local",
                                          py_files=str(package_zip(tmp_path / "pkg.zip")))
    op.execute(context)
    report = json.loads((tmp_path / "out" / "validation.json").read_text())
    assert report["passed"] and report["verdicts"][0]["counts"]["records"] == 50
