"""The ``kubernetes`` controller against a real control plane: Deployments and StatefulSets of real consumers.

The session's control plane (tests/conftest.py ``kube``) is kube-apiserver, kube-controller-manager and etcd
built from their Go modules; its node agent runs each pod's command as a local process, so a pod that comes up
is a confluent-kafka consumer joining its group on the session's broker. What is checked is what Kubernetes and
the broker show (pods, their names and restarts, the workload's annotations and template, the group's members
and their protocol), not only what the controller says.

* The steps: stop records the replicas and waits until no pod exists; start sets group.protocol (an env var, or
  a properties file in a ConfigMap, rolled out by a template annotation) and scales back; roll is a rolling
  update; status names pods (a StatefulSet's are the members' group.instance.id); config is what the workload
  is configured with.
* A rollout that cannot complete fails with the Deployment's own reason and the crashing pod; rolling back
  restores the protocol with the old pods never stopped.
* RBAC: the documented Role suffices for every step; without ``patch`` (or in a namespace without a Role) the
  step says which permission is missing, and nothing is scaled.
* Bad input: a workload that does not exist, a selector that matches nothing, an env var the container does not
  have: each a clear error before anything is scaled.
* Instance verdicts rest on Kubernetes: a pod deleted by hand is lost (gone), a crash-looping pod restarted.
* The pod log (the node agent serves the kubelet's /containerLogs): ``logs()`` gives the consumer's own lines,
  bounded, a restarted container's previous lines first; each pod's client release is read from it.
"""

from __future__ import annotations

from collections.abc import Iterator

import confluent_kafka
import pytest

from airflow_provider_kip848.controllers import (
    ApplicationStatus,
    ControllerError,
    NamedController,
    instance_problems,
    lost_instances,
)
from airflow_provider_kip848.controllers.kubernetes import REPLICAS_ANNOTATION, ROLE_RULES
from airflow_provider_kip848.controllers.registry import resolve_controller
from airflow_provider_kip848.controllers.releases import logged_releases
from airflow_provider_kip848.kafka.model.groups import ConsumerGroupDescription, MemberProtocol
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import create_topics
from kip848_harness.kube_control_plane import KubeNamespace
from kip848_harness.kube_workloads import (
    PROTOCOL_ENV,
    consumer_app,
    consumer_app_config_map,
    controller_target,
    on_consumer_protocol,
)
from kip848_harness.registry import RegistryFile
from tests.conftest import wait_until
from tests.integration.test_command_controller import group_of

pytestmark = pytest.mark.slow
APP = "orders"


@pytest.fixture
def admin(bootstrap: str) -> Iterator[KafkaAdmin]:
    with KafkaAdmin(ClientSettings(bootstrap)) as client:
        yield client


@pytest.fixture
def topic(bootstrap: str, unique) -> str:
    name = unique("k8s-topic")
    create_topics(bootstrap, {name: 2})
    return name


def connect(monkeypatch: pytest.MonkeyPatch, conn_id: str, uri: str) -> str:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", uri)
    return conn_id


def register(controllers: RegistryFile, unique, target: dict) -> NamedController:
    name = unique("k8s-ctl")
    controllers.add(name, "kubernetes", target, description="a consumer application on the test control plane")
    return resolve_controller(name)


def joined(admin: KafkaAdmin, group_id: str, pods: list[str], protocol: MemberProtocol,
           static: bool = False) -> ConsumerGroupDescription | None:
    """The group once it is Stable with exactly the consumers of ``pods`` (client.id = pod name), on ``protocol``."""
    group = group_of(admin, group_id)
    if group is None or group.state != "Stable":
        return None
    if sorted(m.client_id for m in group.members) != sorted(pods):
        return None
    if any(m.protocol is not protocol for m in group.members):
        return None
    if static and sorted(m.instance_id or "" for m in group.members) != sorted(pods):
        return None
    return group


def pod_names(ns: KubeNamespace, app: str = APP) -> list[str]:
    return sorted(p.metadata.name for p in ns.core.list_namespaced_pod(ns.name, label_selector=f"app={app}").items
                  if p.metadata.deletion_timestamp is None)


