"""The migration DAGs end to end with applications on Kubernetes: the ``kubernetes`` controller acting on real
Deployments of the session's control plane (tests/conftest.py ``kube``), whose pods are real consumers.

* kip848_consumer_offline_migration: the approval shows the workload and what each step does in Kubernetes'
  terms; stop records the replicas and scales to 0 (no pod left, the group emptied at once), start sets the env
  var and scales back, and the same group ends KIP-848 with the new pods as its members, nothing lost.
* The migrated wait's instance verdicts rest on Kubernetes: a new pod deleted by hand after the start, or new pods
  that crash seconds after a completed rollout, make it fail naming the pod (gone, restarted), and the way back
  runs.
* Its way back: the new pods crash on the consumer protocol, so the start's rollout stalls
  (ProgressDeadlineExceeded); the DAG stops them, restarts on classic and the Deployment ends on classic with its
  recorded replicas, its pods the group's members again.
"""

from __future__ import annotations

import datetime
import re
import threading
import time
from pathlib import Path

import pytest
import yaml
from airflow.models import TaskInstance
from airflow.utils.session import create_session
from airflow.utils.state import TaskInstanceState

from airflow_provider_kip848.controllers.kubernetes import REPLICAS_ANNOTATION
from airflow_provider_kip848.kafka.model import GroupType, MemberProtocol
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.rules.conditions import is_live
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.apps import (
    WORDCOUNT_INPUT_TOPIC,
    WORDCOUNT_OUTPUT_TOPIC,
    wordcount_command,
    wordcount_properties,
)
from kip848_harness.clients import create_topics, decode_long, latest_by_key, produce, read_topic
from kip848_harness.kube_control_plane import KubeNamespace
from kip848_harness.kube_workloads import (
    PROTOCOL_ENV,
    consumer_app,
    controller_target,
    on_consumer_protocol,
    wordcount_app,
)
from kip848_harness.windows import open_window
from tests.conftest import wait_until
from tests.e2e.helpers import approve, run_dag, state
from tests.e2e.test_consumer_offline_migration import conf

DAG = "kip848_consumer_offline_migration"
APP = "orders"
REPLICAS = 2
#: a classic member's session (classic only), in the pods' env and read by the controller's config: the way back's
#: liveness window is this session plus a heartbeat when no progress shows first (45 s by default, more than the
#: test's start deadline)
CLASSIC_SESSION_MS = "6000"


def count_of(bootstrap: str, word: str, expected: int, timeout: float = 90) -> int | None:
    """WordCountDemo's latest count of ``word``, once it is ``expected`` (else the last seen)."""
    def count(records) -> int | None:
        value = latest_by_key(records).get(word.encode())
        return decode_long(value) if value is not None else None

    return count(read_topic(bootstrap, WORDCOUNT_OUTPUT_TOPIC, timeout=timeout, until=lambda rs: count(rs) == expected))


def live(admin: KafkaAdmin, group: str) -> list:
    return [m for m in admin.describe_group(group).members if is_live(m)]


