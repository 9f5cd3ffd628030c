"""Wave validation on real Kafka data, in a local session and on the session's Spark standalone cluster.

* the cluster: one master and two workers from the installed pyspark, at the driver's Spark version;
* a wave judges each group exactly as the single-group job judges it alone (planted faults included);
* the same wave submitted to the cluster (spark-submit, client mode, executors on both workers) gives
  the verdicts of the local job.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from airflow_provider_kip848.kafka.api import take_snapshot
from airflow_provider_kip848.kafka.model import TopicPartition
from airflow_provider_kip848.spark import wave
from airflow_provider_kip848.spark.job import run_spec
from kip848_harness.clients import consume, create_topics, read_topic
from kip848_harness.spark_cluster import _get_json
from tests.conftest import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark(spark_session):
    return spark_session


def test_the_standalone_cluster_runs_the_drivers_spark_with_two_workers(spark_cluster):
    import pyspark

    status = spark_cluster.status()
    assert status["status"] == "ALIVE"
    workers = spark_cluster.alive_workers()
    assert len(workers) == 2 and all(w["cores"] == 2 for w in workers)
    assert spark_cluster._reported_version() == pyspark.__version__
    # the REST server the Spark provider polls a cluster-mode driver on answers, and knows no such driver
    assert _get_json(f"{spark_cluster.rest_url}/v1/submissions/status/driver-20260101000000-0000")["success"] is False


def _capture(native, topic):
    return {str(tp): {"log_start": a, "log_end": b} for tp, (a, b) in native.topic_offsets([topic]).items()}


def _produce(bootstrap, topic, ids, partitions, *, transactional_id=None):
    producer = Producer({"bootstrap.servers": bootstrap, **({"transactional.id": transactional_id}
                                                            if transactional_id else {})})
    if transactional_id:
        producer.init_transactions(30)
        producer.begin_transaction()
    for n, i in enumerate(ids):
        producer.produce(topic, value=json.dumps({"id": i}).encode(), key=str(i).encode(), partition=n % partitions)
    if transactional_id:
        producer.commit_transaction(30)
    producer.flush(30)


@pytest.fixture
def planted_wave(native, bootstrap, unique, tmp_path):
    """A wave of six groups on real topics: clean, sliced, with duplicates and gaps, regressed offsets,
    transaction markers explained and not. Returns the wave spec (dict, snapshot paths)."""
    a, b, t = unique("wave-a"), unique("wave-b"), unique("wave-t")
    create_topics(bootstrap, {a: 3, b: 2, t: 1})
    # a new topic's partitions may have no leader for a moment on a fresh broker
    empty_a = wait_until(lambda: _capture(native, a), 30, "the new topic's leaders")
    empty_b = wait_until(lambda: _capture(native, b), 30, "the new topic's leaders")
    wait_until(lambda: _capture(native, t), 30, "the new topic's leaders")
    _produce(bootstrap, a, range(600), 3)
    missing, duplicated = {17, 256, 257}, [0, 5, 42]
    _produce(bootstrap, b, [i for i in range(300) if i not in missing] + duplicated, 2)
    for _ in range(3):
        _produce(bootstrap, t, range(10), 1, transactional_id=unique("txn"))
    after_a, after_b = _capture(native, a), _capture(native, b)
    t_range = {str(tp): list(r) for tp, r in native.topic_offsets([t]).items()}

    ok_group, regressed_group = unique("g-ok"), unique("g-reg")
    for group in (ok_group, regressed_group):
        consume(bootstrap, group, [a], 600, group_protocol="consumer")
    snaps = {}
    for name, group in (("ok", ok_group), ("reg", regressed_group)):
        path = tmp_path / f"{name}-before.json"
        path.write_text(take_snapshot(native, group).to_json())
        snaps[name] = str(path)
    native.alter_group_offsets(regressed_group, {TopicPartition(a, 1): 10})
    reg_after = tmp_path / "reg-after.json"
    reg_after.write_text(take_snapshot(native, regressed_group).to_json())

    groups = [
        {"group_id": ok_group, "app": "orders",
         "offsets_preserved": {"before": snaps["ok"], "after": snaps["ok"]},
         "lag": {"before": snaps["ok"], "after": snaps["ok"], "max_total_lag": 0},
         "continuity": {"between": [empty_a, after_a], "id_source": "json:id", "expected_min": 0,
                        "expected_max": 599},
         "counts": {"between": [empty_a, after_a]},
         "output_timing": {"between": [empty_a, after_a]}},
        {"group_id": unique("g-slice"), "continuity": {"ranges": {f"{a}:1": [50, 150]}, "id_source": "key"},
         "counts": {"ranges": {f"{a}:1": [50, 150], f"{a}:2": [0, 0]}}},
        {"group_id": unique("g-faults"), "continuity": {"between": [empty_b, after_b], "id_source": "json:id",
                                                        "expected_min": 0, "expected_max": 299}},
        {"group_id": regressed_group,
         "offsets_preserved": {"before": snaps["reg"], "after": str(reg_after)},
         "lag": {"before": snaps["reg"], "after": str(reg_after), "max_total_lag": 0}},
        {"group_id": unique("g-txn"), "counts": {"ranges": t_range, "explained_by": "transactions"}},
        {"group_id": unique("g-txn-plain"), "counts": {"ranges": t_range}},
    ]
    return {"title": "planted wave", "bootstrap_servers": bootstrap, "reader": "connector", "groups": groups}


def test_a_wave_judges_each_group_as_the_single_group_job_does(spark, planted_wave):
    for reader in ("connector", "python"):
        spec = wave.WaveSpec.from_dict({**planted_wave, "reader": reader})
        judged = wave.run_wave(spark, spec)
        for raw, got in zip(planted_wave["groups"], judged, strict=True):
            alone = run_spec(spark, {"bootstrap_servers": planted_wave["bootstrap_servers"], "reader": reader,
                                     **{k: v for k, v in raw.items() if k not in ("group_id", "app")}})
            assert [v.to_dict() for v in got.verdicts] == [v.to_dict() for v in alone], raw["group_id"]
        passed = {g.group_id.split("-test")[0]: g.passed for g in judged}
        assert passed == {"g-ok": True, "g-slice": False, "g-faults": False, "g-reg": False, "g-txn": True,
                          "g-txn-plain": False}, passed
        faults = judged[2].verdicts[0]
        assert faults.counts["duplicates"] == 3 and faults.counts["missing_ids"] == 3
        assert {o.get("missing_id") for o in faults.offending} - {None} == {17, 256, 257}
        overall = wave.overall_verdict(judged)
        assert not overall.passed and overall.counts["failed"] == 4


def _longest_gaps(records):
    """Per partition the longest interval between consecutive records by timestamp (ms), the earliest of equal
    ones: what output_timing reports, computed here from the records a plain consumer read."""
    by_partition: dict[str, list[tuple[int, int]]] = {}
    for r in records:
        by_partition.setdefault(f"{r.topic}:{r.partition}", []).append((round(r.timestamp * 1000), r.offset))
    out = []
    for name, stamps in by_partition.items():
        stamps.sort()
        gap, start = max(((b[0] - a[0], -a[0]) for a, b in zip(stamps, stamps[1:], strict=False)))
        out.append({"partition": name, "seconds": gap / 1000, "started_at": -start / 1000,
                    "ended_at": (gap - start) / 1000})
    return sorted(out, key=lambda p: (-p["seconds"], p["partition"]))


def test_the_single_group_job_is_a_wave_of_one_with_the_same_checks_output_timing_included(
        spark, planted_wave, bootstrap, tmp_path):
    """One path: a group's checks have the same names alone and in a wave, output_timing among them; the wave's
    report carries the output timing, and its gaps are the ones the records a plain consumer reads show."""
    raw = planted_wave["groups"][0]  # g-ok: every check
    alone = run_spec(spark, {"bootstrap_servers": bootstrap, **{k: v for k, v in raw.items()
                                                                  if k not in ("group_id", "app")}})
    report = wave.run({**planted_wave, "output_dir": str(tmp_path / "wave")}, spark)
    written = json.loads(Path(report["files"]["json"]).read_text())
    (in_wave,) = [g for g in written["groups"] if g["group_id"] == raw["group_id"]]
    names = [v["check"] for v in in_wave["verdicts"]]
    assert names == [v.check for v in alone] == [
        "offsets_preserved", "lag", "record_continuity", "partition_counts", "output_timing"]
    timing = in_wave["verdicts"][-1]
    assert timing == json.loads(json.dumps(alone[-1].to_dict()))
    assert timing["passed"] and timing["counts"] == {"records": 600, "partitions": 3}
    topic = next(iter(raw["output_timing"]["between"][1])).rpartition(":")[0]
    records = read_topic(bootstrap, topic, until=lambda got: len(got) >= 600)
    assert len(records) == 600
    assert timing["data"]["partitions"] == _longest_gaps(records)
    assert timing["data"]["longest"] == timing["data"]["partitions"][0]
    assert sum(v for _, v in timing["data"]["rate"]) == 600, "1-second buckets: records per second add up"
    assert timing["data"]["timestamp_types"] == {"CreateTime": 600}
    # the groups without an output_timing section are not given one
    assert all(v["check"] != "output_timing" for g in written["groups"] if g["group_id"] != raw["group_id"]
               for v in g["verdicts"])


# -- the operator in its three modes, and the deferred wait on the master's REST server ------------------

def _run_trigger(trigger):
    """The trigger's first event, as the triggerer would get it (the real REST server answers)."""
    import asyncio

    async def first():
        async for event in trigger.run():
            return event.payload
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(asyncio.wait_for(first(), 300))


