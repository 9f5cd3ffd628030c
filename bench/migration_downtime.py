"""Migration downtime on the local broker: how long output stops while the real DAGs migrate an application.

One fresh local broker (Kafka 4.3.1, ``production`` tuning: every broker
default), one in-process Airflow (temp AIRFLOW_HOME, ``airflow db migrate``,
``kafka_admin_default`` as an AIRFLOW_CONN_* variable), the example DAGs run
with ``dag.test()`` exactly as the end-to-end tests run them (approvals
answered over the REST API by an automatic responder).

1. Offline KIP-1071 streams migration (``kip1071_streams_offline_migration``) of
   Kafka's WordCountDemo, classic -> streams. A producer writes one input line
   every 50 ms throughout; the output topic is created with
   ``message.timestamp.type=LogAppendTime``, so every output record carries the
   broker's append time. The *processing gap* is the longest interval between
   two consecutive output records of the run (it spans the migration: last
   output ... kill ... group Empty ... restart ... first output). Three
   variants, each with its own application id, the DAG's Params at their
   defaults but the polls (0.5 s). Each application is registered in the
   bench's controller registry (``[kip848] controllers``, a file in its work
   directory) as a ``local-wordcount`` entry named after its application id:
   the run names it (``app_controller``) and sets only what the kind lets a
   run set (``app_controller_args`` ``{"stop_mode": "kill"}``), as a
   deployment's run would; everything else is the entry's target.

   (a) defaults: the DAG kills the instance (``stop_mode`` kill), the
       controller confirms it gone (its status shows no instance:
       ``instances_gone``), so the DAG forces out the member the killed app
       left behind at once and needs no settle time;
   (b) session timeout: the same kill by a controller whose platform cannot
       say which instances exist (``reports_status`` False in the registry
       entry: its status is unknown, so the stop confirms nothing). Without
       that confirmation the empty wait never forces a member out, whatever
       ``remove_members_after``: the classic member expires when its
       ``session.timeout.ms`` (10000 ms, set on the app) runs out, and the
       group must then stay empty for ``empty_settle_seconds`` (10 s, the
       default). ``remove_members_after`` is 600 s as it always was here: it
       no longer decides anything, it only keeps the wait from a removal
       attempt (a note, and a second deferral) while the session runs out;
   (c) as (a), with the Param ``restart_rebalance_delay_ms`` = 0: the group's
       ``streams.initial.rebalance.delay.ms`` is 0 for the restart (put back
       after).

   After the restart the DAG waits for the streams group with each member
   proven alive (its committed offsets advance while the input still flows;
   else it must stay listed for the group's session timeout + heartbeat + 1 s,
   51 s at broker defaults) and, in (a) and (c), the controller's status
   showing the instance running; that wait follows the first output, so it
   can lengthen the DAG run, not the gap.

   Broker-side minimum, two ways: computed, app restart +
   ``group.streams.initial.rebalance.delay.ms`` (read from the broker's
   config, its source printed); and measured, the relaunch of a WordCountDemo
   already on the streams protocol after a clean stop (nothing to migrate)
   with the broker's delay, launch -> first output record. *App restart* is
   that relaunch with the group's ``streams.initial.rebalance.delay.ms`` at 0
   (the minimum of variant c). Overhead = gap - minimum, with the gap's
   timeline: last output -> kill, kill -> group Empty, Empty -> new JVM
   launched (DAG tasks in between), launch -> first output.

2. Rolling KIP-848 upgrade (``kip848_consumer_rolling_upgrade``): 6
   ``consumer_app`` processes (classic) on a 12-partition topic, a producer
   writing one record to every partition every 50 ms. When the DAG's approval
   is answered and it has snapshotted the offsets, the "team" restarts instance
   0..5 one by one with ``group.protocol=consumer`` (SIGTERM, start, wait until
   the new process consumes, next) while the DAG waits. Per partition: the
   longest interval between consecutive consumed records (the consumers' own
   processing timestamps) during the roll; max and median across partitions,
   and the same over a steady window before the roll (the consumers poll in
   batches of up to 0.5 s, so that is the floor). No controller is named (the
   team rolls): the DAG checks no instances, and each member proves it is
   alive by its commits while the producer writes (else through the same
   liveness window).

The DAGs run with PySpark validation off (``validate_with_spark`` False): it
runs after the downtime and would only lengthen the bench. Every process
started here (broker, JVMs, consumers) is stopped on exit, also on failure
and on SIGTERM/SIGINT (not after SIGKILL: the JVM the DAG's controller starts is
not a die-with-parent child).

Usage: .venv/bin/python bench/migration_downtime.py [--restart-rounds 3] [--instances 6] [--partitions 12]
       [--session-ms 10000] [--keep-logs]
The machine is shared and noisy: read the breakdown and ratios, not single numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Environment for the in-process Airflow, set before Airflow is first imported (as tests/conftest.py does).
os.environ.setdefault("KIP848_CACHE_DIR", str(REPO / ".cache"))
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="kip848-downtime-airflow-"))
os.environ["AIRFLOW_HOME"] = str(AIRFLOW_HOME)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
os.environ["AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"] = json.dumps([
    {"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
     "kwargs": {"path": str(REPO / "dags")}},
])
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] = "True"
# the in-process REST client of the approvals warns on every call; the figures are what matters here
warnings.filterwarnings("ignore", message="The HMAC key is")
warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, ResourceType  # noqa: E402

from airflow_provider_kip848.kafka.native import KafkaAdmin  # noqa: E402
from airflow_provider_kip848.kafka.settings import ClientSettings  # noqa: E402
from kip848_harness.appcontrol import LocalWordCountController  # noqa: E402
from kip848_harness.apps import (  # noqa: E402  # noqa: E402
    WORDCOUNT_INPUT_TOPIC,
    WORDCOUNT_OUTPUT_TOPIC,
    StreamsApp,
    wordcount_properties,
)
from kip848_harness.clients import ConsumerProcess, create_topics  # noqa: E402
from kip848_harness.kafka_cluster import LocalKafka  # noqa: E402
from kip848_harness.registry import RegistryFile  # noqa: E402
from kip848_harness.waiting import wait_until  # noqa: E402
from kip848_harness.windows import open_window  # noqa: E402

DELAY_KEY = "streams.initial.rebalance.delay.ms"
BROKER_DELAY_KEY = "group.streams.initial.rebalance.delay.ms"
TICK = 0.05  # the producers write every 50 ms


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


# -- load and observation ---------------------------------------------------------------------------------------------


class Ticker(threading.Thread):
    """A steady producer: every TICK one record (or one per partition) to the current target, until paused."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True, name="ticker")
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})
        self.lock = threading.Lock()
        self.target: tuple[str, str | None, tuple[int, ...] | None] | None = None
        self.stop_flag = threading.Event()
        self.seq = 0
        self.errors: list[str] = []

    def aim(self, topic: str, value: str | None = None, partitions: tuple[int, ...] | None = None) -> None:
        with self.lock:
            self.target = (topic, value, partitions)

    def pause(self) -> None:
        with self.lock:
            self.target = None

    def _on_delivery(self, err, _msg) -> None:
        if err is not None and len(self.errors) < 10:
            self.errors.append(str(err))

    def run(self) -> None:
        due = time.monotonic()
        while not self.stop_flag.is_set():
            with self.lock:
                target = self.target
            if target is not None:
                topic, value, partitions = target
                for p in partitions if partitions is not None else (None,):
                    self.seq += 1
                    kwargs = {"partition": p} if p is not None else {}
                    self.producer.produce(topic, key=str(self.seq), value=value or str(self.seq),
                                          on_delivery=self._on_delivery, **kwargs)
                self.producer.poll(0)
            due += TICK
            self.stop_flag.wait(max(0.0, due - time.monotonic()))
            if time.monotonic() - due > 1.0:  # starved (noisy machine): do not burst to catch up
                due = time.monotonic()

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(10)
        self.producer.flush(10)
        self.producer = None


