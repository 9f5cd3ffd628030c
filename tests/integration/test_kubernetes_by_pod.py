"""The roll by instance on Kubernetes: pod by pod behind the first-instance gate, on the real control plane.

The session's control plane (kube-apiserver, kube-controller-manager, etcd; tests/conftest.py ``kube``) and its
node agent run real confluent-kafka consumers as pods; the rolling upgrade's roll by instance
(engine/instance_roll.py ``roll_application``) drives the ``kubernetes`` controller (controllers/kubernetes_pods.py)
against the session's broker. What is checked is what Kubernetes and the broker show: which pod moved when (the
pods' uids and their own env at the moment each step began), the StatefulSet's partition and the Deployment's
strategy afterwards, and the group's members and their protocol.

* A StatefulSet of static members moves highest ordinal first, one pod per step, each pod's member on the consumer
  protocol (under its pod name as group.instance.id) before the next pod moves; the partition ends where it was;
  rolled back to classic, each consumer-protocol static member left (never held to fence its successor).
* A Deployment moves one pod per step (its rollout held between pods); the strategy and minReadySeconds end as
  they were; every pod's member on consumer.
* A workload whose new pods never switch (a launcher that ignores the env var) stops at the first pod: the other
  pods keep their uids; the way back restores the moved pod to classic and the partition.
* A pod that crash-loops after its switch stops the roll naming it, the other pod never moved.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from airflow_provider_kip848.controllers import ControllerError
from airflow_provider_kip848.controllers.kubernetes_pods import HOLD_MIN_READY_SECONDS, ROLL_ANNOTATION
from airflow_provider_kip848.engine.instance_roll import InstanceRollFailed, RollLimits, roll_application
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.model.groups import MemberProtocol
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import create_topics
from kip848_harness.kube_control_plane import KubeNamespace
from kip848_harness.kube_workloads import PROTOCOL_ENV, consumer_app, controller_target, on_consumer_protocol
from tests.conftest import RecordingTI, set_kafka_connection, wait_until
from tests.integration.test_kubernetes_controller import connect, joined, ready_pods, register, role_rules

pytestmark = pytest.mark.slow
APP = "orders"
LIMITS = RollLimits(first_instance_s=60, instance_s=60, poll_s=0.5)


@pytest.fixture
def admin(bootstrap: str) -> Iterator[KafkaAdmin]:
    with KafkaAdmin(ClientSettings(bootstrap)) as client:
        yield client


class Steps(logging.Handler):
    """At each 'Rolling instance X' the roll logs (before X is touched): every pod's uid and protocol env then."""

    def __init__(self, ns: KubeNamespace) -> None:
        super().__init__(logging.INFO)
        self.ns = ns
        self.seen: list[tuple[str, dict[str, tuple[str, str]]]] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Rolling instance "):
            self.seen.append((message.split()[2], pods(self.ns)))


def pods(ns: KubeNamespace) -> dict[str, tuple[str, str]]:
    """Every live pod of the app: name -> (uid, its own GROUP_PROTOCOL)."""
    out = {}
    for p in ns.core.list_namespaced_pod(ns.name, label_selector=f"app={APP}").items:
        if p.metadata.deletion_timestamp is None:
            env = next(e.value for e in p.spec.containers[0].env if e.name == PROTOCOL_ENV)
            out[p.metadata.name] = (p.metadata.uid, env)
    return out


