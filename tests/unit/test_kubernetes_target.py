"""The ``kubernetes`` controller's target, checked when the registry entry is resolved (no cluster needed), and
the node agent's ``$(VAR)`` expansion. What a target means on a real cluster is tested against the control plane
(tests/integration/test_kubernetes_controller.py)."""

from __future__ import annotations

import pytest

from airflow_provider_kip848.controllers import ControllerRegistryInvalid, PlatformError
from airflow_provider_kip848.controllers.kubernetes import KubernetesController, label_selector
from airflow_provider_kip848.controllers.registry import ControllerRegistry, dumps
from kip848_harness.kube_node import expand

BASE = {"workload": "deployment/orders", "namespace": "orders", "protocol_env": "KAFKA_GROUP_PROTOCOL"}


def resolve(**target):
    text = dumps({"orders": {"kind": "kubernetes", "target": target}})
    return ControllerRegistry.from_text(text, "test").resolve("orders")


def test_a_valid_target_resolves_and_describes_its_steps_without_reaching_the_cluster() -> None:
    named = resolve(**BASE, env_properties={"KAFKA_SESSION_TIMEOUT_MS": {"property": "session.timeout.ms",
                                                                         "protocols": ["classic"]}})
    assert isinstance(named.controller, KubernetesController) and named.kind == "kubernetes"
    actions = named.controller.actions("consumer")
    assert actions["stop"].startswith("record the replicas of deployment/orders in namespace orders (annotation "
                                      "kip848.io/replicas-before-stop), scale it to 0")
    assert "set group.protocol=consumer in env KAFKA_GROUP_PROTOCOL" in actions["start"]
    assert "ProgressDeadlineExceeded" in actions["roll"]
    assert named.can_roll()


@pytest.mark.parametrize("target, words", [
    ({**BASE, "protocol_config_map": {"name": "c", "key": "k"}}, "protocol_env (an env var of the container) or "
                                                                 "protocol_config_map"),
    ({"workload": "deployment/orders"}, "exactly one"),
    ({**BASE, "workload": "pod/orders"}, "does not match"),
    ({**BASE, "workload": "deployment/orders", "selector": "app=orders"}, "not both and not neither"),
    ({**BASE, "workload": "statefulset"}, "not both and not neither"),
    ({"workload": "deployment/orders", "protocol_config_map": {"name": "c"}}, "key required"),
    ({"workload": "deployment/orders", "protocol_config_map": {"name": "c", "key": "k", "file": "x"}},
     "unknown file"),
    ({**BASE, "env_properties": {"X": {"property": "session.timeout.ms", "protocols": ["clasic"]}}},
     "a non-empty list of classic, consumer, streams"),
    ({**BASE, "env_properties": {"X": ""}}, "env_properties.X"),
    ({**BASE, "namespace": "Orders_NS"}, "does not match"),
    ({**BASE, "stop_timeout_seconds": 0}, "at least 1"),
    ({**BASE, "commands": {"stop": "x"}}, "undeclared argument(s) commands"),
])
def test_a_target_that_cannot_be_right_is_refused_when_resolved(target: dict, words: str) -> None:
    with pytest.raises(ControllerRegistryInvalid) as refused:
        resolve(**target)
    assert words in str(refused.value), str(refused.value)


def test_a_run_sets_nothing_of_a_kubernetes_target() -> None:
    registry = ControllerRegistry.from_text(dumps({"orders": {"kind": "kubernetes", "target": BASE}}), "test")
    with pytest.raises(Exception, match="undeclared argument"):
        registry.resolve("orders", {"namespace": "other"})


def test_label_selector_is_what_kubectl_takes() -> None:
    assert label_selector({"matchLabels": {"app": "orders", "tier": "consumer"}, "matchExpressions": [
        {"key": "track", "operator": "In", "values": ["stable", "canary"]},
        {"key": "legacy", "operator": "DoesNotExist"}, {"key": "zone", "operator": "Exists"},
        {"key": "env", "operator": "NotIn", "values": ["dev"]}]}) == \
        "app=orders,tier=consumer,track in (stable,canary),!legacy,zone,env notin (dev)"
    assert label_selector(None) == ""


@pytest.mark.parametrize("selector", [None, {}, {"matchLabels": {}}, {"matchLabels": {}, "matchExpressions": []}])
def test_an_empty_workload_selector_never_selects_every_pod(selector) -> None:
    """An empty selector lists every pod of the namespace: the waits would count other applications' pods as the
    workload's (issue 31.1). Refused before a pod is listed."""
    controller = resolve(**BASE).controller
    with pytest.raises(PlatformError, match="has an empty selector: its pods cannot be told apart") as refused:
        controller._selector({"spec": {"selector": selector}})
    assert not refused.value.retriable and refused.value.remedy


def test_expand_follows_kubernetes() -> None:
    env = {"POD_NAME": "orders-0", "P": "classic"}
    assert expand("--client-id=$(POD_NAME) --protocol $(P)", env) == "--client-id=orders-0 --protocol classic"
    assert expand("$(UNDEFINED) stays", env) == "$(UNDEFINED) stays"
    assert expand("$$(POD_NAME) is escaped", env) == "$(POD_NAME) is escaped"


@pytest.mark.parametrize("selector", ["", " ", "\t"])
def test_a_blank_workload_selector_is_refused_never_lists_the_namespace(selector) -> None:
    """``workload: deployment`` with a blank label selector used to list every Deployment of the namespace (and pick
    the only one, silently): refused when the registry is read."""
    with pytest.raises(ControllerRegistryInvalid, match="selector must select something"):
        resolve(**{**BASE, "workload": "deployment", "selector": selector})
