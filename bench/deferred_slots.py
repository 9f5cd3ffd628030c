"""Worker slots held by N concurrent migrations waiting on the provider's sensors: deferrable vs poke.

N (default 20) migrations each wait with KafkaGroupMigratedSensor (type consumer,
no classic member left, each member proven alive) on their own real group. The
groups start as classic groups with one live classic member each (a "fleet"
process holding real confluent-kafka consumers); at go + base + i*step seconds
the fleet rolls group i to the consumer protocol (a group.protocol=consumer
member joins, the classic one leaves), so the waits are staggered and end on
their own.

The wait is the DAGs' own, with its liveness rule: a member counts once a
committed offset of its partitions advanced, or once it stayed listed for the
group's session timeout + heartbeat interval + 1 s (read from the broker when
the sensor starts and again when it resumes: a few admin requests inside the
worker-slot time). The fleet's consumer-protocol members read and commit
nothing, so each wait ends one such window after the sensor first saw the new
member (7.5 s on the fast-tuned local broker: 6000 + 500 ms + 1 s), at its next
poll: "fire after its group migrated" includes that window on both sides, and
the poke side holds its slot through it. No application controller is named:
the fleet's consumers are no application of a deployment's registry, so there
is nothing to register, and the wait rests on the broker alone (no platform
status is asked for, as in a DAG run without a controller).

Two sides run at the same time, each in its own process, each over its own N
groups rolled on the same schedule:

  * deferrable: every sensor's execute() is called (it raises TaskDeferred, as
    in a worker), its KafkaGroupConditionTrigger is serialised and rebuilt (as
    the triggerer does) and all N triggers run concurrently in ONE asyncio event
    loop (as Airflow's triggerer runs them); when a trigger fires, the sensor's
    execute_complete() is called with the event (as the resumed task does).
    Worker-slot time = execute() until TaskDeferred + execute_complete()
    (each reads the liveness window from the broker).
  * poke: every sensor's execute() in poke mode runs in its own thread, one
    thread standing for one worker slot held for the whole wait. (In a real
    deployment each slot is a task process, ~100+ MB each; threads here are a
    lower bound on the poke side's memory.)

Printed: slots held while waiting (sampled: sensors inside execute()), worker
slot-seconds, time until all N fire and each fire's delay after its group
migrated, OS threads / Python threads / RSS / child processes of each side
(sampled by the parent every 0.5 s), and the ratio of slot-seconds last.

Then (unless --no-dag or --small) a tiny DAG of N mapped deferrable sensors on N
more groups, run with dag.test(use_executor=True): a LocalExecutor with --slots
(default 4) worker processes, an `airflow api-server --apps execution` for the
task processes and a real `airflow triggerer`, all on a temporary AIRFLOW_HOME
with a SQLite metadata DB. A thread samples the DB every 0.3 s for task
instances by state: how many are deferred at once, how many run in a slot.
(Plain dag.test() without an executor is no triggerer: it runs each deferred
trigger inline, one task at a time, and the task instance shows as queued while
it waits, never as deferred.)

Usage: KIP848_CACHE_DIR=$PWD/.cache .venv/bin/python bench/deferred_slots.py [--n 20] [--base 20] [--step 1] [--poll 5]
       [--slots 4] [--dag-base 60] [--no-dag] [--small]
(--small: n=5, base 8 s, no DAG run.) The machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _airflow_local import CONN_ID, AirflowServices, airflow_env, db_migrate, executor_env, free_port

HERE = Path(__file__).resolve()
TOPIC = "slots-topic"


def read_go() -> float:
    """Block until the parent's "go" (an epoch time), then until that time."""
    go = float(sys.stdin.readline().strip())
    time.sleep(max(0.0, go - time.time()))
    return go


# -- the fleet: the applications being migrated ----------------------------------------------------