def deployed(ns: KubeNamespace, bootstrap: str, unique, controllers, monkeypatch: pytest.MonkeyPatch,
             *, crash_on_consumer: bool = False, crash_after_s: int = 1, crash_after_joining: bool = False,
             min_ready_seconds: int = 3) -> tuple[str, str, str, str]:
    """A classic Deployment of two consumers copying a topic to an output topic, caught up, and its registry
    entry (kind kubernetes, the namespace's admin connection). ``crash_on_consumer``: on the consumer protocol its
    pods die ``crash_after_s`` after they start (a crash loop): without joining the group, or, with
    ``crash_after_joining``, as consumers that die without closing (their members stay listed)."""
    topic, output, group = unique("k8s-orders"), unique("k8s-out"), unique("k8s-app")
    create_topics(bootstrap, {topic: 4, output: 4})
    produce(bootstrap, topic, (f"v{i}" for i in range(200)), keys=(str(i) for i in range(200)))
    # minReadySeconds: a pod that dies a second after its start never counts as available; a short progress
    # deadline: a start that cannot complete says so within seconds (the Deployment's own verdict)
    manifest = consumer_app(APP, bootstrap=bootstrap, group_id=group, topics=[topic], replicas=REPLICAS,
                            extra_args=["--output-topic", output, "--session-timeout-ms", "$(KAFKA_SESSION_TIMEOUT_MS)"],
                            extra_env={"KAFKA_SESSION_TIMEOUT_MS": CLASSIC_SESSION_MS},
                            min_ready_seconds=min_ready_seconds, progress_deadline_seconds=10)
    if crash_on_consumer:
        on_consumer_protocol(manifest, f"exec {{command}} --exit-after-s {crash_after_s}" if crash_after_joining
                             else f"sleep {crash_after_s} && exit 3")
    ns.create(manifest)
    conn_id = unique("k8s_conn").replace("-", "_")
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", ns.admin_connection)
    name = controllers.add(unique("k8s-ctl"), "kubernetes",
                           controller_target(APP, kind="Deployment", conn_id=conn_id, namespace=ns.name,
                                             env_properties={"KAFKA_SESSION_TIMEOUT_MS": {
                                                 "property": "session.timeout.ms", "protocols": ["classic"]}}),
                           description="the test's consumers, a Deployment on the test control plane")
    admin = KafkaAdmin(ClientSettings(bootstrap))
    try:
        def settled() -> bool:
            desc, offsets = admin.describe_group(group), admin.group_offsets(group)
            return (desc.state == "Stable" and len(desc.members) == REPLICAS and offsets.total_lag == 0
                    and not offsets.uncommitted_with_records)

        wait_until(settled, timeout=120, what="the Deployment's classic group Stable and caught up")
    finally:
        admin.close()
    return topic, output, group, name


def pods(ns: KubeNamespace, app: str = APP) -> list[str]:
    return sorted(p.metadata.name for p in ns.core.list_namespaced_pod(ns.name, label_selector=f"app={app}").items)


def protocol_env(ns: KubeNamespace, app: str = APP) -> str:
    container = ns.apps.read_namespaced_deployment(app, ns.name).spec.template.spec.containers[0]
    return next(e.value for e in container.env if e.name == PROTOCOL_ENV)


def test_a_deployment_moves_offline_to_consumer(airflow_db, kafka_conn, bootstrap, unique, tmp_path, controllers,
                                                kube_namespace: KubeNamespace, monkeypatch) -> None:
    ns = kube_namespace
    topic, output, group, name = deployed(ns, bootstrap, unique, controllers, monkeypatch)
    before = pods(ns)
    admin = KafkaAdmin(ClientSettings(bootstrap))
    try:
        run, answers, report = run_dag(DAG, conf(tmp_path, group, output, name), decide=approve)
        assert state(run) == "success", report
        assert report["outcome"] == "migrated", report
        body = answers[0]["body"]
        assert f"application controller: {name} (kind kubernetes)" in body, body
        assert f"record the replicas of deployment/{APP} in namespace {ns.name}" in body, body
        assert f"set group.protocol=consumer in env {PROTOCOL_ENV}" in body, body
        assert "instances now (the platform): 2 instance(s) running" in body, body
        # Kubernetes' side: the env var changed, the recorded replicas were restored and the record spent, every
        # pod is new
        deployment = ns.apps.read_namespaced_deployment(APP, ns.name)
        assert protocol_env(ns) == "consumer" and deployment.spec.replicas == REPLICAS
        assert REPLICAS_ANNOTATION not in (deployment.metadata.annotations or {})
        after = pods(ns)
        assert len(after) == REPLICAS and not set(after) & set(before)
        # the broker's side: the same group, KIP-848, the new pods its members; nothing lost
        assert admin.group_listing(group).type is GroupType.CONSUMER
        members = live(admin, group)
        assert sorted(m.client_id for m in members) == after
        assert {m.protocol for m in members} == {MemberProtocol.CONSUMER}
        assert report["results"]["emptied"]["summary"].startswith("0 member(s)")
        assert report["results"]["offsets_vs_snapshot"]["counts"].get("lost", 0) == 0
        assert report["results"]["validation"]["passed"], report["results"]["validation"]
    finally:
        admin.close()


