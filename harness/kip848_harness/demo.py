"""``make demo``: the headline migration on the embedded local Kafka, start to finish.

1. Start a fresh single-node KRaft broker (fetching Kafka the first time).
2. KIP-848: a classic consumer application of three instances (real
   confluent-kafka consumers writing what they process to an output topic) is
   rolled to ``group.protocol=consumer`` one instance at a time while the
   ``kip848_consumer_rolling_upgrade`` DAG waits, validates with PySpark and
   reports.
3. KIP-1071: Kafka's WordCountDemo on the classic protocol is migrated offline
   to a streams group by ``kip1071_streams_offline_migration`` (stop, force
   out the members the killed instances left, restart with
   ``group.protocol=streams``), and keeps counting from its commits.
4. The cluster inventory after, and every process it started is stopped.

Approvals are answered automatically through Airflow's REST API (as a person
in the "Required Actions" page would). The runs' snapshots, reports and audit
log go to the demo's artifact location, ``<cache>/demo/artifacts``
(``$KIP848_ARTIFACTS_URL``, as a deployment sets it: a run names no path).
Exit code 0 only if both migrations succeeded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from airflow_provider_kip848.changecontrol.runpaths import ARTIFACTS_ENV
from airflow_provider_kip848.kafka.cache import default_cache_dir
from airflow_provider_kip848.kafka.cli.distribution import DEFAULT_KAFKA_VERSION
from airflow_provider_kip848.kafka.errors import Kip848Error
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness import schema_checks
from kip848_harness.appcontrol import LocalWordCountController
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import (
    ConsumerProcess,
    create_topics,
    decode_long,
    latest_by_key,
    produce,
    read_topic,
)
from kip848_harness.dagrun import run_dag, run_state
from kip848_harness.kafka_cluster import LocalKafka
from kip848_harness.registry import REGISTRY_ENV, RegistryFile
from kip848_harness.windows import open_window

CONN_ID = "kafka_admin_default"


def _say(text: str) -> None:
    print(f"==> {text}", flush=True)


def _configure_airflow(home: Path, dags_folder: Path, bootstrap: str, artifacts: Path) -> None:
    """Environment for an in-process Airflow (set before Airflow is first imported), with the deployment's artifact
    location (``$KIP848_ARTIFACTS_URL``: each run's snapshots, report and the audit log under it; a run names none)."""
    home.mkdir(parents=True, exist_ok=True)
    os.environ.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "ERROR",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps({"conn_type": "kafka_admin", "host": bootstrap}),
        ARTIFACTS_ENV: str(artifacts),
    })
    # the deployment's controller registry ([kip848] controllers): the demo registers its applications there
    RegistryFile(home / "controllers.json").activate()
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _print_report(report: dict | None, keys: list[str]) -> None:
    if not report:
        print("   (no report)")
        return
    print(f"   outcome: {report['outcome']}")
    for approval in (report.get("approvals") or {}).values():
        if approval:
            print(f"   approval: {approval['decision']} by {approval['by']} at {approval['at']}")
    print(f"   before: {json.dumps(report.get('before'), default=str)}")
    print(f"   after:  {json.dumps(report.get('after'), default=str)}")
    results = report.get("results") or {}
    for key in keys:
        value = results.get(key)
        if isinstance(value, dict) and "verdicts" in value:
            for v in value["verdicts"]:
                print(f"   {'PASS' if v['passed'] else 'FAIL'} {v['check']}: {v['summary']}")
        elif isinstance(value, dict) and "summary" in value:  # a sensor's result
            extra = f", forced out: {', '.join(value['members_removed'])}" if value.get("members_removed") else ""
            print(f"   {key}: {value['summary']} after {value.get('polls')} poll(s) ({value.get('mode')}){extra}")
        elif isinstance(value, dict) and "counts" in value:  # an offsets comparison
            print(f"   {key}: {value['counts']} (preserved: {value['preserved']})")
        elif value is not None:
            print(f"   {key}: {json.dumps(value, default=str)[:300]}")
    if report.get("files"):
        print(f"   report: {report['files']['markdown']}")


def kip848_part(kafka, dags: Path, work: Path) -> bool:
    bootstrap = kafka.bootstrap_servers
    topic, output, group = "orders", "orders-processed", "orders-app"
    create_topics(bootstrap, {topic: 6, output: 6})
    produce(bootstrap, topic, (f"order-{i}" for i in range(300)), keys=(str(i) for i in range(300)))
    members: list = []

    def start(i: int, protocol: str):
        return ConsumerProcess.start(bootstrap, group, [topic], protocol=protocol, client_id=f"orders-app-{i}",
                                     output_topic=output, log_file=str(work / f"orders-app-{i}-{protocol}.log"))

    members.extend(start(i, "classic") for i in range(3))
    admin = KafkaAdmin(ClientSettings(bootstrap))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            d = admin.describe_group(group)
            if d.state == "Stable" and len(d.members) == 3 and admin.group_offsets(group).total_lag == 0:
                break
        except Exception:  # noqa: BLE001 - the group is still forming
            pass
        time.sleep(0.5)
    _say(f"classic application '{group}': 3 instances, 300 orders processed")

    def rollout(_detail):
        def go():
            time.sleep(4)
            feeder = threading.Thread(target=produce, args=(bootstrap, topic, (f"order-{i}" for i in range(300, 600))),
                                      kwargs={"keys": (str(i) for i in range(300, 600))})
            feeder.start()
            for i in range(3):
                members[i].stop()
                members[i] = start(i, "consumer")
                _say(f"deployment: instance {i} restarted with group.protocol=consumer")
                time.sleep(3)
            feeder.join()
        threading.Thread(target=go, daemon=True).start()

    _say("running kip848_consumer_rolling_upgrade (approval answered automatically, then the rollout)")
    try:
        run, _answers, report = run_dag(
            "kip848_consumer_rolling_upgrade",
            {"group_id": group, "output_topic": output, "id_source": "key", "allowed_duplicates": 1000,
             "client_properties": {"group.protocol": "consumer", "enable.auto.commit": "false"}, "client": "librdkafka",
             "poll_seconds": 1, "rollout_timeout_minutes": 5, "reader": "python"},
            dags_folder=dags, decide=lambda d: "Approve", before_answer=rollout,
        )
    finally:
        for m in members:
            m.stop()
        admin.close()
    _say(f"KIP-848 rolling upgrade: DAG run {run_state(run)}")
    _print_report(report, ["migration", "validation"])
    return run_state(run) == "success" and report and report["outcome"] == "migrated"