def ready_pods(ns: KubeNamespace, count: int, app: str = APP) -> list[str] | None:
    pods = [p for p in ns.core.list_namespaced_pod(ns.name, label_selector=f"app={app}").items
            if p.metadata.deletion_timestamp is None and any(
                c.type == "Ready" and c.status == "True" for c in p.status.conditions or ())]
    names = sorted(p.metadata.name for p in pods)
    return names if len(names) == count and len(pod_names(ns, app)) == count else None


def env_value(ns: KubeNamespace, name: str = APP) -> str:
    deployment = ns.apps.read_namespaced_deployment(name, ns.name)
    return next(e.value for e in deployment.spec.template.spec.containers[0].env if e.name == PROTOCOL_ENV)


# -- the steps ----------------------------------------------------------------------------------------------------

def test_deployment_stop_start_roll(kube_namespace: KubeNamespace, bootstrap: str, topic: str, admin: KafkaAdmin,
                                    controllers: RegistryFile, monkeypatch: pytest.MonkeyPatch, unique) -> None:
    """A Deployment of 2 classic consumers: status names its pods; stop records 2 replicas in the workload's
    annotation and returns once no pod exists (the group is then Empty: the consumers left on SIGTERM); start on
    consumer sets the env var and scales back to 2 (the record is spent); roll back to classic replaces every pod
    while the group keeps members."""
    ns = kube_namespace
    group = unique("k8s-group")
    ns.create(consumer_app(APP, bootstrap=bootstrap, group_id=group, topics=[topic], replicas=2))
    conn = connect(monkeypatch, unique("k8s_conn").replace("-", "_"), ns.admin_connection)
    controller = register(controllers, unique, controller_target(APP, kind="Deployment", conn_id=conn,
                                                                  namespace=ns.name))
    try:
        first = wait_until(lambda: ready_pods(ns, 2), timeout=60, what="2 ready pods")
        wait_until(lambda: joined(admin, group, first, MemberProtocol.CLASSIC), timeout=60,
                   what="both pods' consumers in the classic group")
        assert "may stop, start and roll it" in controller.check()

        status = controller.status()
        assert status.known and sorted(i.name for i in status.running) == first
        assert all(i.ready and i.restarts == 0 and i.incarnation.startswith("kip848://") for i in status.running)
        assert f"deployment/{APP} in namespace {ns.name}" in status.source

        config = controller.config()
        assert config is not None and config.properties["group.protocol"] == "classic"
        assert controller.config("consumer").properties["group.protocol"] == "consumer"
        assert env_value(ns) == "classic", "reading the config changed nothing"

        stopped = controller.stop()
        assert stopped["instances_gone"] is True and stopped["status"]["instances"] == []
        assert stopped["platform"]["replicas_before"] == 2 and stopped["platform"]["recorded_replicas"] == 2
        deployment = ns.apps.read_namespaced_deployment(APP, ns.name)
        assert deployment.spec.replicas == 0
        assert deployment.metadata.annotations[REPLICAS_ANNOTATION] == "2"
        assert pod_names(ns) == [] and ns.core.list_namespaced_pod(ns.name, label_selector=f"app={APP}").items == []
        group_now = group_of(admin, group)
        assert group_now is not None and group_now.state == "Empty", "the consumers left the group on SIGTERM"

        again = controller.stop()
        assert again["platform"]["replicas_before"] == 0 and again["platform"]["recorded_replicas"] == 2, \
            "a second stop keeps the record"

        started = controller.start("consumer", expected=2)
        assert started["platform"]["replicas"] == 2
        assert started["platform"]["change"] == f"env {PROTOCOL_ENV} of container consumer: classic -> consumer"
        assert env_value(ns) == "consumer"
        deployment = ns.apps.read_namespaced_deployment(APP, ns.name)
        assert REPLICAS_ANNOTATION not in (deployment.metadata.annotations or {}), "the record is spent"
        second = ready_pods(ns, 2)
        assert second is not None and not set(second) & set(first)
        assert sorted(i["name"] for i in started["status"]["instances"]) == second
        wait_until(lambda: joined(admin, group, second, MemberProtocol.CONSUMER), timeout=60,
                   what="both pods' consumers in the group on the consumer protocol")

        rolled = controller.roll("classic")
        third = rolled["platform"]["pods"]
        assert len(third) == 2 and not set(third) & set(second), "every pod was replaced"
        assert env_value(ns) == "classic"
        wait_until(lambda: joined(admin, group, third, MemberProtocol.CLASSIC), timeout=90,
                   what="the rolled pods' consumers on classic")
    finally:
        controller.close()


