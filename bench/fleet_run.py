"""Fleet run: kip848_fleet_migration over 30 applications of real consumers, in waves, on a 3-node cluster.

The fleet: ``--apps`` (default 30) applications on the embedded 3-node KRaft
cluster (Kafka's own distribution, 3 combined broker+controller nodes, topics
on 3 replicas). Each application owns ``--groups-per-app`` (default 2) consumer
groups, each reading a topic of its own (2 partitions, ``--records`` keyed
records), with ``--instances`` (default 1) real confluent-kafka consumer
processes per group (``kip848_harness.consumer_app`` under
``LocalConsumerFleetAppController``), started on the classic protocol and
caught up (lag 0) before the run. Each application is registered in the
bench's controller registry (``[kip848] controllers``: a file in the working
directory, its path in ``AIRFLOW__KIP848__CONTROLLERS`` for every Airflow
process) as a ``local-consumer-fleet-app`` entry named after the application
(its workdir, bootstrap servers, groups and instances are the entry's target);
the ownership map names that entry (``app_controller``) and gives no run
arguments, as a deployment's map would. Every third application (app-00,
app-03, ...) is forced offline in the ownership map (``migration: offline``:
stop, Empty, start on the consumer protocol); the others go online (a rolling
restart through the controller). The ownership map reaches every Airflow
process as ``AIRFLOW_VAR_KIP848_OWNERSHIP_MAP``.

The run: ``dags/kip848_fleet_migration.py`` through
``dag.test(use_executor=True)`` (a LocalExecutor with ``--slots`` worker slots,
default ``--parallelism`` + 2: a slot for each application a wave moves at once
and two for the run's own tasks, as the plan asks a deployment to give it;
``--slots 4`` measures a deployment with fewer slots than that, where the
applications queue for slots), an ``airflow api-server --apps all`` (the execution API for the
task processes, the public REST API for the approvals) and a real
``airflow triggerer``, on a temporary ``AIRFLOW_HOME`` with a SQLite metadata
DB. Conf: canary 2, wave_size 10, max_groups_per_wave 20, error budget 0,
poll 0.5 s, Empty settle 2 s, members forced out after 2 s. Each wave's approval
(Airflow's Human-in-the-loop) is answered as soon as it appears, by a thread of
this process through the api-server's REST API (GET hitlDetails, PATCH
Approve, as the Required Actions page does); how long each request stayed open
is recorded so it can be subtracted.

Measured in one run and printed:

* total wall time of the DAG run (and without the approval waits);
* per wave: open -> judge, the approval wait inside it, the sum of the
  applications' own durations (the WaveRecord results the judge returns) and
  their span, applications and groups migrated / failed by path;
* the longest processing gap (offline applications, results' ``gap_s``: from
  the stop to the end of the last group's migrated wait, which now also needs
  each member proven alive: the fleet's topics get no records after the
  catch-up, so no member can prove it by committing, and each stays listed
  for the group's session timeout + heartbeat + 1 s, 7.5 s on the fast-tuned
  cluster, before its wait ends; the same holds for every online wait);
* worker slots held while waiting: the metadata DB sampled every 0.3 s for the
  run's task instances by state (running = in a worker slot, deferred = waiting
  in the triggerer without a slot, queued = task process starting or waiting
  for a slot, scheduled, awaiting_input = an approval open): max / mean running
  vs deferred during the waves, slot-seconds (integral of running) against what
  poking waits would have held (integral of running + deferred), as a ratio;
* the groups' type and live members' protocol after the run (from the cluster).

The same run also moves one more application, ``solo-app`` (one group, one
instance, the same controller kind, not in the ownership map so the fleet
leaves it alone), with the single-group DAG ``kip848_consumer_offline_migration``
(the same approvals thread, the same Airflow, after the fleet's run), and
prints its processing gap (the stop task's ``stop_started_at`` to the
``met_at`` of its migrated wait: the moment the trigger saw the group
migrated, not the resumed task) against the fleet's offline applications'
median gap, as a ratio measured side by side.

Airflow's LocalExecutor runs as released. A task process it loses (a resumed
deferred task failed as "killed externally", apache/airflow#71580) is retried
and takes its move up at the recorded step; the run prints how many task
instances needed a retry and how many moves were taken up again.

Note: ``dag.test()``'s own scheduling loop does not apply the DAG's
``max_active_tis_per_dagrun`` (``KIP848_FLEET_PARALLELISM``; Airflow's scheduler
does): every application of a wave is handed to the executor at once and the
worker slots are the limit.

Every process (consumers, brokers, Airflow) is stopped on exit, also on Ctrl-C
or a failure; the temporary directory is kept after a failure (logs) or with
``--keep``.

Usage: KIP848_CACHE_DIR=$PWD/.cache .venv/bin/python bench/fleet_run.py [--apps 30] [--groups-per-app 2]
       [--instances 1] [--records 300] [--slots 12] [--parallelism 10] [--small] [--keep] [--no-single]
       [--figures-from DIR]
(--small: 6 applications, 100 records.) The machine is shared and noisy (2 cores).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from _airflow_local import AirflowServices, airflow_env, db_migrate, executor_env, free_port, stop_session

from kip848_harness.windows import open_window

HERE = Path(__file__).resolve()
REPO = HERE.parents[1]
DAG_ID = "kip848_fleet_migration"
#: the single-group DAG the comparison runs on ``solo-app``
SINGLE_DAG_ID = "kip848_consumer_offline_migration"
SOLO = "solo-app"
#: the controller kind (entry point) each application is registered with in the bench's registry
CONTROLLER_KIND = "local-consumer-fleet-app"
STATES = ("running", "deferred", "queued", "scheduled", "awaiting_input", "success", "failed", "skipped",
          "upstream_failed")
WAITS = ("wait_empty", "wait_migrated", "wait_lag", "wait_back")
TEAMS = ("team-a", "team-b", "team-c")


# -- the fleet --------------------------------------------------------------------------------------------


class Fleet:
    """The applications: names, teams, paths, groups, topics and their controllers."""

    def __init__(self, n: int, groups_per_app: int, instances: int, workdir: str, bootstrap: str, *,
                 solo: bool = True) -> None:
        width = max(2, len(str(n - 1)))
        self.instances = instances
        self.apps: dict[str, dict[str, Any]] = {}
        #: the application the single-group DAG moves (one group; not in the ownership map)
        self.solo: dict[str, Any] | None = {
            "team": "solo", "path": "offline",
            "args": {"workdir": workdir, "bootstrap_servers": bootstrap, "instances": instances,
                     "groups": {f"{SOLO}-g0": [f"{SOLO}-g0-in"]}}} if solo else None
        for i in range(n):
            app = f"app-{i:0{width}d}"
            groups = {f"fleet-{app}-g{k}": [f"fleet-{app}-g{k}-in"] for k in range(groups_per_app)}
            self.apps[app] = {
                "team": TEAMS[min(i * len(TEAMS) // n, len(TEAMS) - 1)],
                "path": "offline" if i % 3 == 0 else "online",
                "args": {"workdir": workdir, "bootstrap_servers": bootstrap, "groups": groups,
                         "instances": instances},
            }

    @property
    def groups(self) -> list[str]:
        return [g for a in self.apps.values() for g in a["args"]["groups"]]

    def _every(self) -> dict[str, dict[str, Any]]:
        """The fleet's applications and the solo one."""
        return {**self.apps, **({SOLO: self.solo} if self.solo else {})}

    @property
    def every_group(self) -> list[str]:
        return [g for a in self._every().values() for g in a["args"]["groups"]]

    @property
    def topics(self) -> list[str]:
        return [t for a in self._every().values() for ts in a["args"]["groups"].values() for t in ts]

    def controller(self, app: str) -> Any:
        """The application's own controller, as its team drives it (the bench starts and stops the fleet with it;
        the DAG resolves the registry entry :meth:`register` wrote)."""
        from kip848_harness.appcontrol import LocalConsumerFleetAppController

        return LocalConsumerFleetAppController(**self._every()[app]["args"])

    def register(self, registry: Any) -> None:
        """Add every application to the deployment's controller registry (a ``RegistryFile``), under its name:
        what the ownership map's ``app_controller`` (and the single-group DAG's Param) names."""
        for app, a in self._every().items():
            registry.add(app, CONTROLLER_KIND, a["args"], description=f"fleet_run {app}: consumer_app processes "
                                                                      "on this machine")

    def ownership_yaml(self) -> str:
        import yaml

        rules = []
        for app, a in self.apps.items():
            # a registry name (see register) and no run arguments: the kind lets a run set only its stop mode
            rule = {"prefix": f"fleet-{app}-", "app": app, "team": a["team"], "app_controller": app,
                    "expected_instances": self.instances}
            if a["path"] == "offline":
                rule["migration"] = "offline"
            rules.append(rule)
        return yaml.safe_dump({"version": 1, "rules": rules}, sort_keys=False)

    def running_pids(self) -> list[int]:
        return [pid for app in self._every() for pid in self.controller(app).running_pids()]

    def stop_all(self, grace_s: float = 15.0) -> int:
        """SIGTERM every running instance of every application at once, SIGKILL what is left after
        ``grace_s``; returns how many there were."""
        pids = self.running_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self.running_pids():
            time.sleep(0.3)
        for pid in self.running_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return len(pids)