def test_pods_crashing_on_consumer_go_back_to_classic(airflow_db, kafka_conn, bootstrap, unique, tmp_path,
                                                      controllers, kube_namespace: KubeNamespace,
                                                      monkeypatch) -> None:
    ns = kube_namespace
    topic, output, group, name = deployed(ns, bootstrap, unique, controllers, monkeypatch, crash_on_consumer=True)
    admin = KafkaAdmin(ClientSettings(bootstrap))
    try:
        run, answers, report = run_dag(DAG, conf(tmp_path, group, output, name, start_timeout_minutes=0.5,
                                                 validate_with_spark=False), decide=approve)
        assert state(run) == "failed", "a rolled-back migration marks the run failed"
        assert report["outcome"] == "rolled_back", report
        assert "start_application" in report["failed_tasks"], report["failed_tasks"]
        rollback = report["results"]["rollback"]
        assert rollback["stopped"]["platform"]["recorded_replicas"] == REPLICAS
        assert rollback["restarted"]["group_protocol"] == "classic"
        assert rollback["offsets_vs_snapshot"]["counts"].get("lost", 0) == 0, rollback
        deployment = ns.apps.read_namespaced_deployment(APP, ns.name)
        assert protocol_env(ns) == "classic" and deployment.spec.replicas == REPLICAS
        assert admin.group_listing(group).type is GroupType.CLASSIC
        wait_until(lambda: sorted(m.client_id for m in live(admin, group)) == pods(ns), timeout=60,
                   what="the classic pods as the group's members")
        assert {m.protocol for m in live(admin, group)} == {MemberProtocol.CLASSIC}
    finally:
        admin.close()


def test_a_rollout_that_cannot_complete_is_rolled_back_to_classic(airflow_db, kafka_conn, bootstrap, unique,
                                                                   tmp_path, controllers,
                                                                   kube_namespace: KubeNamespace, monkeypatch,
                                                                   capfd) -> None:
    """kip848_consumer_rolling_upgrade on a Deployment whose pods exit at once on the consumer protocol: rolled pod
    by pod (issue 48), the roll stops at the first new pod, named, before any other pod moved (not at the
    Deployment's progress deadline); the way back moves that pod back to classic through the same controller, the
    other old pod was never stopped, and the pods are the group's classic members."""
    ns = kube_namespace
    topic, output, group, name = deployed(ns, bootstrap, unique, controllers, monkeypatch, crash_on_consumer=True,
                                          crash_after_s=0)
    before = pods(ns)
    admin = KafkaAdmin(ClientSettings(bootstrap))
    try:
        capfd.readouterr()
        run, answers, report = run_dag("kip848_consumer_rolling_upgrade", {
            "group_id": group, "output_topic": output, "id_source": "key", "allowed_duplicates": 1000,
            "client_properties": {"group.protocol": "consumer", "enable.auto.commit": "false"},
            "poll_seconds": 0.5, "rollout_timeout_minutes": 1, "rollback_timeout_minutes": 2, "reader": "python",
            "validate_with_spark": False, "app_controller": name}, decide=approve)
        out, err = capfd.readouterr()
        assert "the first-instance gate: instance orders-" in out + err, (out + err)[-3000:]
        assert "the other instances were not restarted" in out + err
        assert state(run) == "failed" and report["outcome"] == "timed_out_rolled_back", report
        assert "roll_application" in report["failed_tasks"], report["failed_tasks"]
        assert f"application controller: {name} (kind kubernetes)" in answers[0]["body"]
        back = report["results"]["rolled_back"]
        assert back["group_protocol"] == "classic" and back["controller"] == name and back["mode"] == "by_instance"
        assert protocol_env(ns) == "classic"
        now = pods(ns)
        assert len(now) == len(before) and len(set(now) & set(before)) == len(before) - 1, \
            "one old pod moved (and back), the other was never stopped"
        assert admin.describe_group(group).type is GroupType.CLASSIC and report["after"]["type"] == "classic"
        wait_until(lambda: sorted(m.client_id for m in live(admin, group)) == now, timeout=60,
                   what="the pods the group's classic members")
    finally:
        admin.close()