class OutputWatcher(threading.Thread):
    """Reads the output topic from the beginning; keeps (key, broker append time) of every record."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True, name="output-watcher")
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kip848-unused-reader",
                                  "enable.auto.commit": False, "enable.partition.eof": False})
        parts = self.consumer.list_topics(topic, timeout=10).topics[topic].partitions
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        self.lock = threading.Lock()
        self.records: list[tuple[str, float]] = []
        self.stop_flag = threading.Event()
        self.not_append_time = 0

    def run(self) -> None:
        try:
            while not self.stop_flag.is_set():
                msg = self.consumer.poll(0.2)
                if msg is None or msg.error():
                    continue
                ts_type, ts = msg.timestamp()
                if ts_type != 2:  # TIMESTAMP_LOG_APPEND_TIME
                    self.not_append_time += 1
                with self.lock:
                    self.records.append(((msg.key() or b"").decode(errors="replace"), ts / 1000.0))
        finally:
            self.consumer.close()

    def times(self, key: str) -> list[float]:
        with self.lock:
            return sorted(t for k, t in self.records if k == key)

    def first_after(self, key: str, since: float) -> float | None:
        later = [t for t in self.times(key) if t >= since]
        return later[0] if later else None

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(10)


class GroupMonitor(threading.Thread):
    """Describes one group every 0.2 s and keeps each change of (type, state, members)."""

    def __init__(self, bootstrap: str, group: str) -> None:
        super().__init__(daemon=True, name=f"monitor-{group}")
        self.bootstrap, self.group = bootstrap, group
        self.samples: list[tuple[float, str, str, int]] = []
        self.stop_flag = threading.Event()

    def run(self) -> None:
        with KafkaAdmin(ClientSettings(self.bootstrap)) as admin:
            last = None
            while not self.stop_flag.is_set():
                t = time.time()
                try:
                    d = admin.describe_group(self.group)
                    now = (d.type.value, d.state, len(d.members))
                except Exception as exc:  # noqa: BLE001 - absent group, coordinator moving ...
                    now = ("none", type(exc).__name__, 0)
                if now != last:
                    self.samples.append((t, *now))
                    last = now
                self.stop_flag.wait(0.2)

    def first(self, pred: Callable[[str, str, int], bool], after: float = 0.0) -> float | None:
        for t, typ, state, n in list(self.samples):
            if t >= after and pred(typ, state, n):
                return t
        return None

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(10)


_LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")
_STATUS = re.compile(r"Membership is in the following statuses: \(\d+\) ([^.:]*)")


def app_phases(log_path: Path, launch: float) -> dict:
    """From a WordCountDemo log: seconds after ``launch`` of its first heartbeat answer (a first assignment,
    maybe empty), of its first assignment with tasks and of RUNNING; the heartbeat statuses it was given."""
    out: dict = {"joined": None, "tasks": None, "running": None, "statuses": []}
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        m = _LOG_TIME.match(line)
        if not m:
            continue
        t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() - launch  # local time, as log4j
        if "Processing new assignment" in line:
            if out["joined"] is None:
                out["joined"] = t
            if out["tasks"] is None and "activeTasks=[]" not in line:
                out["tasks"] = t
        elif "stream-client" in line and "REBALANCING to RUNNING" in line and out["running"] is None:
            out["running"] = t
        elif (st := _STATUS.search(line)) and st.group(1) not in out["statuses"]:
            out["statuses"].append(st.group(1))
    return out


def fmt_phases(ph: dict, first_output: float) -> str:
    parts = []
    if ph["joined"] is not None:
        parts.append(f"launch -> first heartbeat answer {ph['joined']:.2f}")
        if ph["tasks"] is not None:
            parts.append(f"-> tasks assigned {ph['tasks'] - ph['joined']:.2f}")
            parts.append(f"-> first output {first_output - ph['tasks']:.2f}")
    if ph["statuses"]:
        parts.append(f"(broker said: {'; '.join(ph['statuses'])})")
    return " ".join(parts)


def longest_gap(times: list[float], start: float = float("-inf"), end: float = float("inf")):
    """The longest interval between consecutive times that overlaps [start, end]: (gap, before, after)."""
    best = (0.0, None, None)
    for a, b in zip(times, times[1:], strict=False):
        if b >= start and a <= end and b - a > best[0]:
            best = (b - a, a, b)
    return best


# -- the bench --------------------------------------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        self.args, self.tmp = args, tmp
        self.kafka = LocalKafka(tmp / "kafka", version=args.version, tuning="production", die_with_parent=True)
        self.apps: list[StreamsApp] = []
        self.app_ids: list[str] = []
        self.consumers: list[ConsumerProcess] = []
        self.threads: list = []
        self.stamp = time.strftime("%H%M%S")

    # -- set-up / tear-down

    def start(self) -> None:
        import subprocess

        migrate = subprocess.Popen([sys.executable, "-m", "airflow", "db", "migrate"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            report = self.kafka.start()
        finally:
            _, err = migrate.communicate(timeout=300)
        if migrate.returncode:
            raise RuntimeError(f"airflow db migrate failed: {err.decode(errors='replace')[-2000:]}")
        self.bootstrap = self.kafka.bootstrap_servers
        say(f"broker: {report.summary()}")
        os.environ["AIRFLOW_CONN_KAFKA_ADMIN_DEFAULT"] = json.dumps(
            {"conn_type": "kafka_admin", "host": self.bootstrap, "extra": {}})
        # the deployment's controller registry ([kip848] controllers; the DAGs run in this process): each
        # application a variant migrates is added to it, and its run names that entry
        self.registry = RegistryFile(self.tmp / "controllers.json").activate()
        self.admin = KafkaAdmin(ClientSettings(self.bootstrap))
        self.broker_configs = self._broker_configs()
        # WordCountDemo's fixed topics; the output with the broker's append time on every record
        create_topics(self.bootstrap, {WORDCOUNT_INPUT_TOPIC: 2})
        client = AdminClient({"bootstrap.servers": self.bootstrap})
        fut = client.create_topics(
            [NewTopic(WORDCOUNT_OUTPUT_TOPIC, num_partitions=2, replication_factor=1,
                      config={"message.timestamp.type": "LogAppendTime"})])
        fut[WORDCOUNT_OUTPUT_TOPIC].result(30)
        del client, fut
        create_topics(self.bootstrap, {WORDCOUNT_OUTPUT_TOPIC: 2})  # waits until visible
        self.ticker = Ticker(self.bootstrap)
        self.watcher = OutputWatcher(self.bootstrap, WORDCOUNT_OUTPUT_TOPIC)
        for t in (self.ticker, self.watcher):
            t.start()
            self.threads.append(t)

    def _broker_configs(self) -> dict[str, tuple[str, str]]:
        """name -> (value, source) of the broker's group.* configs, as DescribeConfigs reports them."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        broker_id = str(admin.describe_cluster().result(15).nodes[0].id)
        res = ConfigResource(ResourceType.BROKER, broker_id)
        entries = admin.describe_configs([res])[res].result(15)
        return {n: (e.value, ConfigSource(e.source).name) for n, e in entries.items() if n.startswith("group.")}

    def cleanup(self) -> None:
        for t in reversed(self.threads):
            try:
                t.stop()
            except Exception:  # noqa: BLE001 - best effort, keep cleaning
                pass
        for c in self.consumers:
            try:
                c.kill()
            except Exception:  # noqa: BLE001
                pass
        for app in self.apps:
            try:
                app.kill()
            except Exception:  # noqa: BLE001
                pass
        # the instances the DAGs started (not children with die-with-parent): by their command line, as the
        # DAGs' controller finds them
        if self.kafka.state_path.exists():
            for app_id in self.app_ids:
                try:
                    LocalWordCountController(str(self.kafka.workdir), app_id, stop_mode="kill").stop()
                except Exception:  # noqa: BLE001
                    pass
        if getattr(self, "admin", None):
            self.admin.close()
            self.admin = None
        import gc

        gc.collect()  # librdkafka handles still open would log every reconnect attempt once the broker is gone
        self.kafka.stop()

    # -- helpers

    @property
    def apps_dir(self) -> Path:
        return self.kafka.workdir / "apps"

    def launch(self, app_id: str, protocol: str, extra: dict[str, str] | None = None) -> tuple[StreamsApp, float]:
        """Start WordCountDemo the way LocalWordCountController does (same pid file, and the same marker on its
        command line, by which the DAG's controller finds it), as our child."""
        props = wordcount_properties(self.bootstrap, app_id, group_protocol=protocol,
                                     state_dir=self.apps_dir / f"{app_id}-state", extra=extra)
        t = time.time()
        app = StreamsApp.start(self.kafka.distribution, props, workdir=self.apps_dir,
                               name=f"{app_id}-{protocol}-{time.time_ns()}", die_with_parent=True)
        self.apps.append(app)
        return app, t

    def wait_output(self, tag: str, since: float, timeout: float = 120.0) -> float:
        return wait_until(lambda: self.watcher.first_after(tag, since), timeout=timeout, what=f"output of {tag}",
                          interval=0.05)

    def stop_streams_app(self, app: StreamsApp, app_id: str) -> None:
        """A clean stop (the app leaves its streams group); wait for the group to be empty."""
        app.stop()
        try:
            wait_until(lambda: not self.admin.describe_group(app_id).members, what=f"{app_id} empty", timeout=60,
                       interval=0.25)
        except TimeoutError:
            say(f"warning: {app_id} still has members after a clean stop")

    def window(self) -> dict:
        return open_window()

    def run_dag(self, module: str, conf: dict, work: Path, before_answer=None):
        """Run ``module`` with ``conf``; its snapshots, report and audit records under ``work`` (the deployment's
        artifact location and audit log for this run: a run's conf names no path)."""
        from kip848_harness.dagrun import run_dag, run_state

        os.environ["KIP848_ARTIFACTS_URL"] = str(work / "artifacts")
        os.environ["KIP848_AUDIT_LOG"] = str(work / "audit.jsonl")
        t0 = time.time()
        run, answers, report = run_dag(module, conf, dags_folder=REPO / "dags", decide=lambda d: "Approve",
                                       before_answer=before_answer)
        took = time.time() - t0
        outcome = (report or {}).get("outcome")
        say(f"{module}: run {run_state(run)}, outcome {outcome}, {took:.1f} s, {len(answers)} approval(s)")
        if run_state(run) != "success" or outcome != "migrated":
            raise RuntimeError(f"{module} did not migrate: state {run_state(run)}, report "
                               f"{json.dumps(report, default=str)[:3000] if report else None}")
        return report, took

    # -- 1a: app restart with nothing to migrate

    def restart_baseline(self) -> dict:
        app_id, tag = f"mdt-restart-{self.stamp}", f"prestart{self.stamp}"
        self.app_ids.append(app_id)
        self.ticker.aim(WORDCOUNT_INPUT_TOPIC, tag)
        self.admin.alter_group_config(app_id, {DELAY_KEY: 0}, allow_absent_group=True)
        extra = {"auto.offset.reset": "latest"}
        app, t = self.launch(app_id, "streams", extra)
        first = self.wait_output(tag, t) - t
        say(f"restart baseline: first launch of {app_id} (new streams group, delay 0): {first:.2f} s to first output")
        time.sleep(2)
        self.stop_streams_app(app, app_id)
        first_phases = app_phases(app.log_path, t)
        results: dict[str, list] = {"delay 0": [], "broker delay": [], "phases delay 0": [], "phases broker delay": []}
        for r in range(self.args.restart_rounds):
            for mode in ("delay 0", "broker delay"):
                if mode == "delay 0":
                    self.admin.alter_group_config(app_id, {DELAY_KEY: 0})
                else:
                    self.admin.alter_group_config(app_id, None, [DELAY_KEY])
                app, t = self.launch(app_id, "streams", extra)
                took = self.wait_output(tag, t) - t
                results[mode].append(took)
                time.sleep(1.5)
                self.stop_streams_app(app, app_id)
                results[f"phases {mode}"].append(app_phases(app.log_path, t))
                say(f"restart baseline round {r + 1}, {mode}: launch -> first output {took:.2f} s; "
                    f"{fmt_phases(results[f'phases {mode}'][-1], took)}")
        return {"first": first, "first phases": first_phases, **results}

    # -- 1b: the offline migration through the DAG

    def streams_variant(self, name: str, remove_after: float | None = None, *, reports_status: bool = True,
                        delay_ms: int | None = None) -> dict:
        app_id, tag = f"mdt-{name}-{self.stamp}", f"p{name}{self.stamp}"
        self.app_ids.append(app_id)
        # registered as a deployment would: the run names it and may set only the stop mode; reports_status
        # False is a platform that cannot tell which instances exist (no confirmation: members expire)
        self.registry.add(app_id, "local-wordcount",
                          {"kafka_workdir": str(self.kafka.workdir), "application_id": app_id,
                           "reports_status": reports_status},
                          description=f"migration_downtime variant {name}: WordCountDemo on this machine")
        self.ticker.aim(WORDCOUNT_INPUT_TOPIC, tag)
        classic, t_launch_classic = self.launch(
            app_id, "classic", {"session.timeout.ms": str(self.args.session_ms), "auto.offset.reset": "latest"})
        self.wait_output(tag, t_launch_classic)
        wait_until(lambda: (d := self.admin.describe_group(app_id)).state == "Stable" and d.type.value == "classic",
                   what=f"{app_id} classic Stable", timeout=90, interval=0.25)
        time.sleep(2)
        monitor = GroupMonitor(self.bootstrap, app_id)
        monitor.start()
        self.threads.append(monitor)
        killed: dict[str, float] = {}

        def watch_death() -> None:
            classic.process.wait()
            killed["t"] = time.time()

        def pause_when_back() -> None:  # the lag sensor needs the input to stop at some point after the restart
            try:
                pid_file = wait_until(lambda: next(iter(self.apps_dir.glob(f"{app_id}-streams-*.pid")), None),
                                      what="the DAG's streams instance", timeout=300, interval=0.25)
                launched = pid_file.stat().st_mtime
                self.wait_output(tag, launched, timeout=180)
                time.sleep(5)
            except TimeoutError:
                pass
            self.ticker.pause()

        threading.Thread(target=watch_death, daemon=True).start()
        pauser = threading.Thread(target=pause_when_back, daemon=True)
        pauser.start()
        work = self.tmp / name
        conf = {"application_id": app_id, "app_controller": app_id, "app_controller_args": {"stop_mode": "kill"},
                **({} if remove_after is None else {"remove_members_after": remove_after}),
                **({} if delay_ms is None else {"restart_rebalance_delay_ms": delay_ms}),
                "poll_seconds": 0.5, "empty_timeout_minutes": 3,
                "stable_timeout_minutes": 3,
                # the broker defaults (production tuning: 45000 and 5000 are also the minimums)
                "standby_replicas": 0, "session_timeout_ms": 45000, "heartbeat_interval_ms": 5000,
                "output_topic": WORDCOUNT_OUTPUT_TOPIC, "validate_with_spark": False, "reader": "python",
                **self.window()}
        try:
            report, took = self.run_dag("kip1071_streams_offline_migration", conf, work)
        finally:
            self.ticker.pause()
            pauser.join(5)
        time.sleep(1)
        monitor.stop()
        times = self.watcher.times(tag)
        t_kill = killed.get("t")
        gap, last_out, first_out = longest_gap(times)
        pid_file = next(iter(self.apps_dir.glob(f"{app_id}-streams-*.pid")))
        t_launch = pid_file.stat().st_mtime
        t_empty = monitor.first(lambda typ, state, n: n == 0 and state in ("Empty", "Dead"), after=t_kill or 0)
        t_stable = monitor.first(lambda typ, state, n: typ == "streams" and state == "Stable", after=t_launch)
        if t_kill is None or not (last_out <= t_kill <= first_out):
            say(f"warning: the kill ({t_kill}) is not inside the longest gap ({last_out} .. {first_out})")
        emptied = report["results"]["emptied"] or {}
        # stop the migrated app cleanly (found by its command line, as the DAG's controller finds it)
        LocalWordCountController(str(self.kafka.workdir), app_id).stop()
        phases = app_phases(pid_file.with_suffix(".log"), t_launch)
        downtime = report.get("downtime") or {}
        return {"app_id": app_id, "gap": gap, "last_out": last_out, "first_out": first_out, "kill": t_kill,
                "report_gap": (downtime.get("processing_gap") or {}).get("seconds"),
                "report_settle": downtime.get("settle_s"),
                "phases": phases,
                "empty": t_empty, "launch": t_launch, "stable": t_stable, "dag_seconds": took,
                "members_removed": len(emptied.get("members_removed") or []), "outputs": len(times)}

    # -- 2: the rolling KIP-848 upgrade through the DAG

    def rolling(self) -> dict:
        n, parts = self.args.instances, self.args.partitions
        topic, group = f"mdt-roll-{self.stamp}", f"mdt-roll-app-{self.stamp}"
        work = self.tmp / "roll"
        work.mkdir(parents=True, exist_ok=True)
        create_topics(self.bootstrap, {topic: parts})
        self.ticker.aim(topic, None, tuple(range(parts)))
        files: list[str] = []

        def start(i: int, protocol: str) -> ConsumerProcess:
            path = str(work / f"app-{i}-{protocol}.jsonl")
            files.append(path)
            proc = ConsumerProcess.start(self.bootstrap, group, [topic], protocol=protocol, client_id=f"app-{i}",
                                         record_file=path, log_file=str(work / f"app-{i}-{protocol}.log"))
            self.consumers.append(proc)
            return proc

        members = [start(i, "classic") for i in range(n)]

        def consumed() -> dict[int, list[float]]:
            per: dict[int, list[float]] = {p: [] for p in range(parts)}
            for path in files:
                try:
                    with open(path) as fh:
                        for line in fh:
                            if line.strip():
                                rec = json.loads(line)
                                per[rec["partition"]].append(rec["at"])
                except (FileNotFoundError, json.JSONDecodeError):
                    continue
            return {p: sorted(ts) for p, ts in per.items()}

        wait_until(lambda: (d := self.admin.describe_group(group)).state == "Stable" and len(d.members) == n,
                   what=f"{n} classic members Stable", timeout=120, interval=0.25)
        wait_until(lambda: all(ts and ts[-1] > time.time() - 2 for ts in consumed().values()),
                   what="every partition consumed", timeout=60, interval=0.25)
        t_steady = time.time()
        roll: dict[str, object] = {"back": []}
        snapshots = work / "artifacts"  # this run's own (work is fresh): its before.json is the one awaited

        def go() -> None:
            try:
                wait_until(lambda: next(iter(snapshots.rglob("before.json")), None), what="the DAG's snapshot",
                           timeout=120, interval=0.25)
                roll["start"] = time.time()
                for i in range(n):
                    t0 = time.time()
                    members[i].stop()
                    members[i] = start(i, "consumer")
                    path = files[-1]
                    wait_until(lambda path=path: os.path.exists(path) and os.path.getsize(path) > 0,
                               what=f"app-{i} consuming again", timeout=120, interval=0.05)
                    roll["back"].append(time.time() - t0)
                roll["end"] = time.time()
                time.sleep(5)  # the tail of the last rebalance is part of the roll
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                roll["error"] = exc
            finally:
                roll["settled"] = time.time()
                self.ticker.pause()  # the DAG waits for lag 0 after the roll

        roller = threading.Thread(target=go, daemon=True)
        conf = {"group_id": group, "output_topic": "", "id_source": "key", "allowed_duplicates": 1000,
                "client_properties": {"group.protocol": "consumer", "enable.auto.commit": "false"},
                "poll_seconds": 0.5, "rollout_timeout_minutes": 4, "rollback_timeout_minutes": 2,
                "validate_with_spark": False, "reader": "python"}
        try:
            report, took = self.run_dag("kip848_consumer_rolling_upgrade", conf, work,
                                        before_answer=lambda detail: roller.start())
        finally:
            roller.join(300)
            self.ticker.pause()
        if "error" in roll:
            raise roll["error"]  # type: ignore[misc]
        per = consumed()
        start_t, end_t = roll["start"], roll["settled"]
        gaps = {p: longest_gap(ts, start_t, end_t) for p, ts in per.items()}
        steady = {p: longest_gap([t for t in ts if t_steady <= t <= start_t]) for p, ts in per.items()}
        for m in members:
            m.stop()
        return {"gaps": {p: g[0] for p, g in gaps.items()}, "steady": {p: g[0] for p, g in steady.items()},
                "steady_seconds": start_t - t_steady, "roll_seconds": roll["end"] - start_t,
                "back": roll["back"], "dag_seconds": took, "after": report.get("after")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default="4.3.1")
    parser.add_argument("--restart-rounds", type=int, default=3)
    parser.add_argument("--instances", type=int, default=6)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--session-ms", type=int, default=10000,
                        help="session.timeout.ms of the classic WordCountDemo (variant b waits for it)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the work directory (broker, apps, reports)")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="kip848-downtime-"))
    bench = Bench(args, tmp)

    def stop_now(signum, _frame):
        """SIGTERM/SIGINT: stop every process started here, remove the temp dirs, exit at once."""
        say(f"signal {signum}: stopping every process this bench started")
        try:
            bench.cleanup()
        finally:
            shutil.rmtree(AIRFLOW_HOME, ignore_errors=True)
            if not args.keep_logs:
                shutil.rmtree(tmp, ignore_errors=True)
            os._exit(128 + signum)

    real_signal = signal.signal

    def keep_ours(signum, handler):
        # dag.test() runs the tasks in this process, and Airflow's task runner installs its own SIGTERM
        # handler for every task (it only calls the task's on_kill) without restoring ours: keep ours, after theirs.
        if signum in (signal.SIGTERM, signal.SIGINT) and handler is not stop_now:
            if not callable(handler):
                return real_signal(signum, stop_now)

            def chained(s, f, theirs=handler):
                try:
                    theirs(s, f)
                finally:
                    stop_now(s, f)

            return real_signal(signum, chained)
        return real_signal(signum, handler)

    signal.signal = keep_ours
    real_signal(signal.SIGTERM, stop_now)
    real_signal(signal.SIGINT, stop_now)
    t_all = time.time()
    try:
        bench.start()
        cfg = bench.broker_configs
        delay_value, delay_source = cfg.get(BROKER_DELAY_KEY, ("3000", "not reported: Kafka's documented default"))
        delay = int(delay_value) / 1000.0
        say("restart baseline (WordCountDemo already on the streams protocol, nothing to migrate)")
        base = bench.restart_baseline()
        say("variant a: offline migration at the DAG's defaults: the controller confirms the killed app gone, "
            "the DAG forces the left-behind member out at once")
        forced = bench.streams_variant("defaults")
        say(f"variant b: offline migration, a controller that cannot confirm: the DAG waits for the classic "
            f"session timeout ({args.session_ms} ms)")
        session = bench.streams_variant("session", 600, reports_status=False)
        say("variant c: as a, with restart_rebalance_delay_ms=0 (the group's delay lowered for the restart)")
        no_delay = bench.streams_variant("delay0", delay_ms=0)
        say(f"rolling KIP-848 upgrade: {args.instances} consumers, {args.partitions} partitions")
        roll = bench.rolling()
    finally:
        try:
            bench.cleanup()
        finally:
            shutil.rmtree(AIRFLOW_HOME, ignore_errors=True)
            if args.keep_logs:
                print(f"work directory kept: {tmp}")
            else:
                shutil.rmtree(tmp, ignore_errors=True)

    restart = statistics.median(base["delay 0"])
    with_delay = statistics.median(base["broker delay"])
    minimum = restart + delay
    print()
    print(f"== Migration downtime, Kafka {args.version}, production tuning (broker defaults); "
          f"bench took {time.time() - t_all:.0f} s ==")
    print("broker configs (DescribeConfigs): " + ", ".join(
        f"{k}={cfg[k][0]} ({cfg[k][1]})" for k in (BROKER_DELAY_KEY, "group.streams.heartbeat.interval.ms",
                                                   "group.streams.session.timeout.ms",
                                                   "group.initial.rebalance.delay.ms") if k in cfg))
    print(f"{BROKER_DELAY_KEY}: {delay_value} ms (source: {delay_source})")
    print(f"input: one line every {TICK * 1000:.0f} ms; output timestamps: the broker's LogAppendTime")
    print()
    print("-- app restart, WordCountDemo on the streams protocol, nothing to migrate (launch -> first output) --")
    print(f"first launch, new group (internal topics created), group delay 0: {base['first']:.2f} s; "
          f"{fmt_phases(base['first phases'], base['first'])}")
    for label, key, med in (("relaunch, group delay 0 (= app restart)", "delay 0", restart),
                            (f"relaunch, broker delay ({delay_value} ms)", "broker delay", with_delay)):
        print(f"{label}: median {med:.2f} s ({', '.join(f'{x:.2f}' for x in base[key])})")
        i = base[key].index(sorted(base[key])[len(base[key]) // 2])
        print(f"   median run: {fmt_phases(base['phases ' + key][i], base[key][i])}")
    print(f"broker-side minimum = app restart + delay = {restart:.2f} + {delay:.2f} = {minimum:.2f} s")
    print()
    print("-- offline streams migration (kip1071_streams_offline_migration, stop_mode kill) --")
    for label, v in (("a) defaults: the controller confirms the instance gone, forced out at once", forced),
                     (f"b) no confirmation: the DAG waits for the session timeout ({args.session_ms} ms)", session),
                     ("c) as a, restart_rebalance_delay_ms=0", no_delay)):
        print(label)
        print(f"   processing gap (longest stretch with no output record): {v['gap']:.2f} s"
              f"   [DAG run {v['dag_seconds']:.0f} s, {v['members_removed']} member(s) force-removed]")
        print(f"   the DAG's report: processing gap {v['report_gap']} s (output records), first member left -> "
              f"Stable on streams {v['report_settle']} s")
        parts = []
        if v["kill"] is not None:
            parts.append(f"last output -> kill {v['kill'] - v['last_out']:.2f}")
            if v["empty"] is not None:
                parts.append(f"kill -> group Empty {v['empty'] - v['kill']:.2f}")
                parts.append(f"Empty -> streams JVM launched {v['launch'] - v['empty']:.2f}")
            else:
                parts.append(f"kill -> streams JVM launched {v['launch'] - v['kill']:.2f}")
        parts.append(f"launch -> first output {v['first_out'] - v['launch']:.2f}")
        print("   timeline (s): " + "; ".join(parts))
        print(f"   the new instance: {fmt_phases(v['phases'], v['first_out'] - v['launch'])}")
        if v["stable"] is not None:
            print(f"   (streams group Stable {v['stable'] - v['launch']:.2f} s after launch, described every 0.2 s)")
    print()
    print(f"-- rolling KIP-848 upgrade (kip848_consumer_rolling_upgrade): {args.instances} consumers, "
          f"{args.partitions} partitions --")
    g = sorted(roll["gaps"].values())
    s = sorted(roll["steady"].values())
    print(f"roll of {args.instances} instances: {roll['roll_seconds']:.1f} s (restart -> consuming again per instance: "
          f"{', '.join(f'{x:.1f}' for x in roll['back'])} s); DAG run {roll['dag_seconds']:.0f} s")
    print(f"longest consumption gap per partition during the roll: max {g[-1]:.2f} s, median "
          f"{statistics.median(g):.2f} s, min {g[0]:.2f} s")
    print("   per partition: " + ", ".join(f"p{p}={x:.2f}" for p, x in sorted(roll["gaps"].items())))
    print(f"steady state before the roll ({roll['steady_seconds']:.0f} s window): max {s[-1]:.2f} s, median "
          f"{statistics.median(s):.2f} s")
    print()
    print("-- overheads and ratios (measured minimum: the same app relaunched with nothing to migrate) --")
    print("| variant | gap (s) | measured minimum (s) | overhead (s) | gap / minimum | computed minimum (s) | "
          "gap - computed (s) |")
    print("|---|---|---|---|---|---|---|")
    for label, v, measured, computed in (("a) defaults", forced, with_delay, minimum),
                                         ("b) session timeout", session, with_delay, minimum),
                                         ("c) delay 0 for the restart", no_delay, restart, restart)):
        print(f"| {label} | {v['gap']:.2f} | {measured:.2f} | {v['gap'] - measured:.2f} | "
              f"{v['gap'] / measured:.2f}x | {computed:.2f} | {v['gap'] - computed:.2f} |")
    for label, v in (("a", forced), ("b", session), ("c", no_delay)):
        if v["kill"] is not None:
            print(f"   {label} = last output -> kill {v['kill'] - v['last_out']:.2f} s + DAG, kill -> streams JVM "
                  f"launched {v['launch'] - v['kill']:.2f} s + launch -> first output "
                  f"{v['first_out'] - v['launch']:.2f} s")
    print(f"session timeout / defaults: {session['gap'] / forced['gap']:.2f}x "
          f"(+{session['gap'] - forced['gap']:.2f} s); delay 0 / defaults: {no_delay['gap'] / forced['gap']:.2f}x")
    print(f"rolling upgrade: max partition gap / steady-state max gap: {g[-1] / s[-1]:.1f}x")
    if bench.ticker.errors:
        print(f"producer errors: {bench.ticker.errors}")
    if bench.watcher.not_append_time:
        print(f"warning: {bench.watcher.not_append_time} output records without LogAppendTime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