def role_fleet(args) -> None:
    """Hold one classic member per group; roll group i to the consumer protocol at go + delay_i."""
    from confluent_kafka import Consumer

    groups = args.groups.split(",")
    delays = [float(d) for d in args.delays.split(",")]
    stop = threading.Event()
    migrated: dict[str, float] = {}
    ready: dict[str, bool] = {}
    go: list[float] = []
    go_set = threading.Event()

    def conf(group: str, protocol: str) -> dict:
        c = {"bootstrap.servers": args.bootstrap, "group.id": group, "group.protocol": protocol,
             "enable.auto.commit": False, "auto.offset.reset": "latest", "client.id": f"{group}-{protocol}"}
        if protocol == "classic":
            c["session.timeout.ms"] = 10000
        return c

    def member(group: str, delay: float) -> None:
        old = Consumer(conf(group, "classic"))
        old.subscribe([TOPIC])
        while not old.assignment() and not stop.is_set():
            old.poll(0.1)
        ready[group] = True
        while not stop.is_set() and not (go_set.is_set() and time.time() >= go[0] + delay):
            old.poll(0.2)
        if stop.is_set():
            old.close()
            return
        new = Consumer(conf(group, "consumer"))
        new.subscribe([TOPIC])
        until = time.time() + 1.0
        while time.time() < until:
            old.poll(0.05)
            new.poll(0.05)
        old.close()  # the classic member leaves: the group is now migrated
        migrated[group] = time.time()
        while not stop.is_set():
            new.poll(0.2)
        new.close()

    threads = [threading.Thread(target=member, args=(g, d), daemon=True) for g, d in zip(groups, delays, strict=False)]
    for t in threads:
        t.start()
    while len(ready) < len(groups):
        time.sleep(0.1)
    print("ready", flush=True)
    go.append(read_go())
    go_set.set()
    sys.stdin.readline()  # "stop"
    stop.set()
    for t in threads:
        t.join(30)
    print(json.dumps({"migrated": migrated}), flush=True)


# -- the two waiting sides ----------------------------------------------------------------------------


class _TI:
    def xcom_push(self, key, value):  # noqa: D401 - what operators call outside a DAG run
        pass


