"""kip848_consumer_rolling_upgrade through the ``kubernetes`` controller, pod by pod: a StatefulSet of static members
on the session's control plane (tests/conftest.py ``kube``) moves to the consumer protocol one pod at a time behind
the first-instance gate, and the approval says how each pod moves (no longer "the platform's own rolling restart:
no first-instance gate")."""

from __future__ import annotations

from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import create_topics, produce
from kip848_harness.kube_workloads import consumer_app, controller_target
from tests.conftest import wait_until
from tests.e2e.helpers import approve, run_dag, shown, state
from tests.e2e.test_rolling_by_instance import conf, settled

DAG = "kip848_consumer_rolling_upgrade"
APP = "orders"


def test_a_statefulset_is_upgraded_pod_by_pod_behind_the_gate(airflow_db, kafka_conn, bootstrap, unique, tmp_path,
                                                               controllers, kube_namespace, monkeypatch):
    ns = kube_namespace
    topic, group = unique("k8s-roll-in"), unique("k8s-roll-app")
    create_topics(bootstrap, {topic: 4})
    produce(bootstrap, topic, (f"v{i}" for i in range(40)), keys=(str(i) for i in range(40)))
    ns.create(consumer_app(APP, bootstrap=bootstrap, group_id=group, topics=[topic], replicas=2, kind="StatefulSet"))
    conn_id = unique("k8s_conn").replace("-", "_")
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", ns.admin_connection)
    name = controllers.add(unique("k8s-ctl"), "kubernetes",
                           controller_target(APP, kind="StatefulSet", conn_id=conn_id, namespace=ns.name),
                           description="the test's static consumers, a StatefulSet on the test control plane")
    admin = KafkaAdmin(ClientSettings(bootstrap))
    try:
        wait_until(lambda: settled(admin, group, "classic", 2), timeout=120, what="2 static classic pods caught up")
        before = {p.metadata.name: p.metadata.uid
                  for p in ns.core.list_namespaced_pod(ns.name, label_selector=f"app={APP}").items}
        run, answers, report = run_dag(DAG, conf(group, tmp_path, name), decide=approve)
        assert state(run) == "success" and report["outcome"] == "migrated", report
        body = shown(answers[0]["body"])
        assert "the first one must run consumer within 5 min before any other restarts" in body, body
        assert "each instance: one pod at a time, highest ordinal first" in body, body
        assert "no first-instance gate" not in body
        rolled = report["results"]["rolled"]
        assert rolled["mode"] == "by_instance", rolled
        assert [r["instance"] for r in rolled["instances"]] == [f"{APP}-1", f"{APP}-0"]
        assert all(r["started"]["platform"]["replaced_uid"] == before[r["instance"]] for r in rolled["instances"])
        assert rolled["gate"]["groups"][group], rolled["gate"]
        upgraded = admin.describe_group(group)
        assert upgraded.type is GroupType.CONSUMER
        assert sorted((m.instance_id, m.protocol.value) for m in upgraded.members) == [
            (f"{APP}-0", "consumer"), (f"{APP}-1", "consumer")]
        sts = ns.apps.read_namespaced_stateful_set(APP, ns.name)
        assert sts.spec.update_strategy.rolling_update.partition == 0
    finally:
        admin.close()
