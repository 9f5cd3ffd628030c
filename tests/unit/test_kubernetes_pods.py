"""The pure rules of the roll by pod (controllers/kubernetes_pods.py): which StatefulSet ordinal a pod name is, and
which protocol a pod was created with (its own spec, never the template's)."""

from __future__ import annotations

import pytest

from airflow_provider_kip848.controllers.kubernetes_pods import ordinal, pod_protocol


@pytest.mark.parametrize("pod, expected", [
    ("orders-0", 0), ("orders-12", 12), ("orders-01", None), ("orders-", None), ("orders-x-1", None),
    ("other-1", None), ("orders-1-2", None), ("orders-abc12-xyz", None),
])
def test_ordinal_is_the_statefulsets_own_naming_only(pod, expected):
    assert ordinal("orders", pod) == expected


def test_a_workload_name_with_dots_is_not_a_pattern():
    assert ordinal("a.b", "a.b-3") == 3 and ordinal("a.b", "axb-3") is None


def test_pod_protocol_reads_the_pods_own_container_env():
    pod = {"spec": {"containers": [
        {"name": "sidecar", "env": [{"name": "GROUP_PROTOCOL", "value": "consumer"}]},
        {"name": "consumer", "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                     {"name": "GROUP_PROTOCOL", "value": "classic"}]}]}}
    assert pod_protocol(pod, "consumer", "GROUP_PROTOCOL") == "classic"
    assert pod_protocol(pod, "consumer", "OTHER") is None
    assert pod_protocol(pod, "missing", "GROUP_PROTOCOL") is None