def role_side(args) -> None:
    import asyncio

    import psutil
    from airflow.sdk.exceptions import TaskDeferred

    from airflow_provider_kip848.sensors.group import KafkaGroupMigratedSensor

    groups = args.groups.split(",")
    deferrable = args.role == "deferrable"
    sensors = [KafkaGroupMigratedSensor(task_id=f"wait_{i}", group_id=g, expected_members=1, deferrable=deferrable,
                                        poll_interval=args.poll, timeout=900, kafka_conn_id=CONN_ID)
               for i, g in enumerate(groups)]
    context = {"ti": _TI()}
    in_worker = [0]  # sensors currently inside execute()/execute_complete(): worker slots in use
    lock = threading.Lock()
    samples: list[dict] = []
    me = psutil.Process()
    done = threading.Event()

    def sampler() -> None:
        while not done.is_set():
            samples.append({"t": time.time(), "py_threads": threading.active_count(), "os_threads": me.num_threads(),
                            "rss_mb": me.memory_info().rss / 2**20, "children": len(me.children(recursive=True)),
                            "in_worker": in_worker[0]})
            time.sleep(0.5)

    print("ready", flush=True)
    go = read_go()
    threading.Thread(target=sampler, daemon=True).start()
    slot_seconds: list[float] = []
    fired: dict[str, float] = {}
    results: dict[str, dict] = {}

    if deferrable:
        from airflow.sdk._shared.module_loading import import_string
        from airflow.sdk.serde import deserialize, serialize

        triggers = []
        for s in sensors:
            t0 = time.perf_counter()
            with lock:
                in_worker[0] += 1
            try:
                s.execute(context)
                raise RuntimeError("a deferrable sensor returned without deferring")
            except TaskDeferred as deferred:
                classpath, kwargs = deferred.trigger.serialize()
                triggers.append(import_string(classpath)(**deserialize(serialize(kwargs))))
            finally:
                with lock:
                    in_worker[0] -= 1
            slot_seconds.append(time.perf_counter() - t0)
        deferred_at = time.time()

        async def wait_one(sensor, trigger):
            async for event in trigger.run():
                fired[sensor.group_id] = time.time()
                return deserialize(serialize(event.payload))
            return None

        async def triggerer():
            return await asyncio.gather(*(wait_one(s, t) for s, t in zip(sensors, triggers, strict=False)))

        payloads = asyncio.run(triggerer())  # ONE event loop for all N triggers
        for s, payload in zip(sensors, payloads, strict=False):
            t0 = time.perf_counter()
            with lock:
                in_worker[0] += 1
            try:
                results[s.group_id] = s.execute_complete(context, event=payload)
            finally:
                with lock:
                    in_worker[0] -= 1
            slot_seconds[sensors.index(s)] += time.perf_counter() - t0
    else:
        deferred_at = None
        held = [0.0] * len(sensors)

        def run(i: int, s) -> None:
            t0 = time.perf_counter()
            with lock:
                in_worker[0] += 1
            try:
                results[s.group_id] = s.execute(context)
                fired[s.group_id] = time.time()
            finally:
                with lock:
                    in_worker[0] -= 1
                held[i] = time.perf_counter() - t0

        workers = [threading.Thread(target=run, args=(i, s)) for i, s in enumerate(sensors)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        slot_seconds = held
    done.set()
    time.sleep(0.6)
    print(json.dumps({"go": go, "deferred_at": deferred_at, "slot_seconds": slot_seconds, "fired": fired,
                      "modes": sorted({r.get("mode") for r in results.values()}),
                      "polls": [r.get("polls") for r in results.values()], "samples": samples}), flush=True)


# -- a tiny DAG of N mapped deferrable sensors, with a real triggerer ---------------------------------------

DAG_FILE = '''
import pendulum
from airflow.sdk import DAG
from airflow_provider_kip848.sensors.group import KafkaGroupMigratedSensor

with DAG(dag_id="bench_deferred_slots", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         catchup=False, max_active_tasks=64) as dag:
    KafkaGroupMigratedSensor.partial(task_id="wait", expected_members=1, deferrable=True, poll_interval={poll},
                                     timeout=900).expand(group_id={groups!r})
'''


def dag_env(home: str, port: int, slots: int) -> dict[str, str]:
    """LocalExecutor with ``slots`` worker processes, its tasks talking to our own execution API server."""
    return executor_env(port, slots, secret="bench-deferred-slots-not-a-secret")


def role_dag(args) -> None:
    """dag.test(use_executor=True): LocalExecutor slots + an api-server (execution API) + a real triggerer.

    A thread samples the metadata DB for task instances by state while it runs.
    """
    home = Path(os.environ["AIRFLOW_HOME"])
    db_migrate()
    groups = args.groups.split(",")
    dags = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    dags.mkdir(parents=True, exist_ok=True)
    (dags / "bench_deferred_slots.py").write_text(DAG_FILE.format(poll=args.poll, groups=groups))
    port = int(os.environ["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"].split(":")[2].split("/")[0])
    services = AirflowServices(home, port, apps="execution")
    try:
        services.start()
        sys.path.insert(0, str(dags))
        from airflow.models import TaskInstance
        from airflow.utils.session import create_session
        from airflow.utils.state import TaskInstanceState

        from kip848_harness.hitl import prepare_in_main_thread

        prepare_in_main_thread()
        import bench_deferred_slots as mod  # noqa: E402

        samples: list[dict] = []
        done = threading.Event()

        def sampler() -> None:
            while not done.is_set():
                try:
                    with create_session() as session:
                        rows = [r[0] for r in session.query(TaskInstance.state)
                                .filter(TaskInstance.dag_id == "bench_deferred_slots").all()]
                    samples.append({"t": time.time(), **{k: sum(r == v for r in rows) for k, v in
                                    (("deferred", TaskInstanceState.DEFERRED), ("running", TaskInstanceState.RUNNING), ("queued", TaskInstanceState.QUEUED),
                                     ("success", TaskInstanceState.SUCCESS), ("scheduled", TaskInstanceState.SCHEDULED))}})
                except Exception:  # noqa: BLE001 - SQLite busy while the run writes
                    pass
                time.sleep(0.3)

        print("ready", flush=True)
        go = read_go()
        threading.Thread(target=sampler, daemon=True).start()
        t0 = time.time()
        run = mod.dag.test(use_executor=True)
        elapsed = time.time() - t0
        done.set()
        time.sleep(0.5)
        print(json.dumps({"go": go, "state": str(run.state), "elapsed": elapsed, "samples": samples}), flush=True)
    finally:
        services.stop()


# -- the parent -------------------------------------------------------------------------------------------


def spawn(role: str, env: dict, **kw) -> subprocess.Popen:
    cmd = [sys.executable, str(HERE), "--role", role] + [f"--{k}={v}" for k, v in kw.items()]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                            stderr=open(Path(env["AIRFLOW_HOME"]) / f"{role}.err", "w"))