def test_a_streams_deployment_moves_offline_to_streams(airflow_db, kafka, kafka_conn, unique, tmp_path, controllers,
                                                       kube_namespace: KubeNamespace, monkeypatch) -> None:
    """kip1071_streams_offline_migration on WordCountDemo as a Deployment reading its properties from a mounted
    ConfigMap: stop scales it to 0 (no pod left: the classic member a Streams app leaves behind expires through
    the broker, before its removal is due), start rewrites the file's group.protocol line to streams and rolls the pods by the template's hash
    annotation; the same application id is then a streams group, and its counts go on from the committed state."""
    ns = kube_namespace
    bootstrap = kafka.bootstrap_servers
    app_id, word = unique("k8s-wc"), f"w{time.time_ns()}"
    create_topics(bootstrap, {WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    props = wordcount_properties(bootstrap, app_id, group_protocol="classic", state_dir=Path("state"),
                                 extra={"session.timeout.ms": "6000", "heartbeat.interval.ms": "500"})
    ns.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "wordcount"},
               "data": {"wordcount.properties": "".join(f"{k}={v}\n" for k, v in props.items())}})
    java = wordcount_command(kafka.distribution, [])
    ns.create(wordcount_app("wordcount", java_command=java, config_map="wordcount"))
    conn_id = unique("k8s_conn").replace("-", "_")
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", ns.admin_connection)
    ref = {"name": "wordcount", "key": "wordcount.properties"}
    controllers.add(app_id, "kubernetes", {
        "kubernetes_conn_id": conn_id, "namespace": ns.name, "workload": "deployment/wordcount",
        "protocol_config_map": {**ref, "property": "group.protocol"}, "properties_config_map": ref,
        "client": "java", "client_version": kafka.version}, description="WordCountDemo, a Deployment")
    admin = KafkaAdmin(ClientSettings(bootstrap))
    try:
        produce(bootstrap, WORDCOUNT_INPUT_TOPIC, [f"{word} a", f"{word} b"])
        assert count_of(bootstrap, word, 2) == 2
        wait_until(lambda: (d := admin.describe_group(app_id)).state == "Stable" and d.type is GroupType.CLASSIC
                   and admin.group_offsets(app_id).total_lag == 0, timeout=120, what="classic app committed all")
        before = sorted(p.metadata.name for p in ns.core.list_namespaced_pod(ns.name, label_selector="app=wordcount")
                        .items)
        run, answers, report = run_dag("kip1071_streams_offline_migration", {
            "application_id": app_id, "app_controller": app_id, "remove_members_after": 2, "poll_seconds": 0.5,
            "empty_timeout_minutes": 3, "stable_timeout_minutes": 3, "standby_replicas": 0,
            "session_timeout_ms": 6000, "heartbeat_interval_ms": 500, "output_topic": WORDCOUNT_OUTPUT_TOPIC,
            "reader": "python", **open_window()}, decide=approve)
        assert state(run) == "success", report
        assert report["outcome"] == "migrated", report
        body = answers[0]["body"]
        assert f"application controller: {app_id} (kind kubernetes)" in body, body
        assert "linted: group.protocol=streams" in body and "session.timeout.ms=6000 (controller)" in body, body
        results = report["results"]
        assert results["stopped"]["instances_gone"] is True
        assert results["stopped"]["platform"]["recorded_replicas"] == 1
        # the stop recorded the pod that ran (the Empty wait pairs a member left behind with it once it is gone);
        # a member is forced out only past its session (6 s + 0.5 s heartbeat + 1 s), so the classic Streams
        # member left behind expired through the broker first: nothing forced out
        assert [i["name"] for i in results["stopped"]["before"]["instances"]] == before, results["stopped"]
        emptied = results["emptied"]
        assert emptied["condition"]["removal_s"] == 7.5 and emptied["members_removed"] == [], emptied
        assert results["restored"]["restored"] == {}, "no committed offset was lost"
        assert report["after"] == {"type": "streams", "state": "Stable", "members": 1}
        data = ns.core.read_namespaced_config_map("wordcount", ns.name).data["wordcount.properties"]
        assert "group.protocol=streams\n" in data and f"application.id={app_id}\n" in data
        after = sorted(p.metadata.name for p in ns.core.list_namespaced_pod(ns.name, label_selector="app=wordcount")
                       .items)
        assert len(after) == 1 and after != before
        produce(bootstrap, WORDCOUNT_INPUT_TOPIC, [f"{word} c"])
        assert count_of(bootstrap, word, 3) == 3, "the count goes on from the committed state"
    finally:
        admin.close()


