"""Take the approval-form screenshots in docs/runbooks from a real Airflow UI in headless Chromium.

A developer tool, not part of the test suite (needs Debian's ``chromium``):

    apt-get install -y chromium
    KIP848_CACHE_DIR=$PWD/.cache .venv/bin/python docs/screenshots/capture.py [name-fragment ...]

It starts a local Kafka and an Airflow api-server (SimpleAuthManager, all
admins) on a scratch AIRFLOW_HOME, runs each example DAG up to its approval
(in a child process, with ``dag.test()``), opens the task's "Required
Actions" page in headless Chromium, saves the screenshot next to this file,
and rejects the request through the REST API so nothing is changed. The
WordCountDemo it starts is registered, as a deployment registers its
applications, in a controller registry on the scratch directory (``[kip848]
controllers``, for the api-server and every DAG run): the offline migration's
run names it, and its approval shows that controller.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PORT = int(os.environ.get("KIP848_SCREENSHOT_PORT", "28080"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"


def screenshot(url: str, target: Path) -> None:
    profile = tempfile.mkdtemp(prefix="kip848-chromium-")
    subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={profile}", "--window-size=1440,1500", "--hide-scrollbars",
                    "--virtual-time-budget=20000", f"--screenshot={target}", url],
                   check=True, capture_output=True, timeout=120)
    shutil.rmtree(profile, ignore_errors=True)
    print(f"saved {target} ({target.stat().st_size} bytes)")


def main() -> int:
    from kip848_harness.kafka_cluster import LocalKafka

    work = Path(tempfile.mkdtemp(prefix="kip848-screens-"))
    kafka = LocalKafka(work / "kafka", die_with_parent=True)
    kafka.start()
    home = work / "airflow"
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"), "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
           "AIRFLOW__LOGGING__LOGGING_LEVEL": "ERROR",
           "AIRFLOW_CONN_KAFKA_ADMIN_DEFAULT": json.dumps({"conn_type": "kafka_admin", "host": kafka.bootstrap_servers}),
           # the deployment's artifact location: the runs' snapshots and reports (a run names no path)
           "KIP848_ARTIFACTS_URL": str(work / "artifacts")}
    os.environ.update(env)
    # the deployment's controller registry ([kip848] controllers), imported only now: it imports Airflow, whose
    # configuration must see the scratch AIRFLOW_HOME; prepare() registers the applications it starts there
    from kip848_harness.registry import REGISTRY_ENV, RegistryFile

    registry = RegistryFile(work / "controllers.json").activate()
    env[REGISTRY_ENV] = str(registry.path)
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, check=True, capture_output=True)
    server = subprocess.Popen([sys.executable, "-m", "airflow", "api-server", "--port", str(PORT)], env=env,
                              stdout=open(work / "api-server.log", "w"), stderr=subprocess.STDOUT)
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{PORT}/api/v2/version", timeout=2)
                break
            except OSError:
                time.sleep(1)
        scenarios = prepare(kafka, work, registry)
        for module, conf, image in scenarios:
            if module == "kip1071_streams_offline_migration":  # the first scenario left streams.version at 0
                from airflow_provider_kip848.kafka.native import KafkaAdmin
                from airflow_provider_kip848.kafka.settings import ClientSettings

                with KafkaAdmin(ClientSettings(kafka.bootstrap_servers)) as admin:
                    admin.update_feature("streams.version", 1)
            if len(sys.argv) > 1 and not any(name in image for name in sys.argv[1:]):
                continue
            capture(module, conf, HERE / image, env)
    finally:
        server.terminate()
        server.wait(30)
        kafka.stop()
    return 0


def prepare(kafka, work: Path, registry) -> list[tuple[str, dict, str]]:
    from airflow_provider_kip848.kafka.native import KafkaAdmin
    from airflow_provider_kip848.kafka.settings import ClientSettings
    from kip848_harness.appcontrol import LocalWordCountController
    from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
    from kip848_harness.clients import ConsumerProcess, consume, create_topics, produce
    from kip848_harness.windows import open_window

    bs = kafka.bootstrap_servers
    with KafkaAdmin(ClientSettings(bs)) as admin:
        admin.update_feature("streams.version", 0, action="downgrade")
    create_topics(bs, {"orders": 6, "orders-processed": 6, WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    produce(bs, "orders", (f"o{i}" for i in range(60)), keys=(str(i) for i in range(60)))
    consume(bs, "billing", ["orders"], 60, group_protocol="consumer")
    for i in range(3):
        ConsumerProcess.start(bs, "orders-app", ["orders"], protocol="classic", client_id=f"orders-app-{i}",
                              output_topic="orders-processed", log_file=str(work / f"app-{i}.log"))
    LocalWordCountController(str(kafka.workdir), "wordcount").start("classic")
    # registered as a deployment would: the run names "wordcount", never code
    wordcount = registry.add("wordcount", "local-wordcount",
                             {"kafka_workdir": str(kafka.workdir), "application_id": "wordcount"},
                             description="the demo's WordCountDemo on this machine")
    produce(bs, WORDCOUNT_INPUT_TOPIC, ["kafka streams groups"])
    time.sleep(15)
    return [
        ("kafka_enable_streams_protocol", {"feature": "streams.version", "level": 1},
         "enable_streams_protocol_approval.png"),
        ("kafka_group_config_change", {"group_id": "billing", "key": "consumer.session.timeout.ms", "value": "30000"},
         "group_config_change_approval.png"),
        ("kip848_consumer_rolling_upgrade", {"group_id": "orders-app", "output_topic": "orders-processed",
                                             "client_properties": {"group.protocol": "consumer",
                                                                   "group.remote.assignor": "range"},
                                             "poll_seconds": 1},
         "rolling_upgrade_approval.png"),
        ("kip1071_streams_offline_migration", {"application_id": "wordcount", "standby_replicas": 1,
                                               "app_controller": wordcount,
                                               **open_window(),
                                               "poll_seconds": 1},
         "streams_offline_migration_approval.png"),
    ]


def capture(module: str, conf: dict, target: Path, env: dict) -> None:
    from kip848_harness.hitl import HitlClient, prepare_in_main_thread

    code = ("import sys, json; from kip848_harness.dagrun import run_dag; "
            f"run_dag({module!r}, json.loads(sys.argv[1]), dags_folder={str(REPO / 'dags')!r})")
    child = subprocess.Popen([sys.executable, "-c", code, json.dumps(conf)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    prepare_in_main_thread()
    client = HitlClient()
    detail = None
    for _ in range(240):
        pending = client.pending(module)
        if pending:
            detail = pending[0]
            break
        time.sleep(1)
    if detail is None:
        child.kill()
        raise RuntimeError(f"{module} never asked for approval")
    ti = detail["task_instance"]
    url = (f"http://127.0.0.1:{PORT}/dags/{ti['dag_id']}/runs/{ti['dag_run_id']}/tasks/{ti['task_id']}"
           "/required_actions")
    screenshot(url, target)
    client.respond(detail, "Reject")
    child.wait(600)


if __name__ == "__main__":
    sys.exit(main())