def caught_up(admin: Any, fleet: Fleet) -> str | None:
    """None when every group is Stable with its instances and lag 0; else what is not yet."""
    inv = admin.inventory(fleet.every_group)
    seen = {e.group_id: e for e in inv.entries}
    for g in fleet.every_group:
        e = seen.get(g)
        if e is None or e.error:
            return f"{g}: {'not listed' if e is None else e.error}"
        if e.state.value != "Stable" or e.member_count != fleet.instances:
            return f"{g}: {e.state.value} with {e.member_count} member(s)"
        if e.offsets is None or e.lag != 0 or e.offsets.uncommitted_with_records:
            return f"{g}: lag {e.lag}"
    return None


def start_fleet(fleet: Fleet, bootstrap: str, records: int) -> float:
    """Topics, records, every application started on classic; seconds until all are caught up."""
    from airflow_provider_kip848.kafka.native import KafkaAdmin
    from airflow_provider_kip848.kafka.settings import ClientSettings
    from kip848_harness.clients import create_topics, produce

    t0 = time.monotonic()
    create_topics(bootstrap, {t: 2 for t in fleet.topics}, timeout=120)
    for t in fleet.topics:
        produce(bootstrap, t, (f"{t}-v{i}" for i in range(records)), keys=(str(i) for i in range(records)))
    for app in [*fleet.apps, *([SOLO] if fleet.solo else [])]:
        fleet.controller(app).start("classic")
    last: list[str | None] = ["not checked"]
    deadline = time.monotonic() + 600
    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        while time.monotonic() < deadline:
            try:
                last[0] = caught_up(admin, fleet)
            except Exception as exc:  # noqa: BLE001 - the cluster is settling
                last[0] = f"{type(exc).__name__}: {exc}"
            if last[0] is None:
                return time.monotonic() - t0
            time.sleep(2)
    raise TimeoutError(f"the fleet's classic groups were not all Stable and caught up within 600 s: {last[0]}")


def groups_after(bootstrap: str, fleet: Fleet) -> dict[str, Any]:
    """Each group's type and its live members' protocols, from the cluster, after the run."""
    from airflow_provider_kip848.kafka.native import KafkaAdmin
    from airflow_provider_kip848.kafka.rules.conditions import is_live
    from airflow_provider_kip848.kafka.settings import ClientSettings

    types: dict[str, int] = {}
    members: dict[str, int] = {}
    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        for g in fleet.groups:
            desc = admin.describe_group(g)
            types[desc.type.value] = types.get(desc.type.value, 0) + 1
            for m in desc.members:
                if is_live(m):
                    members[m.protocol.value] = members.get(m.protocol.value, 0) + 1
    return {"types": types, "live_member_protocols": members}