def test_a_fleet_wave_of_a_deployment_and_a_statefulset(airflow_db, kafka_conn, bootstrap, unique, tmp_path,
                                                        controllers, kube_namespace: KubeNamespace,
                                                        monkeypatch) -> None:
    """kip848_fleet_migration, one wave of two applications on Kubernetes, each named in the ownership map by its
    registry entry: ``orders``, a Deployment moved online (the controller's rolling update), and ``ledger``, a
    StatefulSet of static members (group.instance.id = pod name) moved offline (scaled to 0, its static members
    forced out once no pod exists, started on consumer). Both end KIP-848 with their pods as members."""
    ns = kube_namespace
    prefix = unique("kfleet") + "-"
    conn_id = unique("k8s_conn").replace("-", "_")
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", ns.admin_connection)
    apps = {"orders": ("Deployment", None), "ledger": ("StatefulSet", "offline")}
    rules, groups = [], {}
    for app, (kind, path) in apps.items():
        group, topic = f"{prefix}{app}-g0", f"{prefix}{app}-in"
        groups[app] = group
        create_topics(bootstrap, {topic: 2})
        produce(bootstrap, topic, (f"v{i}" for i in range(40)), keys=(str(i) for i in range(40)))
        ns.create(consumer_app(app, bootstrap=bootstrap, group_id=group, topics=[topic], replicas=2, kind=kind,
                               min_ready_seconds=1))
        controllers.add(f"{prefix}{app}", "kubernetes",
                        controller_target(app, kind=kind, conn_id=conn_id, namespace=ns.name),
                        description=f"{app}, a {kind}")
        rules.append({"prefix": f"{prefix}{app}-", "app": app, "team": "payments",
                      "app_controller": f"{prefix}{app}", "expected_instances": 2,
                      **({"migration": path} if path else {})})
    monkeypatch.setenv("AIRFLOW_VAR_KIP848_OWNERSHIP_MAP", yaml.safe_dump({"version": 1, "rules": rules},
                                                                          sort_keys=False))
    admin = KafkaAdmin(ClientSettings(bootstrap))
    try:
        def settled() -> bool:
            for group in groups.values():
                desc, offsets = admin.describe_group(group), admin.group_offsets(group)
                if desc.state != "Stable" or len(desc.members) != 2 or offsets.total_lag:
                    return False
            return True

        wait_until(settled, timeout=120, what="both applications' classic groups Stable and caught up")
        static_before = sorted(m.instance_id or "" for m in admin.describe_group(groups["ledger"]).members)
        assert static_before == ["ledger-0", "ledger-1"]
        run, answers, report = run_dag("kip848_fleet_migration", {
            "prefixes": [prefix], "canary": 0, "wave_size": 2, "max_groups_per_wave": 3, "max_failed_apps": 0,
            "remove_members_after": 2, "empty_settle_seconds": 2, "empty_timeout_minutes": 2,
            "start_timeout_minutes": 1.5, "poll_seconds": 0.5, **open_window()}, decide=approve)
        assert state(run) == "success", report
        assert report["outcome"] == "completed", report
        assert [a["task_id"] for a in answers] == ["wave_1.approval"], answers
        outcomes = {a["app"]: (a["path"], a["outcome"]) for a in report["applications"]}
        assert outcomes == {"orders": ("online", "migrated"), "ledger": ("offline", "migrated")}, outcomes
        for app, group in groups.items():
            assert admin.group_listing(group).type is GroupType.CONSUMER, group
            members = live(admin, group)
            assert sorted(m.client_id for m in members) == pods(ns, app), (group, members)
            assert {m.protocol for m in members} == {MemberProtocol.CONSUMER}
        assert sorted(m.instance_id or "" for m in live(admin, groups["ledger"])) == ["ledger-0", "ledger-1"], \
            "the StatefulSet's pods are the static members again, by name"
        env = {e.name: e.value for e in
               ns.apps.read_namespaced_stateful_set("ledger", ns.name).spec.template.spec.containers[0].env}
        assert env[PROTOCOL_ENV] == "consumer" and protocol_env(ns, "orders") == "consumer"
    finally:
        admin.close()