def _set_spark_connections(monkeypatch, cluster):
    for mode in ("client", "cluster"):
        monkeypatch.setenv(f"AIRFLOW_CONN_SPARK_{mode.upper()}", json.dumps(cluster.airflow_connection(mode)))


def test_the_operator_in_client_and_cluster_mode_gives_the_local_jobs_verdicts(
        spark, spark_cluster, planted_wave, kafka_conn, monkeypatch, tmp_path, context):
    from airflow.sdk.exceptions import TaskDeferred

    from airflow_provider_kip848.operators.wave_validation import XCOM_KEY, KafkaWaveValidationOperator

    # three groups: one clean (4 checks), one with duplicates and gaps, one with regressed offsets
    groups = [g for g in planted_wave["groups"] if g["group_id"].split("-test")[0] in ("g-ok", "g-faults", "g-reg")]
    assert len(groups) == 3
    ids = [g["group_id"] for g in groups]
    local = wave.outcome(ids, wave.run({**planted_wave, "groups": groups}, spark))
    assert {g: v["verdict"] for g, v in local["groups"].items()} == dict(zip(ids, ["pass", "fail", "fail"],
                                                                            strict=True))
    _set_spark_connections(monkeypatch, spark_cluster)
    driver = {k: v for k, v in spark_cluster.driver_conf().items() if k != "spark.master"}

    def operator(mode):
        return KafkaWaveValidationOperator(
            task_id=f"validate_{mode}", groups=groups, output_dir=str(tmp_path / mode), mode=mode,
            spark_conn_id=f"spark_{mode}", conf=driver if mode == "client" else {"spark.cores.max": "2"},
            env_vars={"SPARK_LOCAL_IP": "127.0.0.1"} if mode == "client" else {}, poll_interval=0.5,
            fail_on_failure=False)

    client = operator("client").execute(context)

    cluster_op = operator("cluster")
    with pytest.raises(TaskDeferred) as deferred:
        cluster_op.execute(context)
    event = _run_trigger(deferred.value.trigger)
    assert event["status"] == "finished" and event["driver_state"] == "FINISHED", event
    cluster = cluster_op.execute_complete(context, event)

    for mode, result in (("client", client), ("cluster", cluster)):
        assert result["groups"] == local["groups"], mode
        assert (result["verdict"], result["summary"]) == (local["verdict"], local["summary"]), mode
        assert result["master"] == spark_cluster.master_url and result["application_id"].startswith("app-"), mode
        assert result["mode"] == mode
        report = json.loads(Path(result["files"]["json"]).read_text())
        assert [g["group_id"] for g in report["groups"]] == ids
    assert context["ti"].xcom[XCOM_KEY] == cluster
    # the client-mode application's executors ran on both workers: each worker's work dir has its directory
    ran_on = [n for n in (1, 2) if (spark_cluster.worker_dir(n) / client["application_id"]).is_dir()]
    assert ran_on == [1, 2], f"executors of {client['application_id']} only on worker(s) {ran_on}"
    # the specs (they may hold the connection's secrets) are gone once the jobs ended
    assert not list(tmp_path.rglob("wave-spec.json"))