def deploy(ns: KubeNamespace, bootstrap: str, unique, controllers, monkeypatch, admin: KafkaAdmin, *, kind: str,
           replicas: int, then: str | None = None, connection: str | None = None):
    topic, group = unique("k8s-pod-topic"), unique("k8s-pod-group")
    create_topics(bootstrap, {topic: 4})
    manifest = consumer_app(APP, bootstrap=bootstrap, group_id=group, topics=[topic], replicas=replicas, kind=kind,
                            termination_grace_seconds=10)
    if then is not None:
        on_consumer_protocol(manifest, then)
    ns.create(manifest)
    conn = connect(monkeypatch, unique("k8s_conn").replace("-", "_"), connection or ns.admin_connection)
    controller = register(controllers, unique, controller_target(APP, kind=kind, conn_id=conn, namespace=ns.name,
                                                                  rollout_timeout_seconds=60))
    names = wait_until(lambda: ready_pods(ns, replicas), timeout=90, what=f"{replicas} ready pods")
    wait_until(lambda: joined(admin, group, names, MemberProtocol.CLASSIC, static=kind == "StatefulSet"),
               timeout=90, what="every pod's consumer in the classic group")
    kafka_conn = set_kafka_connection(monkeypatch, unique("kafka_conn").replace("-", "_"), bootstrap)
    return controller, group, kafka_conn


def roll(controller, kafka_conn: str, group: str, protocol: str, tmp_path, log: logging.Logger, **kw) -> dict:
    return roll_application(controller, KafkaGroupAdminHook(kafka_conn_id=kafka_conn), [group], protocol, LIMITS,
                            context={"ti": RecordingTI()}, task_id="roll_application",
                            audit_log=str(tmp_path / "audit.jsonl"), log=log, **kw)


def logger(name: str, handler: logging.Handler) -> logging.Logger:
    log = logging.getLogger(f"k8s-by-pod.{name}")
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    return log


def test_a_statefulset_of_static_members_moves_pod_by_pod(kube_namespace, bootstrap, admin, controllers, monkeypatch,
                                                          unique, tmp_path):
    ns = kube_namespace
    controller, group, kafka_conn = deploy(ns, bootstrap, unique, controllers, monkeypatch, admin,
                                           kind="StatefulSet", replicas=3)
    steps = Steps(ns)
    log = logger(group, steps)
    try:
        assert controller.can_roll_instances() and controller.replaces_instances()
        assert "highest ordinal first" in controller.plan("consumer")["actions"]["roll_instance"]
        original = pods(ns)
        result = roll(controller, kafka_conn, group, "consumer", tmp_path, log)
        assert result["mode"] == "by_instance", result
        order = [r["instance"] for r in result["instances"]]
        assert order == [f"{APP}-2", f"{APP}-1", f"{APP}-0"], order
        assert [name for name, _ in steps.seen] == order
        # when each pod's step began, the pods after it in the order had never moved and those before it had
        for index, (name, snapshot) in enumerate(steps.seen):
            for later in order[index:]:
                assert snapshot[later] == original[later], (name, later, snapshot)
            for earlier in order[:index]:
                assert snapshot[earlier][1] == "consumer" and snapshot[earlier][0] != original[earlier][0], snapshot
        for record in result["instances"]:
            assert record["joined"]["groups"][group], record  # its own member on consumer before the next moved
            assert record["started"]["platform"]["replaced_uid"] == original[record["instance"]][0]
            assert record["started"]["platform"]["partition"] == int(record["instance"].rsplit("-", 1)[1])
        assert result["gate"] == result["instances"][0]["joined"], "the first pod was the gate"
        sts = ns.apps.read_namespaced_stateful_set(APP, ns.name)
        assert sts.spec.update_strategy.rolling_update.partition == 0, "the partition is back where it was"
        assert ROLL_ANNOTATION not in (sts.metadata.annotations or {})
        names = sorted(original)
        wait_until(lambda: joined(admin, group, names, MemberProtocol.CONSUMER, static=True), timeout=60,
                   what="the three static members on consumer under their pod names")

        # and back to classic, pod by pod: each consumer-protocol static member closed on SIGTERM (left at epoch -2,
        # or already replaced by its successor), never held at a live epoch that would fence its successor
        back = roll(controller, kafka_conn, group, "classic", tmp_path, log)
        assert [r["instance"] for r in back["instances"]] == order
        for record in back["instances"]:
            assert record["left"][group].startswith(("left (member epoch -2", "gone")), record["left"]
        wait_until(lambda: joined(admin, group, names, MemberProtocol.CLASSIC, static=True), timeout=60,
                   what="the three static members back on classic")
    finally:
        log.removeHandler(steps)
        controller.close()


