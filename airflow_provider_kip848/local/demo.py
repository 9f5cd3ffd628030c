"""``make demo``: the provider's main job on the embedded local Kafka, start to finish.

1. fetch Kafka (first run only) and start a fresh single-node KRaft broker;
2. give it something to administer: a classic consumer group, a KIP-848
   ``consumer`` group and a KIP-1071 ``streams`` group (Kafka's WordCountDemo);
3. run the ``kafka_cluster_inventory`` DAG with ``dag.test()`` through an
   Airflow connection of type ``kafka_admin``, and print its report: the
   finalized feature levels and every group with its type and state;
4. stop everything it started, whatever happened.

Exit code 0 only if the DAG run succeeded. Run it with
``python -m airflow_provider_kip848.local.demo [--dags-folder DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from airflow_provider_kip848.kafka.errors import Kip848Error
from airflow_provider_kip848.local.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from airflow_provider_kip848.local.broker import LocalKafka
from airflow_provider_kip848.local.clients import (
    consume,
    create_topics,
    decode_long,
    latest_by_key,
    produce,
    read_topic,
)
from airflow_provider_kip848.local.distribution import DEFAULT_KAFKA_VERSION, default_cache_dir

DEMO_TOPIC = "orders"
CONN_ID = "kafka_admin_default"


def _say(text: str) -> None:
    print(f"==> {text}", flush=True)


def seed_groups(kafka: LocalKafka) -> list:
    """Create one group of each type the migration runbooks deal with; returns the apps to stop."""
    bootstrap = kafka.bootstrap_servers
    create_topics(bootstrap, {DEMO_TOPIC: 3, WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    produce(bootstrap, DEMO_TOPIC, (f"order-{i}" for i in range(30)), keys=(f"k{i % 7}" for i in range(30)))
    for group, protocol in (("orders-classic", "classic"), ("orders-kip848", "consumer")):
        got = consume(bootstrap, group, [DEMO_TOPIC], 30, group_protocol=protocol)
        _say(f"group {group!r} (group.protocol={protocol}) consumed and committed {len(got)} records")
    app = kafka.start_wordcount("wordcount-kip1071", group_protocol="streams")
    produce(bootstrap, WORDCOUNT_INPUT_TOPIC, ["kafka streams groups", "kafka consumer groups"])
    counts = _read_wordcounts(bootstrap, expect={"kafka": 2, "groups": 2}, timeout=90)
    _say(f"WordCountDemo (group.protocol=streams) counted {counts}")
    return [app]


def _read_wordcounts(bootstrap: str, expect: dict[str, int], timeout: float) -> dict[str, int]:
    def counts(records) -> dict[str, int]:
        return {k.decode(): decode_long(v) for k, v in latest_by_key(records).items()}

    records = read_topic(bootstrap, WORDCOUNT_OUTPUT_TOPIC, timeout=timeout,
                         until=lambda rs: all(counts(rs).get(w) == n for w, n in expect.items()))
    found = counts(records)
    if any(found.get(w) != n for w, n in expect.items()):
        raise RuntimeError(f"WordCountDemo did not produce the expected counts {expect} in {timeout} s: {found}")
    return found


def run_inventory_dag(bootstrap: str, dags_folder: Path, airflow_home: Path, report_path: Path) -> str:
    """Run ``kafka_cluster_inventory`` with dag.test() in a child Python; return the report it wrote."""
    env = dict(os.environ)
    env.update(
        {
            "AIRFLOW_HOME": str(airflow_home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
            f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps({"conn_type": "kafka_admin", "host": bootstrap}),
        }
    )
    airflow_home.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    report_path.unlink(missing_ok=True)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from kafka_cluster_inventory import dag_object as d;"
        "r = d.test(run_conf={'report_path': sys.argv[2]}, use_executor=False);"
        "print('DAG run state:', r.state); sys.exit(0 if str(r.state) in ('success', 'DagRunState.SUCCESS') else 1)"
    )
    log_path = airflow_home / "dag-test.log"
    with open(log_path, "w") as log:
        proc = subprocess.run([sys.executable, "-c", code, str(dags_folder), str(report_path)],
                              env=env, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0 or not report_path.is_file():
        raise RuntimeError(f"the kafka_cluster_inventory DAG run failed; its log is {log_path}")
    return report_path.read_text()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dags-folder", type=Path, default=Path("dags"))
    parser.add_argument("--version", default=os.environ.get("KIP848_KAFKA_VERSION", DEFAULT_KAFKA_VERSION))
    args = parser.parse_args(argv)
    dags_folder = args.dags_folder.resolve()
    if not (dags_folder / "kafka_cluster_inventory.py").is_file():
        print(f"error: {dags_folder} has no kafka_cluster_inventory.py; run from the checkout or pass --dags-folder",
              file=sys.stderr)
        return 2
    cache = default_cache_dir()
    kafka = LocalKafka(cache / "instances" / "demo", version=args.version, die_with_parent=True)
    apps = []
    try:
        _say(f"starting a local Apache Kafka {args.version} (jars cached in {kafka.distribution.home})")
        report = kafka.start(fresh=True)
        _say(report.summary())
        apps = seed_groups(kafka)
        _say("running the kafka_cluster_inventory DAG (dag.test, connection type kafka_admin)")
        text = run_inventory_dag(kafka.bootstrap_servers, dags_folder, cache / "airflow-demo",
                                 cache / "airflow-demo" / "inventory.txt")
        print()
        print(text)
        return 0
    except Kip848Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        for app in apps:
            app.stop()
        if kafka.stop():
            _say("local Kafka stopped")


if __name__ == "__main__":
    sys.exit(main())