def test_the_deferred_wait_reports_a_failed_driver_and_the_operator_fails_with_unknown_verdicts(
        spark_cluster, kafka_conn, monkeypatch, tmp_path, context):
    import pyspark
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_provider_kip848.operators.wave_validation import XCOM_KEY, KafkaWaveValidationOperator
    from airflow_provider_kip848.spark.standalone import PythonSubmission, RestSubmissionClient, StandaloneMaster
    from airflow_provider_kip848.spark.submit import runner_jar, stage_wave
    from airflow_provider_kip848.triggers.spark import SparkStandaloneDriverTrigger

    # a spec the job refuses (no groups): the driver exits 1, the master says FAILED
    staged = stage_wave({"format": wave.WAVE_FORMAT, "groups": []}, tmp_path)
    master = StandaloneMaster(spark_cluster.master_url, spark_cluster.rest_url)
    request = PythonSubmission(str(staged.main_py), [str(staged.py_files)], ["--spec", str(staged.spec)],
                               environment={"PYSPARK_PYTHON": sys.executable}).request(
        master, spark_version=pyspark.__version__, runner_jar=runner_jar())
    sid = RestSubmissionClient(master.rest_url).create(request)
    carry = {"staged": staged.to_dict(), "group_ids": ["g-1", "g-2"], "rest_url": master.rest_url}
    event = _run_trigger(SparkStandaloneDriverTrigger(rest_url=master.rest_url, submission_id=sid,
                                                      poll_interval=0.5, carry=carry))
    assert (event["status"], event["driver_state"], event["submission_id"]) == ("failed", "FAILED", sid), event
    assert not staged.report.exists()

    op = KafkaWaveValidationOperator(task_id="validate", groups=[{"group_id": "g-1"}], output_dir=str(tmp_path),
                                     mode="cluster", fail_on_failure=False)
    with pytest.raises(AirflowFailException, match=f"driver {sid} ended FAILED"):
        op.execute_complete(context, event)
    pushed = context["ti"].xcom[XCOM_KEY]
    assert pushed["verdict"] == "unknown" and not pushed["passed"]
    assert {g: v["verdict"] for g, v in pushed["groups"].items()} == {"g-1": "unknown", "g-2": "unknown"}
    assert not staged.spec.exists()

    # a driver the master never had: the wait ends with an error, not a hang
    event = _run_trigger(SparkStandaloneDriverTrigger(rest_url=master.rest_url, poll_interval=0.2,
                                                      submission_id="driver-20260101000000-0000"))
    assert event["status"] == "error" and "does not know" in event["message"], event


def test_killing_the_deferred_task_kills_its_driver_on_the_cluster(spark_cluster, tmp_path):
    import asyncio

    import pyspark

    from airflow_provider_kip848.spark.standalone import PythonSubmission, RestSubmissionClient, StandaloneMaster
    from airflow_provider_kip848.spark.submit import runner_jar
    from airflow_provider_kip848.triggers.spark import SparkStandaloneDriverTrigger

    main = tmp_path / "waits.py"
    main.write_text("import time\ntime.sleep(600)\n")  # a driver that would run for 10 minutes
    master = StandaloneMaster(spark_cluster.master_url, spark_cluster.rest_url)
    client = RestSubmissionClient(master.rest_url)
    sid = client.create(PythonSubmission(str(main), environment={"PYSPARK_PYTHON": sys.executable}).request(
        master, spark_version=pyspark.__version__, runner_jar=runner_jar()))
    wait_until(lambda: client.status(sid).state == "RUNNING", 120, f"driver {sid} running")
    asyncio.run(SparkStandaloneDriverTrigger(rest_url=master.rest_url, submission_id=sid).on_kill())
    wait_until(lambda: client.status(sid).state == "KILLED", 60, f"driver {sid} killed")