def test_statefulset_configmap_static_members(kube_namespace: KubeNamespace, bootstrap: str, topic: str,
                                              admin: KafkaAdmin, controllers: RegistryFile,
                                              monkeypatch: pytest.MonkeyPatch, unique) -> None:
    """A StatefulSet reading a properties file from a ConfigMap: its pod names are the members'
    group.instance.id (status says so); roll to consumer rewrites the file's group.protocol line and rolls the
    pods through the template's hash annotation; the pods keep their names, the members their instance ids."""
    ns = kube_namespace
    group = unique("k8s-group")
    ns.create(consumer_app_config_map("orders-client", bootstrap=bootstrap, group_id=group, protocol="classic"))
    ns.create(consumer_app(APP, bootstrap=bootstrap, group_id=group, topics=[topic], replicas=2, kind="StatefulSet",
                           protocol_source="configmap", config_map="orders-client"))
    conn = connect(monkeypatch, unique("k8s_conn").replace("-", "_"), ns.admin_connection)
    controller = register(controllers, unique, controller_target(
        APP, kind="StatefulSet", conn_id=conn, namespace=ns.name, protocol_source="configmap",
        config_map="orders-client"))
    pods = [f"{APP}-0", f"{APP}-1"]
    try:
        wait_until(lambda: ready_pods(ns, 2) == pods, timeout=60, what="orders-0 and orders-1 ready")
        wait_until(lambda: joined(admin, group, pods, MemberProtocol.CLASSIC, static=True), timeout=60,
                   what="two static classic members named by their pods")
        status = controller.status()
        assert [(i.name, i.group_instance_id) for i in status.running] == [(p, p) for p in pods]
        config = controller.config()
        assert config is not None
        assert config.properties["group.id"] == group and config.properties["group.protocol"] == "classic"
        assert config.properties["group.instance.id"] == "(the pod's metadata.name)"

        before = {i.name: i.incarnation for i in status.running}
        rolled = controller.roll("consumer")
        assert "configmap/orders-client key client.properties (group.protocol): classic -> consumer" in \
            rolled["platform"]["change"]
        data = ns.core.read_namespaced_config_map("orders-client", ns.name).data["client.properties"]
        assert "group.protocol=consumer\n" in data and f"group.id={group}\n" in data
        template = ns.apps.read_namespaced_stateful_set(APP, ns.name).spec.template.metadata.annotations
        assert "kip848.io/config-orders-client" in template
        after = controller.status()
        assert [i.name for i in after.running] == pods
        assert all(before[i.name] != i.incarnation for i in after.running), "every pod was replaced"
        wait_until(lambda: joined(admin, group, pods, MemberProtocol.CONSUMER, static=True), timeout=90,
                   what="the static members on the consumer protocol")
    finally:
        controller.close()


# -- a rollout that cannot complete ----------------------------------------------------------------------------