def kip1071_part(kafka, dags: Path) -> bool:
    bootstrap = kafka.bootstrap_servers
    app_id = "wordcount"
    create_topics(bootstrap, {WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    controller = LocalWordCountController(str(kafka.workdir), app_id)
    controller.start("classic")
    # registered as a deployment would: the run names "wordcount", never code
    RegistryFile(os.environ[REGISTRY_ENV]).add(app_id, "local-wordcount",
                                               {"kafka_workdir": str(kafka.workdir), "application_id": app_id},
                                               description="the demo's WordCountDemo on this machine")
    produce(bootstrap, WORDCOUNT_INPUT_TOPIC, ["kafka streams on the classic protocol", "kafka groups"])

    def count(word: str, expected: int) -> int | None:
        def current(records):
            v = latest_by_key(records).get(word.encode())
            return decode_long(v) if v is not None else None

        return current(read_topic(bootstrap, WORDCOUNT_OUTPUT_TOPIC, timeout=90,
                                  until=lambda rs: current(rs) == expected))

    _say(f"WordCountDemo '{app_id}' on the classic protocol: count(kafka) = {count('kafka', 2)}")
    time.sleep(2)  # its last commit
    _say("running kip1071_streams_offline_migration (one approval for the downtime, answered automatically)")
    try:
        run, _answers, report = run_dag(
            "kip1071_streams_offline_migration",
            {"application_id": app_id, "app_controller": app_id, "app_controller_args": {"stop_mode": "kill"},
             "remove_members_after": 3, "poll_seconds": 1, "standby_replicas": 0, "session_timeout_ms": 6000,
             "heartbeat_interval_ms": 500, "output_topic": WORDCOUNT_OUTPUT_TOPIC, "reader": "python",
             **open_window()},
            dags_folder=dags, decide=lambda d: "Approve",
        )
        ok = run_state(run) == "success" and report and report["outcome"] == "migrated"
        _say(f"KIP-1071 offline migration: DAG run {run_state(run)}")
        _print_report(report, ["emptied", "restored", "offsets_vs_snapshot", "output_records_written_during_run",
                               "validation"])
        if ok:
            produce(bootstrap, WORDCOUNT_INPUT_TOPIC, ["kafka streams on the streams protocol"])
            _say(f"after the switch, one more line: count(kafka) = {count('kafka', 3)} (continued from the commits, "
                 "nothing reprocessed)")
        return bool(ok)
    finally:
        controller.stop()


def inventory(kafka) -> None:
    with KafkaAdmin(ClientSettings(kafka.bootstrap_servers)) as admin:
        features = admin.describe_features()
        print(f"\n   features: group.version={features.level('group.version')} "
              f"streams.version={features.level('streams.version')}")
        for g in admin.list_groups():
            print(f"   group {g.group_id:<28} {g.type.value:<9} {g.state}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dags-folder", type=Path, default=Path("dags"))
    parser.add_argument("--version", default=os.environ.get("KIP848_KAFKA_VERSION", DEFAULT_KAFKA_VERSION))
    args = parser.parse_args(argv)
    dags = args.dags_folder.resolve()
    if not (dags / "kip848_consumer_rolling_upgrade.py").is_file():
        print(f"error: {dags} has no example DAGs; run from the checkout or pass --dags-folder", file=sys.stderr)
        return 2

    # the demo's dag.test() runs check each Param schema once, as the test processes do (schema_checks.py)
    schema_checks.install()
    cache = default_cache_dir()
    work = cache / "demo"
    kafka = LocalKafka(cache / "instances" / "demo", version=args.version, die_with_parent=True)
    try:
        _say(f"starting a local Apache Kafka {args.version} (jars cached in {kafka.distribution.home})")
        _say(kafka.start(fresh=True).summary())
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        _configure_airflow(cache / "airflow-demo", dags, kafka.bootstrap_servers, work / "artifacts")
        ok848 = kip848_part(kafka, dags, work)
        ok1071 = kip1071_part(kafka, dags)
        inventory(kafka)
        _say("both migrations succeeded" if ok848 and ok1071 else "a migration did not succeed: see the reports")
        return 0 if ok848 and ok1071 else 1
    except Kip848Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if kafka.stop():
            _say("local Kafka stopped")


if __name__ == "__main__":
    sys.exit(main())