def test_a_deployment_moves_pod_by_pod(kube_namespace, bootstrap, admin, controllers, monkeypatch, unique, tmp_path):
    """Under exactly the documented Role (ROLE_RULES: its only addition for this is ``patch pods``, the
    deletion-cost mark); a Role without it is refused at check, before anything moves."""
    ns = kube_namespace
    controller, group, kafka_conn = deploy(
        ns, bootstrap, unique, controllers, monkeypatch, admin, kind="Deployment",
        connection=ns.service_account_connection("kip848-controller", role_rules()), replicas=3)
    without = [{**r, "verbs": [v for v in r["verbs"] if v != "patch"]} if r["resources"] == ["pods"] else r
               for r in role_rules()]
    refused = register(controllers, unique, controller_target(
        APP, kind="Deployment", namespace=ns.name, conn_id=connect(
            monkeypatch, unique("k8s_np").replace("-", "_"),
            ns.service_account_connection("kip848-no-pod-patch", without))))
    steps = Steps(ns)
    log = logger(group, steps)
    try:
        with pytest.raises(ControllerError) as failed:
            refused.check()
        assert "may not patch pods in namespace" in str(failed.value) and "roll_instance" in str(failed.value)
        assert "pod by pod too" in controller.check()
        before = ns.apps.read_namespaced_deployment(APP, ns.name).spec
        original = pods(ns)
        result = roll(controller, kafka_conn, group, "consumer", tmp_path, log)
        assert result["mode"] == "by_instance", result
        records = result["instances"]
        order = sorted(original)
        assert [r["replaced"] for r in records] == order, records
        assert [name for name, _ in steps.seen] == order
        # when each old pod's step began: it and the old pods after it had never moved, and each one before it had
        # been replaced by exactly one new pod on consumer (the rollout held between pods: no pod more)
        for index, (_name, snapshot) in enumerate(steps.seen):
            assert {n: snapshot[n] for n in order[index:]} == {n: original[n] for n in order[index:]}, snapshot
            moved = [r["instance"] for r in records[:index]]
            assert sorted(snapshot) == sorted(order[index:] + moved), snapshot
            assert all(snapshot[n][1] == "consumer" for n in moved), snapshot
        for record in records:
            assert record["joined"]["groups"][group] and record["started"]["platform"]["successor"] == \
                record["instance"]
        deployment = ns.apps.read_namespaced_deployment(APP, ns.name)
        assert deployment.spec.min_ready_seconds == before.min_ready_seconds != HOLD_MIN_READY_SECONDS
        assert deployment.spec.strategy.rolling_update.max_surge == before.strategy.rolling_update.max_surge
        assert deployment.spec.strategy.rolling_update.max_unavailable == \
            before.strategy.rolling_update.max_unavailable
        assert ROLL_ANNOTATION not in (deployment.metadata.annotations or {})
        names = sorted(r["instance"] for r in records)
        wait_until(lambda: ready_pods(ns, 3) == names, timeout=60, what="the rollout complete with the new pods")
        wait_until(lambda: joined(admin, group, names, MemberProtocol.CONSUMER), timeout=60,
                   what="the three new pods' members on consumer")
    finally:
        log.removeHandler(steps)
        refused.close()
        controller.close()