def test_a_stalled_rollout_fails_with_its_reason_and_rolling_back_restores(
        kube_namespace: KubeNamespace, bootstrap: str, topic: str, admin: KafkaAdmin, controllers: RegistryFile,
        monkeypatch: pytest.MonkeyPatch, unique) -> None:
    """An application that exits at once on the consumer protocol (its new pod crash-loops): roll("consumer") fails
    with the Deployment's ProgressDeadlineExceeded and the crashing pod's state; roll("classic"), the way back,
    completes, and the old pods (maxUnavailable 0) never stopped: the group kept its classic members throughout."""
    ns = kube_namespace
    group = unique("k8s-group")
    # minReadySeconds: a pod that crashes right after its start never counts as available (as in production)
    ns.create(on_consumer_protocol(consumer_app(APP, bootstrap=bootstrap, group_id=group, topics=[topic], replicas=2,
                                                progress_deadline_seconds=6, min_ready_seconds=2), "exit 3"))
    conn = connect(monkeypatch, unique("k8s_conn").replace("-", "_"), ns.admin_connection)
    controller = register(controllers, unique, controller_target(APP, kind="Deployment", conn_id=conn,
                                                                  namespace=ns.name))
    try:
        first = wait_until(lambda: ready_pods(ns, 2), timeout=60, what="2 ready pods")
        wait_until(lambda: joined(admin, group, first, MemberProtocol.CLASSIC), timeout=60, what="classic members")
        with pytest.raises(ControllerError) as failed:
            controller.roll("consumer")
        message = str(failed.value)
        assert failed.value.step == "roll" and failed.value.retriable is False
        assert "ProgressDeadlineExceeded" in message and "last exit code 3" in message, message
        assert set(first) <= set(pod_names(ns)), "the old pods still run"

        controller.roll("classic")
        assert env_value(ns) == "classic"
        assert ready_pods(ns, 2) == first, "the old ReplicaSet's pods are the application again"
        group_now = joined(admin, group, first, MemberProtocol.CLASSIC)
        assert group_now is not None, "the classic members never left"
    finally:
        controller.close()


# -- RBAC ---------------------------------------------------------------------------------------------------------

def role_rules(drop_patch: bool = False) -> list[dict]:
    rules = []
    for group, resources, verbs in ROLE_RULES:
        kept = [v for v in verbs if not (drop_patch and v == "patch")]
        rules.append({"apiGroups": [group], "resources": list(resources), "verbs": kept})
    return rules


def test_the_documented_role_suffices_and_without_patch_nothing_is_scaled(
        kube_namespace: KubeNamespace, bootstrap: str, topic: str, admin: KafkaAdmin, controllers: RegistryFile,
        monkeypatch: pytest.MonkeyPatch, unique) -> None:
    """A ServiceAccount bound to exactly ROLE_RULES checks, stops, starts, rolls and reads status and config; one
    without ``patch`` is told which permissions it lacks at check and at stop, and the workload is untouched; one
    whose Role is in another namespace is told so too."""
    ns = kube_namespace
    group = unique("k8s-group")
    ns.create(consumer_app(APP, bootstrap=bootstrap, group_id=group, topics=[topic], replicas=1))
    wait_until(lambda: ready_pods(ns, 1), timeout=60, what="1 ready pod")
    allowed = connect(monkeypatch, unique("k8s_sa").replace("-", "_"),
                      ns.service_account_connection("kip848-controller", role_rules()))
    no_patch = connect(monkeypatch, unique("k8s_ro").replace("-", "_"),
                       ns.service_account_connection("kip848-readonly", role_rules(drop_patch=True)))
    no_role = connect(monkeypatch, unique("k8s_none").replace("-", "_"),
                      ns.service_account_connection("kip848-nobody", None))

    refused = register(controllers, unique, controller_target(APP, kind="Deployment", conn_id=no_patch,
                                                               namespace=ns.name))
    try:
        with pytest.raises(ControllerError) as failed:
            refused.check()
        assert "may not patch deployments (apps), patch deployments/scale (apps)" in str(failed.value)
        assert failed.value.retriable is False and "RBAC" in failed.value.remedy
        with pytest.raises(ControllerError) as failed:
            refused.stop()
        assert failed.value.step == "stop" and "nothing was changed" in str(failed.value)
        assert ns.apps.read_namespaced_deployment(APP, ns.name).spec.replicas == 1
        assert len(refused.status().running) == 1, "reading is allowed: status works"
    finally:
        refused.close()

    nobody = register(controllers, unique, controller_target(APP, kind="Deployment", conn_id=no_role,
                                                              namespace=ns.name))
    try:
        with pytest.raises(ControllerError) as failed:
            nobody.stop()
        assert "forbidden (403)" in str(failed.value) and "cannot get resource \"deployments\"" in str(failed.value)
        assert ns.apps.read_namespaced_deployment(APP, ns.name).spec.replicas == 1
    finally:
        nobody.close()

    controller = register(controllers, unique, controller_target(APP, kind="Deployment", conn_id=allowed,
                                                                  namespace=ns.name))
    try:
        assert "may stop, start and roll it" in controller.check()
        assert controller.config("consumer").properties["group.protocol"] == "consumer"
        assert controller.stop()["instances_gone"] is True
        pods = controller.start("consumer", expected=1)["platform"]["pods"]
        wait_until(lambda: joined(admin, group, pods, MemberProtocol.CONSUMER), timeout=60, what="consumer member")
        rolled = controller.roll("classic")["platform"]["pods"]
        wait_until(lambda: joined(admin, group, rolled, MemberProtocol.CLASSIC), timeout=90, what="classic member")
    finally:
        controller.close()