# -- the instance verdicts of the migrated wait, with Kubernetes as the source of truth ------------------------------

def started_task_done(since: datetime.datetime) -> bool:
    """Whether this test's run has finished its start_application task (the baseline of the migrated wait)."""
    with create_session() as session:
        return session.query(TaskInstance).filter(
            TaskInstance.dag_id == DAG, TaskInstance.task_id == "start_application",
            TaskInstance.state == TaskInstanceState.SUCCESS, TaskInstance.start_date >= since).first() is not None


def test_a_pod_deleted_by_hand_during_the_wait_is_not_migrated(airflow_db, kafka_conn, bootstrap, unique, tmp_path,
                                                               controllers, kube_namespace: KubeNamespace,
                                                               monkeypatch, capfd) -> None:
    """Once the start has returned (its status is the wait's baseline), someone deletes one of the new pods. The
    Deployment replaces it and the broker soon lists a member again, but the instance the start reported is gone:
    the migrated wait fails naming it, and the way back puts the application on classic."""
    ns = kube_namespace
    topic, output, group, name = deployed(ns, bootstrap, unique, controllers, monkeypatch)
    since = datetime.datetime.now(datetime.UTC)
    deleted: list[str] = []

    def delete_one() -> None:
        wait_until(lambda: started_task_done(since), timeout=300, interval=0.1, what="the start task done")
        victim = pods(ns)[0]
        ns.core.delete_namespaced_pod(victim, ns.name)
        deleted.append(victim)

    hand = threading.Thread(target=delete_one, daemon=True)
    hand.start()
    admin = KafkaAdmin(ClientSettings(bootstrap))
    try:
        capfd.readouterr()
        run, answers, report = run_dag(DAG, conf(tmp_path, group, output, name, validate_with_spark=False),
                                       decide=approve)
        hand.join(timeout=60)
        out, err = capfd.readouterr()
        assert deleted, "the pod was deleted during the run"
        assert f"{deleted[0]} (" in out + err and "is gone" in out + err, (out + err)[-3000:]
        assert report["outcome"] == "rolled_back" and "wait_migrated" in report["failed_tasks"], report
        assert protocol_env(ns) == "classic"
        assert admin.group_listing(group).type is GroupType.CLASSIC
    finally:
        admin.close()


def test_a_pod_that_crashes_after_the_start_is_not_migrated(airflow_db, kafka_conn, bootstrap, unique, tmp_path,
                                                            controllers, kube_namespace: KubeNamespace,
                                                            monkeypatch, capfd) -> None:
    """The new pods come up Ready and available (the start's rollout completes) and their consumers join, then die
    five seconds after their start without closing, and Kubernetes restarts them: the broker still lists their
    members, but the platform counts the restarts, so the migrated wait fails naming a restarted pod, and the way
    back puts the application on classic."""
    ns = kube_namespace
    topic, output, group, name = deployed(ns, bootstrap, unique, controllers, monkeypatch, crash_on_consumer=True,
                                          crash_after_s=5, crash_after_joining=True, min_ready_seconds=1)
    admin = KafkaAdmin(ClientSettings(bootstrap))
    try:
        capfd.readouterr()
        run, answers, report = run_dag(DAG, conf(tmp_path, group, output, name, validate_with_spark=False),
                                       decide=approve)
        out, err = capfd.readouterr()
        assert re.search(r"orders-\S+ \(.*\) restarted \d+ time\(s\) since the start", out + err), \
            (out + err)[-3000:]
        assert report["results"]["started"]["platform"]["replicas"] == REPLICAS, "the start itself completed"
        assert report["outcome"] == "rolled_back" and "wait_migrated" in report["failed_tasks"], report
        assert protocol_env(ns) == "classic"
        assert admin.group_listing(group).type is GroupType.CLASSIC
        wait_until(lambda: sorted(m.client_id for m in live(admin, group)) == pods(ns), timeout=60,
                   what="the classic pods as the group's members")
    finally:
        admin.close()