def test_new_pods_that_never_switch_stop_at_the_first_pod_and_the_way_back_restores(
        kube_namespace, bootstrap, admin, controllers, monkeypatch, unique, tmp_path):
    """A launcher that ignores GROUP_PROTOCOL (its new pods join on classic): the gate fails at the first pod,
    the other pod keeps its uid; the way back moves the first pod back to classic and restores the partition."""
    ns = kube_namespace
    controller, group, kafka_conn = deploy(ns, bootstrap, unique, controllers, monkeypatch, admin,
                                           kind="StatefulSet", replicas=2, then="exec {command} --protocol classic")
    steps = Steps(ns)
    log = logger(group, steps)
    try:
        original = pods(ns)
        with pytest.raises(InstanceRollFailed) as stopped:
            roll(controller, kafka_conn, group, "consumer", tmp_path, log)
        what = stopped.value.what
        assert "the first-instance gate" in what and f"instance {APP}-1" in what and "on classic" in what, what
        assert "the other instances were not restarted" in what
        now = pods(ns)
        assert now[f"{APP}-0"] == original[f"{APP}-0"], "the other pod never moved"
        assert now[f"{APP}-1"][0] != original[f"{APP}-1"][0] and now[f"{APP}-1"][1] == "consumer"
        sts = ns.apps.read_namespaced_stateful_set(APP, ns.name)
        assert sts.spec.update_strategy.rolling_update.partition == 1
        assert json.loads(sts.metadata.annotations[ROLL_ANNOTATION]) == {"partition": 0}

        back = roll(controller, kafka_conn, group, "classic", tmp_path, log, way_back=True)
        assert [r["instance"] for r in back["instances"]] == [f"{APP}-1", f"{APP}-0"]
        assert back["instances"][1]["joined"].get("unchanged"), back["instances"][1]
        restored = pods(ns)
        assert restored[f"{APP}-0"] == original[f"{APP}-0"], "the pod that never moved was left alone"
        assert restored[f"{APP}-1"][1] == "classic"
        sts = ns.apps.read_namespaced_stateful_set(APP, ns.name)
        assert sts.spec.update_strategy.rolling_update.partition == 0
        assert ROLL_ANNOTATION not in (sts.metadata.annotations or {})
        env = next(e.value for e in sts.spec.template.spec.containers[0].env if e.name == PROTOCOL_ENV)
        assert env == "classic"
        wait_until(lambda: joined(admin, group, sorted(original), MemberProtocol.CLASSIC, static=True),
                   timeout=60, what="both static members back on classic")
    finally:
        log.removeHandler(steps)
        controller.close()


def test_a_pod_that_crash_loops_after_its_switch_stops_the_roll_naming_it(
        kube_namespace, bootstrap, admin, controllers, monkeypatch, unique, tmp_path):
    """New pods join on consumer, then exit 3 s later without closing (a crash loop): the roll stops at the first
    new pod, named with its restart and its log's last lines, read through the API server's pods/log from the node
    agent (its crashed container's words first); the other old pod was never replaced."""
    ns = kube_namespace
    controller, group, kafka_conn = deploy(ns, bootstrap, unique, controllers, monkeypatch, admin,
                                           kind="Deployment", replicas=2, then="exec {command} --exit-after-s 3")
    steps = Steps(ns)
    log = logger(group, steps)
    try:
        original = pods(ns)
        with pytest.raises(InstanceRollFailed) as stopped:
            roll(controller, kafka_conn, group, "consumer", tmp_path, log)
        what = stopped.value.what
        now = pods(ns)
        new = [n for n in now if n not in original]
        assert len(new) == 1, now
        assert f"instance {new[0]}" in what and ("restarted" in what or "not running" in what), what
        assert "the other instances were not restarted" in what, what
        print(f"the roll's failure: {what}")
        # why it exited, in its own words: the last lines of the new pod's log (the crashed container's first)
        said = what.split(f"The last lines of {new[0]}'s log (pod log {ns.name}/{new[0]} container consumer", 1)
        assert len(said) == 2, what
        assert "exiting after 3 s without closing (a crash)" in said[1], what
        assert "client library: confluent-kafka" in said[1] and "protocol=consumer" in said[1], what
        kept = [n for n in original if n in now]
        assert len(kept) == 1 and now[kept[0]] == original[kept[0]], "the other pod never moved"
        assert len(steps.seen) == 1
    finally:
        log.removeHandler(steps)
        controller.close()