# -- bad input ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, words", [
    ({"workload": "deployment/no-such-app"}, 'deployments.apps "no-such-app" not found'),
    ({"workload": "deployment", "selector": "app=nothing"}, "matches 0 deployments"),
    ({"protocol_env": "KAFKA_GROUP_PROTOCOL"}, "has no env var 'KAFKA_GROUP_PROTOCOL'"),
    ({"container": "sidecar"}, "has no container 'sidecar'"),
    ({"protocol_env": "POD_NAME"}, "takes its value from elsewhere"),
])
def test_a_wrong_target_is_refused_before_anything_is_scaled(
        kube_namespace: KubeNamespace, bootstrap: str, topic: str, controllers: RegistryFile,
        monkeypatch: pytest.MonkeyPatch, unique, change: dict, words: str) -> None:
    ns = kube_namespace
    ns.create(consumer_app(APP, bootstrap=bootstrap, group_id=unique("k8s-group"), topics=[topic], replicas=1))
    pods = wait_until(lambda: ready_pods(ns, 1), timeout=60, what="1 ready pod")
    conn = connect(monkeypatch, unique("k8s_conn").replace("-", "_"), ns.admin_connection)
    target = controller_target(APP, kind="Deployment", conn_id=conn, namespace=ns.name)
    target.update(change)
    controller = register(controllers, unique, target)
    try:
        for step in (controller.check, controller.stop, lambda: controller.start("consumer"),
                     lambda: controller.roll("consumer")):
            with pytest.raises(ControllerError) as failed:
                step()
            assert words in str(failed.value) and failed.value.retriable is False, str(failed.value)
        deployment = ns.apps.read_namespaced_deployment(APP, ns.name)
        assert deployment.spec.replicas == 1 and env_value(ns) == "classic"
        assert REPLICAS_ANNOTATION not in (deployment.metadata.annotations or {})
        assert ready_pods(ns, 1) == pods, "nothing was restarted"
    finally:
        controller.close()


def test_a_paused_deployment_is_not_started_or_rolled(kube_namespace: KubeNamespace, bootstrap: str, topic: str,
                                                      controllers: RegistryFile, monkeypatch: pytest.MonkeyPatch,
                                                      unique) -> None:
    """A Deployment paused by its owner would take no template change: start and roll say so before patching
    anything (the env var keeps its value), while stop, which only scales, still works."""
    ns = kube_namespace
    ns.create(consumer_app(APP, bootstrap=bootstrap, group_id=unique("k8s-group"), topics=[topic], replicas=1))
    wait_until(lambda: ready_pods(ns, 1), timeout=60, what="1 ready pod")
    ns.apps.patch_namespaced_deployment(APP, ns.name, {"spec": {"paused": True}})  # kubectl rollout pause
    conn = connect(monkeypatch, unique("k8s_conn").replace("-", "_"), ns.admin_connection)
    controller = register(controllers, unique, controller_target(APP, kind="Deployment", conn_id=conn,
                                                                  namespace=ns.name))
    try:
        with pytest.raises(ControllerError) as failed:
            controller.roll("consumer")
        assert "is paused (spec.paused)" in str(failed.value) and "rollout resume" in failed.value.remedy
        assert env_value(ns) == "classic" and len(pod_names(ns)) == 1
        assert controller.stop()["instances_gone"] is True
        with pytest.raises(ControllerError) as failed:
            controller.start("consumer")
        assert "is paused" in str(failed.value) and env_value(ns) == "classic"
    finally:
        controller.close()