def expect(proc: subprocess.Popen, word: str, what: str) -> None:
    line = proc.stdout.readline()
    if line.strip() != word:
        raise RuntimeError(f"{what} did not start: {line!r} (see its .err file)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--base", type=float, default=20.0, help="seconds until the first group is migrated")
    parser.add_argument("--step", type=float, default=1.0, help="seconds between two groups' migrations")
    parser.add_argument("--poll", type=float, default=5.0, help="poll/poke interval of every sensor (its default)")
    parser.add_argument("--no-dag", action="store_true", help="skip the DAG part")
    parser.add_argument("--slots", type=int, default=4, help="DAG part: LocalExecutor worker slots (parallelism)")
    parser.add_argument("--dag-base", type=float, default=60.0,
                        help="DAG part: seconds until its first group is migrated (all tasks must defer first)")
    parser.add_argument("--small", action="store_true", help="quick smoke run: n=5, base 8 s, no DAG")
    parser.add_argument("--version", default="4.3.1")
    parser.add_argument("--role", default="main", help=argparse.SUPPRESS)
    parser.add_argument("--groups", default="", help=argparse.SUPPRESS)
    parser.add_argument("--delays", default="", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "fleet":
        return role_fleet(args)
    if args.role in ("deferrable", "poke"):
        return role_side(args)
    if args.role == "dag":
        return role_dag(args)
    if args.small:
        args.n, args.base, args.no_dag = 5, 8.0, True

    import psutil

    from kip848_harness.clients import create_topics
    from kip848_harness.kafka_cluster import LocalKafka

    n = args.n
    delays = [args.base + i * args.step for i in range(n)]
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix="kip848-slots-") as home:
        kafka = LocalKafka(f"{home}/kafka", version=args.version, die_with_parent=True)
        report = kafka.start()
        try:
            bs = kafka.bootstrap_servers
            print(f"broker: {report.summary()}")
            create_topics(bs, {TOPIC: 1})
            env = {**os.environ, **airflow_env(home, bs)}
            sides = {"deferrable": [f"slots-defer-{i:02d}" for i in range(n)],
                     "poke": [f"slots-poke-{i:02d}" for i in range(n)]}
            all_groups = sides["deferrable"] + sides["poke"]
            fleet = spawn("fleet", env, groups=",".join(all_groups), delays=",".join(map(str, delays + delays)),
                          bootstrap=bs)
            procs.append(fleet)
            workers = {name: spawn(name, env, groups=",".join(g), poll=args.poll) for name, g in sides.items()}
            procs += workers.values()
            t = time.perf_counter()
            expect(fleet, "ready", "the fleet")
            for name, p in workers.items():
                expect(p, "ready", f"the {name} side")
            print(f"{2 * n} classic groups with a live member each, both sides loaded, in {time.perf_counter() - t:.1f} s")

            go = time.time() + 1.0
            for p in (fleet, *workers.values()):
                p.stdin.write(f"{go}\n")
                p.stdin.flush()
            samples: dict[str, list[dict]] = {name: [] for name in workers}
            handles = {name: psutil.Process(p.pid) for name, p in workers.items()}
            while any(p.poll() is None for p in workers.values()):
                for name, h in handles.items():
                    try:
                        samples[name].append({"os_threads": h.num_threads(), "rss_mb": h.memory_info().rss / 2**20,
                                              "children": len(h.children(recursive=True))})
                    except psutil.Error:
                        pass
                time.sleep(0.5)
                if time.time() > go + max(delays) + 300:
                    raise TimeoutError("the sensors did not all finish within 300 s of the last migration")
            out = {name: json.loads(p.stdout.read().strip().splitlines()[-1]) for name, p in workers.items()}
            fleet.stdin.write("stop\n")
            fleet.stdin.flush()
            migrated = json.loads(fleet.stdout.read().strip().splitlines()[-1])["migrated"]
            fleet.wait(60)

            dag_out = None
            if not args.no_dag:
                port = free_port()
                dag_groups = [f"slots-dag-{i:02d}" for i in range(n)]
                dag_delays = [args.dag_base + i * args.step for i in range(n)]
                dag_fleet = spawn("fleet", env, groups=",".join(dag_groups), delays=",".join(map(str, dag_delays)),
                                  bootstrap=bs)
                dag_proc = spawn("dag", {**env, **dag_env(home, port, args.slots)}, groups=",".join(dag_groups),
                                 poll=args.poll)
                procs += [dag_fleet, dag_proc]
                expect(dag_fleet, "ready", "the DAG's fleet")
                expect(dag_proc, "ready", "the dag.test() process (db migrate, api-server, triggerer)")
                go2 = time.time() + 1.0
                for p in (dag_fleet, dag_proc):
                    p.stdin.write(f"{go2}\n")
                    p.stdin.flush()
                dag_out = json.loads(dag_proc.communicate(timeout=max(dag_delays) + 600)[0].strip().splitlines()[-1])
                dag_fleet.stdin.write("stop\n")
                dag_fleet.stdin.flush()
                dag_fleet.wait(60)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
            kafka.stop()

    med = statistics.median
    print(f"\n{n} migrations waiting (KafkaGroupMigratedSensor, poll {args.poll:g} s), groups rolled at "
          f"go+{delays[0]:g}..{delays[-1]:g} s; both sides at once on one broker")
    summary, held = {}, {}
    for name in ("poke", "deferrable"):
        o, s = out[name], samples[name]
        during = [x for x in o["samples"] if go + 2 < x["t"] < go + delays[0]]  # everyone is waiting
        fire_delay = [o["fired"][g] - migrated[g] for g in sides[name]]
        all_fired = max(o["fired"].values()) - go
        summary[name] = sum(o["slot_seconds"])
        held[name] = max((x["in_worker"] for x in during), default=0)
        print(f"  {name}:")
        print(f"    worker slots held while waiting: {held[name]} "
              f"(sampled max; {n} sensors); worker slot-seconds {sum(o['slot_seconds']):.2f} "
              f"(median per sensor {med(o['slot_seconds']):.3f} s)")
        print(f"    all {n} fired {all_fired:.1f} s after go; fire after its group migrated: median "
              f"{med(fire_delay):.1f} s, max {max(fire_delay):.1f} s; result mode {o['modes']}, "
              f"polls median {med(o['polls']):.0f}")
        print(f"    process: {1 + max(x['children'] for x in s)} process(es); OS threads max {max(x['os_threads'] for x in s)}"
              f" (Python threads max {max(x['py_threads'] for x in o['samples'])}); RSS max "
              f"{max(x['rss_mb'] for x in s):.0f} MB")
    if out["deferrable"]["deferred_at"]:
        print(f"  deferrable: all {n} sensors had deferred {out['deferrable']['deferred_at'] - go:.2f} s after go "
              f"(worker time per sensor, defer + resume: median "
              f"{med(out['deferrable']['slot_seconds']) * 1000:.1f} ms; the task process start-up a real worker adds "
              f"is counted in the DAG part)")
    if dag_out:
        ds = dag_out["samples"]
        peak = max(ds, key=lambda x: x["deferred"]) if ds else {}
        all_deferred = next((x["t"] - go2 for x in ds if x["deferred"] == n), None)
        print(f"  DAG of {n} mapped deferrable sensors, dag.test(use_executor=True): LocalExecutor with "
              f"{args.slots} worker slots, api-server (execution API) and a real `airflow triggerer`; groups rolled "
              f"at go+{dag_delays[0]:g}..{dag_delays[-1]:g} s:")
        busy = sum(a["running"] * (b["t"] - a["t"]) for a, b in zip(ds, ds[1:], strict=False))
        waiting = sum(a["deferred"] * (b["t"] - a["t"]) for a, b in zip(ds, ds[1:], strict=False))
        queued = sum(a["queued"] * (b["t"] - a["t"]) for a, b in zip(ds, ds[1:], strict=False))
        print(f"    run {dag_out['state']} in {dag_out['elapsed']:.0f} s; max task instances deferred at once: "
              f"{peak.get('deferred', 0)} of {n} (running at that moment: {peak.get('running', 0)}); max running at "
              f"any time: {max((x['running'] for x in ds), default=0)} (<= {args.slots} slots); "
              + (f"all {n} deferred {all_deferred:.0f} s after go" if all_deferred is not None else
                 "never all deferred at once"))
        print(f"    sampled every 0.3 s, task-seconds: running (in a worker slot) {busy:.0f}, queued (task process "
              f"starting, or waiting for a free slot) {queued:.0f}, deferred (waiting in the triggerer, no slot) "
              f"{waiting:.0f}")
    print(f"slots held while waiting: deferred={held['deferrable']} vs poke={held['poke']}; worker slot-seconds "
          f"poke {summary['poke']:.1f} vs deferrable {summary['deferrable']:.3f} (only the execute() calls that defer "
          f"and resume): ratio {summary['poke'] / summary['deferrable']:,.0f}x")


if __name__ == "__main__":
    main()