# -- approvals and the DB sampler (threads of this process) -----------------------------------------------


def _parse_time(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


class Approver(threading.Thread):
    """Approves every open Human-in-the-loop request of the DAG through the api-server's REST API, as soon
    as it sees it (polling every ``poll`` s); records when each was created, seen and answered."""

    def __init__(self, base_url: str, poll: float = 0.3, dag_ids: tuple[str, ...] = (DAG_ID, SINGLE_DAG_ID),
                 min_open_s: float = 1.0) -> None:
        super().__init__(daemon=True, name="approver")
        self.base_url, self.poll, self.dag_ids = base_url.rstrip("/"), poll, dag_ids
        #: an answer only once the request is awaiting input and at least this old: Airflow 3.3.2 stranded a
        #: fleet wave's approval in awaiting_input when it was answered 0.1 s after it was created (its trigger
        #: gone, the task never resumed); a person never answers that fast
        self.min_open_s = min_open_s
        self.answered: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.stop_flag = threading.Event()

    def _call(self, method: str, path: str, body: dict | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.base_url}/api/v2{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")

    def run(self) -> None:
        done: set[tuple] = set()
        while not self.stop_flag.is_set():
            try:
                for dag_id in self.dag_ids:
                    self._answer(dag_id, done)
            except (OSError, ValueError, KeyError) as exc:  # the api-server busy or restarting: poll again
                if not self.errors or self.errors[-1] != str(exc):
                    self.errors.append(f"{type(exc).__name__}: {exc}")
            self.stop_flag.wait(self.poll)

    def _answer(self, dag_id: str, done: set[tuple]) -> None:
        pending = self._call("GET", f"/dags/{dag_id}/dagRuns/~/hitlDetails?response_received=false")
        for detail in pending.get("hitl_details", []):
            ti = detail["task_instance"]
            key = (dag_id, ti["dag_run_id"], ti["task_id"], ti.get("map_index", -1), ti.get("try_number"))
            created = _parse_time(detail.get("created_at"))
            if key in done or ti.get("state") not in (None, "awaiting_input") or (
                    created is not None and time.time() - created < self.min_open_s):
                continue
            seen = time.time()
            answer = self._call("PATCH", f"/dags/{dag_id}/dagRuns/{ti['dag_run_id']}/taskInstances/"
                                f"{ti['task_id']}/{ti.get('map_index', -1)}/hitlDetails",
                                {"chosen_options": ["Approve"], "params_input": {}})
            done.add(key)
            self.answered.append({"dag_id": dag_id, "task_id": ti["task_id"], "subject": detail.get("subject"),
                                  "created_at": _parse_time(detail.get("created_at")), "seen_at": seen,
                                  "answered_at": time.time(),
                                  "responded_at": _parse_time((answer or {}).get("responded_at")),
                                  "by": ((answer or {}).get("responded_by") or {}).get("name")})

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(10)


WORKER_TITLE = b"airflow worker -- LocalExecutor:"


def busy_workers(parent_pid: int) -> int:
    """The LocalExecutor worker processes (children of ``parent_pid``, the dag.test() process) running a
    workload now: a worker's process title is ``airflow worker -- LocalExecutor: <idle>`` between workloads
    and names the workload while it supervises one (task process start-up and wind-down included)."""
    busy = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if int(stat[stat.rindex(")") + 2:].split()[1]) != parent_pid:
                continue
            title = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if title.startswith(WORKER_TITLE) and b"<idle>" not in title:
            busy += 1
    return busy


class Sampler(threading.Thread):
    """The run's task instances by state, read from the SQLite metadata DB every ``interval`` s, and the
    LocalExecutor's busy worker processes (``busy``) once ``parent_pid`` (the dag.test() process) is set."""

    def __init__(self, db: Path, interval: float = 0.3) -> None:
        super().__init__(daemon=True, name="sampler")
        self.db, self.interval = db, interval
        self.samples: list[dict[str, float]] = []
        self.misses = 0
        self.parent_pid: int | None = None
        self.stop_flag = threading.Event()

    def run(self) -> None:
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=1.0, check_same_thread=False)
        try:
            while not self.stop_flag.is_set():
                try:
                    rows = conn.execute("SELECT state, COUNT(*) FROM task_instance WHERE dag_id = ? GROUP BY state",
                                        (DAG_ID,)).fetchall()
                    counts = {str(s): int(n) for s, n in rows if s}
                    busy = busy_workers(self.parent_pid) if self.parent_pid else 0
                    self.samples.append({"t": time.time(), "busy": busy, **{s: counts.get(s, 0) for s in STATES}})
                except sqlite3.Error:  # busy while the run writes: a missed sample
                    self.misses += 1
                self.stop_flag.wait(self.interval)
        finally:
            conn.close()

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(10)


# -- the DAG run (a child process: dag.test() in its main thread) -----------------------------------------


def role_dag(args: argparse.Namespace) -> None:
    """dag.test(use_executor=True) of the fleet DAG; writes its result (state, times, task instances, the
    judges' WaveRecords, the report's return value) as JSON to ``--out``."""
    from kip848_harness.dagrun import load_dag
    from kip848_harness.hitl import prepare_in_main_thread

    prepare_in_main_thread()
    dag = load_dag(DAG_ID, REPO / "dags")
    conf = json.loads(Path(args.conf).read_text())
    t0 = time.time()
    run = dag.test(run_conf=conf, use_executor=True)
    t1 = time.time()

    from airflow.models import Log, TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    def ts(value: Any) -> float | None:
        return value.timestamp() if value is not None else None

    with create_session() as session:
        tis = [{"task_id": ti.task_id, "map_index": ti.map_index, "state": str(ti.state) if ti.state else None,
                "start": ts(ti.start_date), "end": ts(ti.end_date), "try_number": ti.try_number}
               for ti in session.query(TaskInstance).filter(TaskInstance.dag_id == DAG_ID,
                                                            TaskInstance.run_id == run.run_id)]
        mismatches = [str(r.extra)[:300] for r in session.query(Log).filter(
            Log.dag_id == DAG_ID, Log.run_id == run.run_id, Log.event == "state mismatch")]
        xcoms = {}
        for row in session.scalars(XComModel.get_many(run_id=run.run_id, dag_ids=DAG_ID, key="return_value")):
            if row.task_id.endswith(".judge") or row.task_id in ("report", "plan"):
                xcoms[row.task_id] = XComModel.deserialize_value(row)
    out = {"state": str(run.state), "run_id": run.run_id, "t0": t0, "t1": t1, "tis": tis,
           "judges": {k: v for k, v in xcoms.items() if k.endswith(".judge")},
           "report": xcoms.get("report"), "state_mismatches": mismatches, "waves_planned": len(((xcoms.get("plan") or {}).get("plan") or {})
                                                              .get("waves") or [])}
    Path(args.out).write_text(json.dumps(out, default=str))


def role_single(args: argparse.Namespace) -> None:
    """dag.test(use_executor=True) of the single-group offline DAG on ``solo-app``; writes its state, task
    instances and the stop and migrated results (their ``stop_started_at`` and ``met_at``) to ``--out``."""
    from kip848_harness.dagrun import load_dag
    from kip848_harness.hitl import prepare_in_main_thread

    prepare_in_main_thread()
    dag = load_dag(SINGLE_DAG_ID, REPO / "dags")
    conf = json.loads(Path(args.conf).read_text())
    t0 = time.time()
    run = dag.test(run_conf=conf, use_executor=True)
    t1 = time.time()

    from airflow.models import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = {ti.task_id: {"state": str(ti.state) if ti.state else None, "try_number": ti.try_number,
                            "start": ti.start_date.timestamp() if ti.start_date else None,
                            "end": ti.end_date.timestamp() if ti.end_date else None}
               for ti in session.query(TaskInstance).filter(TaskInstance.dag_id == SINGLE_DAG_ID,
                                                            TaskInstance.run_id == run.run_id)}
        xcoms = {row.task_id: XComModel.deserialize_value(row) for row in session.scalars(
            XComModel.get_many(run_id=run.run_id, dag_ids=SINGLE_DAG_ID, key="return_value"))
            if row.task_id in ("stop_application", "wait_empty", "start_application", "wait_migrated", "report")}
    Path(args.out).write_text(json.dumps({"state": str(run.state), "t0": t0, "t1": t1, "tis": tis, "xcoms": xcoms},
                                         default=str))


def single_conf(home: Path) -> dict[str, Any]:
    """The single-group DAG's conf: the fleet's timings (poll 0.5 s, settle 2 s, members forced out after 2 s),
    no Spark validation (after the gap, and the fleet's runs validate in the wave's job)."""
    return {"group_id": f"{SOLO}-g0", "target_protocol": "consumer", "app_controller": SOLO, "expected_instances": 1,
            "remove_members_after": 2, "empty_settle_seconds": 2, "empty_timeout_minutes": 5,
            "start_timeout_minutes": 5, "poll_seconds": 0.5, "validate_with_spark": False, **open_window()}


def single_gap(single: dict[str, Any]) -> float | None:
    """The single-group DAG's processing gap: its stop task issuing the stop -> its migrated wait seeing the
    group migrated (the trigger's moment, before the task is resumed), as the fleet's gap is measured."""
    stop, migrated = (single.get("xcoms") or {}).get("stop_application"), (single.get("xcoms") or {}).get(
        "wait_migrated")
    if not stop or not migrated or stop.get("stop_started_at") is None or migrated.get("met_at") is None:
        return None
    return float(migrated["met_at"]) - float(stop["stop_started_at"])


# -- figures ------------------------------------------------------------------------------------------------


def integrate(samples: list[dict[str, float]], key: Any, start: float, end: float) -> float:
    """The integral of ``key(sample)`` over [start, end] (a sample holds until the next one)."""
    total = 0.0
    for a, b in zip(samples, samples[1:], strict=False):
        lo, hi = max(a["t"], start), min(b["t"], end)
        if hi > lo:
            total += key(a) * (hi - lo)
    return total


def in_windows(samples: list[dict[str, float]], windows: list[tuple[float, float]]) -> list[dict[str, float]]:
    return [s for s in samples if any(lo <= s["t"] <= hi for lo, hi in windows)]


def slot_figures(samples: list[dict[str, float]], windows: list[tuple[float, float]]) -> dict[str, float]:
    inside = in_windows(samples, windows)

    def integral(key: Any) -> float:
        return sum(integrate(samples, key, lo, hi) for lo, hi in windows)

    length = sum(hi - lo for lo, hi in windows)
    out: dict[str, float] = {"seconds": length, "samples": len(inside)}
    for state in ("busy", "running", "deferred", "queued", "scheduled", "awaiting_input"):
        out[f"max_{state}"] = max((s.get(state, 0) for s in inside), default=0)
        out[f"int_{state}"] = integral(lambda s, state=state: s.get(state, 0))
        out[f"mean_{state}"] = out[f"int_{state}"] / length if length else 0.0
    return out


def _fmt(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f} s"


def figures(args: argparse.Namespace, fleet: Fleet, measured: dict[str, Any]) -> None:
    """Print what one run measured (``measured``: the run's result, approvals, DB samples, cluster after)."""
    from airflow_provider_kip848.fleet.results import WaveRecord

    result, answered, samples = measured["result"], measured["answered"], measured["samples"]
    misses, after, setup = measured["misses"], measured["after"], measured["setup"]
    tis = {(t["task_id"], t["map_index"]): t for t in result["tis"]}

    def ti(task_id: str) -> dict[str, Any]:
        return tis.get((task_id, -1)) or {}

    approvals = {a["task_id"]: a for a in answered if a.get("dag_id", DAG_ID) == DAG_ID}
    records = {int(k.split(".")[0].split("_")[1]): WaveRecord.from_dict(v) for k, v in result["judges"].items() if v}
    total = result["t1"] - result["t0"]
    n_groups = len(fleet.groups)
    offline = sum(1 for a in fleet.apps.values() if a["path"] == "offline")
    print()
    print(f"Fleet run: {len(fleet.apps)} applications x {args.groups_per_app} groups = {n_groups} groups "
          f"({offline} applications offline, {len(fleet.apps) - offline} online), {args.instances} "
          f"instance(s) per group = {len(fleet.apps) * args.groups_per_app * args.instances} consumer processes, "
          f"{args.records} records per topic (2 partitions), 3-node KRaft cluster")
    print(f"  setup: cluster {setup['cluster']:.1f} s; fleet started on classic and caught up in "
          f"{setup['fleet']:.1f} s; Airflow (db migrate, api-server, triggerer) {setup['airflow']:.1f} s")
    print(f"  dag.test(use_executor=True): LocalExecutor {args.slots} worker slots, api-server --apps all, "
          f"airflow triggerer, SQLite; canary 2, wave_size 10, max_groups_per_wave 20, poll 0.5 s, settle 2 s, "
          f"remove_members_after 2 s; KIP848_FLEET_PARALLELISM {args.parallelism}")
    outcome = (result.get("report") or {}).get("outcome") or result.get("outcome")
    approval_total = 0.0
    rows = []
    windows = []
    for number in sorted(records):
        rec = records[number]
        prefix = f"wave_{number}"
        opened, judged = ti(f"{prefix}.open"), ti(f"{prefix}.judge")
        appr = approvals.get(f"{prefix}.approval") or {}
        start, end = opened.get("start"), judged.get("end")
        wave_s = end - start if start and end else None
        answered_at = appr.get("responded_at") or appr.get("answered_at")
        waited = answered_at - appr["created_at"] if answered_at and appr.get("created_at") else None
        approval_total += waited or 0.0
        results = rec.results
        durations = [r.duration_s for r in results if r.duration_s is not None]
        gaps = [r.gap_s for r in results if r.gap_s is not None]
        resumes = sum((measured.get("moves") or {}).get(f"{r.app}:{r.kind}", {}).get("deferrals", 0) for r in results)
        back = [t for (tid, _), t in tis.items() if tid == f"{prefix}.rollback" and t.get("state") != "skipped"]
        if start and end:
            windows.append((start, end))
        slots = slot_figures(samples, [(start, end)]) if start and end else {}
        rows.append((number, rec, wave_s, waited, durations, gaps, resumes, back, slots, ti(f"{prefix}.approval")))
    mismatches = result.get("state_mismatches") or []
    retried = sorted(f"{t['task_id']}[{t['map_index']}] try {t['try_number']}" for t in result["tis"]
                     if (t.get("try_number") or 0) > 1)
    taken_up = measured.get("taken_up") or []
    print(f"  Airflow LocalExecutor as released; task instances failed as 'state mismatch' (killed externally): "
          f"{len(mismatches)}; task instances that ran more than one try: {len(retried)}"
          + (f" ({', '.join(retried[:10])})" if retried else "")
          + f"; moves taken up again at their recorded step: {len(taken_up)}"
          + (f" ({', '.join(taken_up[:10])})" if taken_up else ""))
    print(f"  run {result['state'].rsplit('.', 1)[-1]} (report outcome: {outcome}); total wall time "
          f"{total:.1f} s (dag.test() start to end), {total - approval_total:.1f} s without the "
          f"{approval_total:.1f} s the approval requests were open; {len(records)} of "
          f"{result['waves_planned']} planned wave(s) ran")
    first_open = min((ti(f"wave_{n}.open").get("start") or math.inf for n in records), default=None)
    last_judge = max((ti(f"wave_{n}.judge").get("end") or 0 for n in records), default=None)
    if first_open and last_judge and first_open != math.inf:
        print(f"  before the first wave (window guard, lock, inventory and plan) {first_open - result['t0']:.1f} s; "
              f"after the last wave's judge (the way back if any, report) {result['t1'] - last_judge:.1f} s")
    print()
    print("  wave  apps(off/on)  groups  open->judge  approval open  without approval  apps' own: sum / span / "
          "max   migrated  failed  deferrals  max gap   busy slots max/mean  running max/mean  deferred max/mean")
    for number, rec, wave_s, waited, durations, gaps, resumes, back, slots, _appr_ti in rows:
        results = rec.results
        off = sum(1 for a in rec.apps if fleet.apps.get(a, {}).get("path") == "offline")
        ok_apps = sum(1 for r in results if r.ok)
        ok_groups = sum(1 for r in results for g in r.groups if g.ok)
        all_groups = len(rec.group_ids)
        span = rec.duration_s
        print(f"  {number:>4}{'c' if rec.canary else ' '} {len(rec.apps):>4} ({off}/{len(rec.apps) - off})"
              f"{all_groups:>9}  {_fmt(wave_s):>11}  {_fmt(waited):>13}  "
              f"{_fmt(wave_s - waited if wave_s is not None and waited is not None else None):>16}  "
              f"{sum(durations):>8.1f} / {_fmt(span)} / {_fmt(max(durations) if durations else None)}"
              f"  {ok_apps:>3} apps/{ok_groups:>3} gr  {len(rec.apps) - ok_apps:>2}/{all_groups - ok_groups:<2}"
              f"  {resumes:>9}  {_fmt(max(gaps) if gaps else None):>8}"
              f"   {slots.get('max_busy', 0):>3.0f} / {slots.get('mean_busy', 0):4.2f}        "
              f"   {slots.get('max_running', 0):>3.0f} / {slots.get('mean_running', 0):4.2f}"
              f"       {slots.get('max_deferred', 0):>3.0f} / {slots.get('mean_deferred', 0):5.2f}"
              + (f"   rollback: {len(back)} task(s)" if back else ""))
    every = [r for rec in records.values() for r in rec.results]
    migrated_apps = [r for r in every if r.ok]
    # failed: a result that is not ok, or an application of a wave that ran without a result (its task died)
    failed = {r.app: r.detail[:160] for r in every if not r.ok}
    for rec in records.values():
        for app in rec.apps:
            if app not in {r.app for r in rec.results}:
                failed[app] = "no result (its task instance ended without recording one)"
    groups_ok = sum(1 for r in every for g in r.groups if g.ok)
    groups_all = sum(len(rec.group_ids) for rec in records.values())
    print()
    print(f"  applications migrated {len(migrated_apps)} of {len(fleet.apps)} "
          f"({sum(1 for r in migrated_apps if r.path == 'offline')} offline, "
          f"{sum(1 for r in migrated_apps if r.path == 'online')} online), failed {len(failed)}"
          + (f" ({'; '.join(f'{a}: {d}' for a, d in sorted(failed.items()))})" if failed else "")
          + f"; groups migrated {groups_ok} of {n_groups}, failed {groups_all - groups_ok}"
          + (f"; not run {len(fleet.apps) - len(migrated_apps) - len(failed)} application(s)"
             if len(migrated_apps) + len(failed) < len(fleet.apps) else ""))
    gaps = sorted(((r.gap_s, r.app) for r in every if r.gap_s is not None), reverse=True)
    if gaps:
        print(f"  processing gap (offline applications, stop -> every group back with its members on the new "
              f"protocol): longest {gaps[0][0]:.1f} s ({gaps[0][1]}), median {statistics.median(g for g, _ in gaps):.1f} s "
              f"over {len(gaps)} applications")
    single = measured.get("single")
    if single is not None:
        gap = single_gap(single)
        tries = {k: v.get("try_number") for k, v in (single.get("tis") or {}).items() if (v.get("try_number") or 0) > 1}
        print(f"  single-group DAG {SINGLE_DAG_ID} on {SOLO} (1 group, the same controller kind, after the fleet, "
              f"same Airflow): run {str(single.get('state')).rsplit('.', 1)[-1]}, processing gap "
              f"{_fmt(gap)} (stop_application's stop -> wait_migrated's trigger saw the group migrated)"
              + (f"; retried: {tries}" if tries else ""))
        if gap and gaps:
            median = statistics.median(g for g, _ in gaps)
            print(f"  RATIO fleet offline median gap / single-group DAG gap: {median:.1f} / {gap:.1f} s = "
                  f"{median / gap:.2f}x (target <= 1.3x)")
    elif measured.get("single_error"):
        print(f"  single-group DAG: did not run ({measured['single_error']})")
    print("  waves: moves' span (first application's lock -> last one's end) and open -> judge (less the approval), "
          "each over its slowest application (target <= 1.2x):")
    for number, rec, wave_s, waited, durations_w, _gaps, _r, _b, _slots, _a in rows:
        slowest = max(durations_w) if durations_w else None
        if not slowest:
            continue
        wall = wave_s - (waited or 0.0) if wave_s is not None else None
        spans = {}
        for task in ("recheck", "to_validate", "validate", "judge"):
            t = ti(f"wave_{number}.{task}")
            spans[task] = t["end"] - t["start"] if t.get("start") and t.get("end") else None
        print(f"    wave {number}: slowest application {slowest:.1f} s; span {_fmt(rec.duration_s)} = "
              f"{(rec.duration_s or 0) / slowest:.2f}x; open -> judge without the approval {_fmt(wall)} = "
              f"{(wall or 0) / slowest:.2f}x (it also holds " + ", ".join(f"{k} {_fmt(v)}" for k, v in spans.items())
              + ")")
    durations = [r.duration_s for r in every if r.duration_s is not None]
    for path in ("offline", "online"):
        d = [r.duration_s for r in every if r.path == path and r.duration_s is not None]
        if d:
            print(f"  {path} application, own duration (lock -> compare): median {statistics.median(d):.1f} s, "
                  f"max {max(d):.1f} s over {len(d)}")
    step_time: dict[str, list[float]] = {}
    for r in every:
        for s in r.steps:
            if s.duration_s is not None:
                step_time.setdefault(s.step, []).append(s.duration_s)
    print("  steps, median s (count): " + ", ".join(
        f"{k} {statistics.median(v):.1f} ({len(v)})" for k, v in step_time.items()))
    waits = sum(1 for r in every for s in r.steps if s.step in WAITS)
    resumes = sum(m.get("deferrals", 0) for k, m in (measured.get("moves") or {}).items() if k.endswith(":migrate"))
    print(f"  group waits (one record per group and condition): {waits}; deferrals of the moves to the triggerer "
          f"(each resumed in a worker slot, the moves' records): {resumes}; sum of the applications' own durations "
          f"{sum(durations):.0f} s")
    if samples and windows:
        w = slot_figures(samples, windows)
        run_all = slot_figures(samples, [(result["t0"], result["t1"])])
        print()
        print(f"  worker slots while the waves ran ({w['seconds']:.0f} s, {w['samples']:.0f} samples every 0.3 s, "
              f"{misses} missed), task instances of the run by state in the metadata DB and the LocalExecutor's busy "
              f"worker processes:")
        print(f"    worker slots busy (a worker process supervising a task: start-up, code, wind-down): max "
              f"{w['max_busy']:.0f} of {args.slots}, mean {w['mean_busy']:.2f}")
        print(f"    running (the task's code in a slot): max {w['max_running']:.0f}, mean {w['mean_running']:.2f}; "
              f"deferred (waiting in the triggerer, no slot): max {w['max_deferred']:.0f}, mean "
              f"{w['mean_deferred']:.2f}; queued (task process starting, or waiting for a free slot): max "
              f"{w['max_queued']:.0f}, mean {w['mean_queued']:.2f}; awaiting_input (approval open): "
              f"{w['int_awaiting_input']:.0f} task-s")
        held, busy, deferred = w["int_running"], w["int_busy"], w["int_deferred"]
        print(f"    slot-seconds: running {held:.0f} (busy worker slots {busy:.0f}); poking waits would also hold a "
              f"slot for every deferred second: running + deferred = {held + deferred:.0f}, "
              f"{(held + deferred) / held if held else math.inf:.1f}x (busy + deferred = {busy + deferred:.0f}, "
              f"{(busy + deferred) / busy if busy else math.inf:.1f}x)")
        print(f"    whole run ({run_all['seconds']:.0f} s): running {run_all['int_running']:.0f}, busy slots "
              f"{run_all['int_busy']:.0f}, deferred {run_all['int_deferred']:.0f}, queued {run_all['int_queued']:.0f}, "
              f"awaiting_input {run_all['int_awaiting_input']:.0f} task-seconds; max running "
              f"{run_all['max_running']:.0f}, max busy {run_all['max_busy']:.0f}, max deferred "
              f"{run_all['max_deferred']:.0f}")
    print()
    print(f"  after the run, from the cluster: groups by type {after['types']}; live members by protocol "
          f"{after['live_member_protocols']}")
    for a in answered:
        print(f"  approval {a['task_id']}: open {(a['responded_at'] or a['answered_at']) - a['created_at']:.1f} s "
              f"(seen {a['seen_at'] - a['created_at']:.1f} s after it was created), answered by {a['by']}")


# -- the parent -------------------------------------------------------------------------------------------


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def planned_waves(apps: int, groups_per_app: int) -> int:
    """The waves plan_waves makes of ``apps`` equal applications (canary 2, wave_size 10, 20 groups per wave)."""
    per_wave = max(1, min(10, 20 // groups_per_app))
    canary = min(2, per_wave, apps)
    return (1 if canary else 0) + math.ceil((apps - canary) / per_wave)


def run_conf(home: Path) -> dict[str, Any]:
    return {"prefixes": ["fleet-app-"], "canary": 2, "wave_size": 10, "max_groups_per_wave": 20,
            "max_failed_apps": 0, "remove_members_after": 2, "empty_settle_seconds": 2, "empty_timeout_minutes": 5,
            "start_timeout_minutes": 5, "poll_seconds": 0.5, **open_window()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--apps", type=int, default=30)
    parser.add_argument("--groups-per-app", type=int, default=2)
    parser.add_argument("--instances", type=int, default=1, help="consumer processes per group")
    parser.add_argument("--records", type=int, default=300, help="records per topic")
    parser.add_argument("--slots", type=int, default=None,
                        help="LocalExecutor worker slots (core.parallelism); default --parallelism + 2")
    parser.add_argument("--parallelism", type=int, default=10, help="KIP848_FLEET_PARALLELISM")
    parser.add_argument("--timeout", type=float, default=3600, help="give up on the DAG run after (s)")
    parser.add_argument("--version", default=None, help="Kafka version (default: the project's)")
    parser.add_argument("--small", action="store_true", help="quick check: 6 applications, 100 records")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, DB)")
    parser.add_argument("--no-single", action="store_true",
                        help="do not run the single-group DAG on solo-app after the fleet (no gap ratio)")
    parser.add_argument("--figures-from", default=None, metavar="DIR",
                        help="print the figures of a run kept with --keep again (its measured.json)")
    parser.add_argument("--role", default="main", help=argparse.SUPPRESS)
    parser.add_argument("--conf", default="", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.slots is None:
        args.slots = args.parallelism + 2
    if args.role == "dag":
        return role_dag(args)
    if args.role == "single":
        return role_single(args)
    if args.figures_from:  # print a kept run's figures again
        measured = json.loads((Path(args.figures_from) / "measured.json").read_text())
        args = argparse.Namespace(**{**measured["args"], "figures_from": args.figures_from})
        return figures(args, Fleet(args.apps, args.groups_per_app, args.instances, "", "", solo=not args.no_single),
                       measured)
    if args.small:
        args.apps, args.records = 6, 100
    if not os.environ.get("KIP848_CACHE_DIR"):
        sys.exit("set KIP848_CACHE_DIR (the Kafka distribution's cache, e.g. $PWD/.cache)")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGINT too: a background job starts ignoring it
        signal.signal(sig, _interrupt)

    from airflow_provider_kip848.kafka.cli.distribution import DEFAULT_KAFKA_VERSION
    from kip848_harness.kafka_cluster import LocalKafka

    home = Path(tempfile.mkdtemp(prefix="kip848-fleet-run-"))
    print(f"working directory: {home}", flush=True)
    cluster = LocalKafka(home / "kafka", version=args.version or DEFAULT_KAFKA_VERSION, nodes=3, heap="384m",
                         die_with_parent=True)
    fleet: Fleet | None = None
    services: AirflowServices | None = None
    child: subprocess.Popen | None = None
    approver: Approver | None = None
    sampler: Sampler | None = None
    ok = False
    setup: dict[str, float] = {}
    try:
        t = time.monotonic()
        print(f"cluster: {cluster.start().summary()}", flush=True)
        setup["cluster"] = time.monotonic() - t
        bootstrap = cluster.bootstrap_servers
        fleet = Fleet(args.apps, args.groups_per_app, args.instances, str(home / "apps"), bootstrap,
                      solo=not args.no_single)
        # the deployment's controller registry ([kip848] controllers), in the working directory: activated here,
        # so the environment of every Airflow process below (built from this one's) names it
        from kip848_harness.registry import RegistryFile

        fleet.register(RegistryFile(home / "controllers.json").activate())
        setup["fleet"] = start_fleet(fleet, bootstrap, args.records)
        print(f"fleet: {len(fleet.apps)} applications, {len(fleet.groups)} classic groups Stable and caught up, "
              f"{len(fleet.running_pids())} consumer processes, in {setup['fleet']:.1f} s", flush=True)

        t = time.monotonic()
        af_home = home / "airflow"
        af_home.mkdir()
        port = free_port()
        waves = planned_waves(args.apps, args.groups_per_app)
        env = {**os.environ, **airflow_env(str(af_home), bootstrap, dags_folder=str(REPO / "dags")),
               **executor_env(port, args.slots, secret="bench-fleet-run-not-a-secret"),
               "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
               "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
               "AIRFLOW_VAR_KIP848_OWNERSHIP_MAP": fleet.ownership_yaml(),
               "KIP848_FLEET_MAX_WAVES": str(waves),  # exactly the plan's waves: no empty wave slot to skip
               "KIP848_FLEET_PARALLELISM": str(args.parallelism),
               "KIP848_ARTIFACTS_URL": str(home / "artifacts")}
        db_migrate(env)
        services = AirflowServices(af_home, port, apps="all", env=env).start()
        setup["airflow"] = time.monotonic() - t
        print(f"airflow: api-server (all apps) on port {port}, triggerer, LocalExecutor {args.slots} slots, in "
              f"{setup['airflow']:.1f} s", flush=True)

        conf_file, out_file = home / "conf.json", home / "dag_result.json"
        conf_file.write_text(json.dumps(run_conf(home)))
        approver = Approver(f"http://127.0.0.1:{port}")
        sampler = Sampler(af_home / "airflow.db")
        approver.start()
        sampler.start()
        log = open(home / "dag.log", "w")
        try:
            child = subprocess.Popen([sys.executable, str(HERE), "--role", "dag", f"--conf={conf_file}",
                                      f"--out={out_file}"], stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        finally:
            log.close()
        sampler.parent_pid = child.pid
        print(f"DAG run started (log {home / 'dag.log'}) ...", flush=True)
        deadline = time.monotonic() + args.timeout
        reported = 0
        while child.poll() is None:
            services.check()
            if time.monotonic() > deadline:
                raise TimeoutError(f"the DAG run did not end within {args.timeout:.0f} s")
            for a in approver.answered[reported:]:
                print(f"  approved {a['task_id']} ({a['subject']})", flush=True)
            reported = len(approver.answered)
            time.sleep(1)
        if child.returncode or not out_file.exists():
            raise RuntimeError(f"the dag.test() process exited with {child.returncode} (see {home / 'dag.log'})")
        sampler.stop()
        result = json.loads(out_file.read_text())
        taken_up, moves = [], {}
        for record in sorted(home.rglob("move-*.json")):
            moved = json.loads(record.read_text())
            moves[f"{moved['app']}:{moved['kind']}"] = {"attempts": moved.get("attempts", 1),
                                                        "deferrals": moved.get("deferrals", 0)}
            if moved.get("attempts", 1) > 1:
                taken_up.append(f"{moved['app']} {moved['kind']} (task processes: {moved['attempts']})")
        single, single_error = None, None
        if not args.no_single:  # the single-group DAG on solo-app, in the same Airflow, once the fleet is done
            single_file = home / "single_result.json"
            (home / "single_conf.json").write_text(json.dumps(single_conf(home)))
            with open(home / "single.log", "w") as single_log:
                child = subprocess.Popen([sys.executable, str(HERE), "--role", "single",
                                          f"--conf={home / 'single_conf.json'}", f"--out={single_file}"],
                                         stdout=single_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True)
            print(f"single-group DAG on {SOLO} started (log {home / 'single.log'}) ...", flush=True)
            while child.poll() is None:
                services.check()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the runs did not end within {args.timeout:.0f} s")
                time.sleep(1)
            if child.returncode == 0 and single_file.exists():
                single = json.loads(single_file.read_text())
            else:
                single_error = f"exit {child.returncode} (see {home / 'single.log'})"
        approver.stop()
        reports = sorted((home / "artifacts").glob(f"{DAG_ID}/*/report/report.json"))
        if reports:  # the report task writes it before it fails a stopped run (no XCom then)
            result["outcome"] = json.loads(reports[-1].read_text()).get("outcome")
        measured = {"args": vars(args), "result": result, "answered": approver.answered,
                    "samples": sampler.samples, "misses": sampler.misses, "after": groups_after(bootstrap, fleet),
                    "setup": setup, "taken_up": taken_up, "moves": moves, "single": single,
                    "single_error": single_error}
        (home / "measured.json").write_text(json.dumps(measured))
        figures(args, fleet, measured)
        if approver.errors:
            print(f"  (approver: transient REST errors seen: {approver.errors[:3]})")
        ok = True
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # a second signal must not cut the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        for thread in (approver, sampler):
            if thread is not None:
                thread.stop()
        killed = 0
        if child is not None and child.poll() is None:
            # first, so nothing starts an application again: the run's executor workers, task processes and
            # the consumers the tasks started (they live in its session) are killed with it
            killed += stop_session(child)
        if services is not None:
            services.stop()
        stopped = fleet.stop_all() if fleet is not None else 0
        if child is not None:
            killed += stop_session(child)  # whatever of its session is left (consumers the tasks started)
        cluster.stop(timeout=20)
        print(f"cleaned up: {stopped} consumer process(es) stopped, {killed} process(es) of the DAG run's session "
              "killed, Airflow, the 3 nodes", flush=True)
        if ok and not args.keep:
            import shutil

            shutil.rmtree(home, ignore_errors=True)
        else:
            print(f"kept {home}", flush=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt as exc:
        sys.exit(f"interrupted ({exc or 'Ctrl-C'}): every process was stopped")