# -- instance verdicts from Kubernetes -----------------------------------------------------------------------------

def test_a_pod_deleted_by_hand_is_lost_and_a_crash_loop_is_a_restart(
        kube_namespace: KubeNamespace, bootstrap: str, topic: str, controllers: RegistryFile,
        monkeypatch: pytest.MonkeyPatch, unique) -> None:
    """The baseline after a start; a pod deleted by hand is named gone (its replacement is a new instance), and an
    application that crashes after the change is named restarted: both facts from the pods, while the broker may
    still list the old members."""
    ns = kube_namespace
    group = unique("k8s-group")
    # on the consumer protocol the application dies a second after it starts: a crash loop the platform heals
    ns.create(on_consumer_protocol(consumer_app(APP, bootstrap=bootstrap, group_id=group, topics=[topic], replicas=2),
                                   "sleep 1 && exit 3"))
    conn = connect(monkeypatch, unique("k8s_conn").replace("-", "_"), ns.admin_connection)
    controller = register(controllers, unique, controller_target(APP, kind="Deployment", conn_id=conn,
                                                                  namespace=ns.name))
    try:
        wait_until(lambda: ready_pods(ns, 2), timeout=60, what="2 ready pods")
        baseline = controller.status()
        victim = baseline.running[0].name
        ns.core.delete_namespaced_pod(victim, ns.name)
        lost = wait_until(lambda: lost_instances(controller.status(), baseline), timeout=60,
                          what="the deleted pod named lost")
        assert any(victim in line and "is gone" in line for line in lost), lost
        wait_until(lambda: ready_pods(ns, 2), timeout=60, what="the replacement pod ready")

        original = {i.name for i in controller.status().running}
        ns.apps.patch_namespaced_deployment(APP, ns.name, {"spec": {"template": {"spec": {"containers": [
            {"name": "consumer", "env": [{"name": PROTOCOL_ENV, "value": "consumer"}]}]}}}})

        def first_sight() -> ApplicationStatus | None:  # the baseline: a pod of the new template, not restarted yet
            status = controller.status()
            return status if any(i.name not in original and i.restarts == 0 for i in status.running) else None

        start = wait_until(first_sight, timeout=60, interval=0.1, what="a pod of the new template")
        assert isinstance(start, ApplicationStatus)
        problems = wait_until(lambda: [p for p in instance_problems(controller.status(), expected=2, baseline=start)
                                       if "restarted" in p], timeout=60, what="the new pod's restart named")
        assert any(name in " ".join(problems) for name in {i.name for i in start.running} - original), problems
    finally:
        controller.close()



# -- the pod log --------------------------------------------------------------------------------------------------

def _started(log, pod: str) -> bool:
    return any(line.startswith("started group=") and f"client.id={pod}" in line for line in log.lines)


def test_a_pods_log_is_its_containers_output_and_a_restart_gives_the_previous_lines_first(
        kube_namespace: KubeNamespace, bootstrap: str, topic: str, controllers: RegistryFile,
        monkeypatch: pytest.MonkeyPatch, unique) -> None:
    """``logs()`` through the API server's ``pods/log``, which the API server proxies over TLS to the node agent's
    kubelet API (harness/kip848_harness/kube_node_logs.py): the consumer's own lines (its start banner with the
    client library's release, its ``started`` line under the pod's name), bounded by ``max_bytes`` to the newest
    whole lines; once the container crashed and restarted, the previous container's last lines (why it ended)
    come first, then the running one's."""
    ns = kube_namespace
    group = unique("k8s-log-group")
    ns.create(consumer_app(APP, bootstrap=bootstrap, group_id=group, topics=[topic], replicas=1, kind="StatefulSet",
                           extra_args=["--exit-after-s", "6"]))
    conn = connect(monkeypatch, unique("k8s_conn").replace("-", "_"), ns.admin_connection)
    controller = register(controllers, unique, controller_target(APP, kind="StatefulSet", conn_id=conn,
                                                                  namespace=ns.name))
    pod = f"{APP}-0"
    try:
        wait_until(lambda: ready_pods(ns, 1), timeout=60, what="the pod ready")
        log = wait_until(lambda: (lg := controller.logs(pod)).known and _started(lg, pod) and lg, timeout=30,
                         interval=0.2, what="the consumer's started line in its pod log")
        print(f"pod log: {len(log.lines)} lines from {log.source}: {list(log.lines)}")
        assert "client library: confluent-kafka" in log.lines[0] and "librdkafka" in log.lines[0], log.lines
        assert log.source.startswith(f"pod log {ns.name}/{pod} container consumer"), log.source
        assert not log.truncated and all(not line.startswith(("b'", 'b"')) for line in log.lines), log.lines
        assert log.lines[1].startswith("started group=") and f"group={group}" in log.lines[1], log.lines
        # bounded: the newest whole lines within max_bytes (the banner before them left out)
        bound = len(log.lines[1].encode()) + 2
        small = controller.logs(pod, max_bytes=bound)
        assert small.known and small.lines == (log.lines[1],), small
        assert sum(len(line.encode()) + 1 for line in small.lines) <= bound

        # the container crashes 6 s after it starts; its successor's log comes after the crashed one's last lines
        def restarted():
            found = controller.logs(pod)
            crashed = [i for i, line in enumerate(found.lines) if line.startswith("exiting after 6 s")]
            return found if found.known and crashed and _started(found, pod) and any(
                line.startswith("started group=") for line in found.lines[crashed[0]:]) else None

        again = wait_until(restarted, timeout=60, interval=0.3, what="the restarted container's log")
        print(f"after the restart: {list(again.lines)} ({again.source})")
        assert "previous container's last lines" in again.source, again.source
        crash = next(i for i, line in enumerate(again.lines) if line.startswith("exiting after 6 s"))
        assert any(line.startswith("client library:") for line in again.lines[crash + 1:]), again.lines
    finally:
        controller.close()


def test_each_pods_client_release_is_read_from_its_own_log(
        kube_namespace: KubeNamespace, bootstrap: str, topic: str, controllers: RegistryFile,
        monkeypatch: pytest.MonkeyPatch, unique) -> None:
    """The client-release check's source on Kubernetes (controllers/releases.py ``logged_releases``): each running
    pod's log from its start, read through ``pods/log``, names the librdkafka release the consumer runs (its
    start banner), with the line it was read from and the pod log it came from; nothing is declared."""
    ns = kube_namespace
    ns.create(consumer_app(APP, bootstrap=bootstrap, group_id=unique("k8s-rel-group"), topics=[topic], replicas=2,
                           kind="StatefulSet"))
    conn = connect(monkeypatch, unique("k8s_conn").replace("-", "_"), ns.admin_connection)
    controller = register(controllers, unique, controller_target(APP, kind="StatefulSet", conn_id=conn,
                                                                  namespace=ns.name))
    runs = confluent_kafka.libversion()[0]
    binding = confluent_kafka.version()  # a (text, number) pair in older releases, the text alone in 2.16
    binding = binding[0] if isinstance(binding, tuple) else binding
    try:
        pods = wait_until(lambda: ready_pods(ns, 2), timeout=60, what="2 ready pods")
        releases = wait_until(
            lambda: (found := logged_releases(controller, controller.status())) is not None
            and len(found) == 2 and all(r["version"] for r in found) and found,
            timeout=30, interval=0.3, what="both pods' releases read from their logs")
        print("releases:", releases)
        assert sorted((r["instance"], r["library"], r["version"]) for r in releases) == [
            (pod, "librdkafka", runs) for pod in pods]
        for r in releases:
            # the banner line itself, as the consumer printed it (not the repr of the log's bytes)
            assert r["evidence"] == f"client library: confluent-kafka {binding}, librdkafka {runs}", r
            assert str(r["source"]).startswith(f"pod log {ns.name}/{r['instance']} container consumer"), r
    finally:
        controller.close()
