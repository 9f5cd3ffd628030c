"""Kubernetes manifests of the test applications, as a team would write them for the Kubernetes controller.

A consumer application (``kip848_harness.consumer_app``: real confluent-kafka
consumers) as a Deployment or a StatefulSet, reading ``group.protocol`` where
its team put it: an env var (``GROUP_PROTOCOL``), or a properties file in a
ConfigMap mounted at ``/etc/app`` (``protocol_source="configmap"``). A
StatefulSet's pods use their names as ``group.instance.id`` (static
membership, ``KAFKA_GROUP_INSTANCE_ID`` from ``metadata.name``). Pods run on
the test control plane's node agent (:mod:`.kube_node`), whose "image" is the
command: this Python and the consumer module.

Nothing in the product imports this module (see ``kip848_harness/__init__``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

CONSUMER_APP = "kip848_harness.consumer_app"
CONFIG_MOUNT = "/etc/app"
#: the env var the manifests' applications read group.protocol from
PROTOCOL_ENV = "GROUP_PROTOCOL"
#: the env var a consumer pod takes its client.id from: its own pod name (a fieldRef)
CLIENT_ID_ENV = "KAFKA_CLIENT_ID"
CONTAINER = "consumer"


def consumer_app_config_map(name: str, *, bootstrap: str, group_id: str, protocol: str) -> dict[str, Any]:
    """The ConfigMap of a consumer application that reads its client properties (and group.protocol) from
    ``client.properties`` mounted at /etc/app."""
    properties = (f"bootstrap.servers={bootstrap}\ngroup.id={group_id}\ngroup.protocol={protocol}\n"
                  "enable.auto.commit=false\nauto.offset.reset=earliest\n")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"client.properties": properties}}


def consumer_app(name: str, *, bootstrap: str, group_id: str, topics: list[str], replicas: int = 2,
                 kind: str = "Deployment", protocol: str = "classic", protocol_source: str = "env",
                 config_map: str | None = None, record_dir: str | None = None, extra_args: list[str] | None = None,
                 progress_deadline_seconds: int = 600, min_ready_seconds: int = 0,
                 termination_grace_seconds: int = 10, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """A Deployment or StatefulSet of ``replicas`` consumer instances of ``group_id``.

    ``protocol_source`` ``env``: ``--protocol $(GROUP_PROTOCOL)`` with the env var set to ``protocol``;
    ``configmap``: ``--config-file /etc/app/client.properties`` from ConfigMap ``config_map`` (see
    :func:`consumer_app_config_map`). ``record_dir``: each pod writes the records it processed to
    ``<record_dir>/<pod>.jsonl``. ``extra_args``: more consumer_app arguments (``--exit-after-s 1``: a crash
    loop); ``extra_env``: more env vars (literal values; an argument may name one as ``$(NAME)``)."""
    labels = {"app": name}
    args = [sys.executable, "-m", CONSUMER_APP, "--topics", ",".join(topics), "--client-id", f"$({CLIENT_ID_ENV})"]
    # client.id is the pod's name (declared to the controller by controller_target's env_properties): what pairs a
    # member with its pod here, where every pod shares the node's address
    env: list[dict[str, Any]] = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                 {"name": CLIENT_ID_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    env += [{"name": k, "value": v} for k, v in (extra_env or {}).items()]
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if protocol_source == "env":
        env.append({"name": PROTOCOL_ENV, "value": protocol})
        args += ["--bootstrap-servers", bootstrap, "--group", group_id, "--protocol", f"$({PROTOCOL_ENV})"]
    elif protocol_source == "configmap":
        if config_map is None:
            raise ValueError("protocol_source configmap needs config_map")
        volumes.append({"name": "client-config", "configMap": {"name": config_map}})
        mounts.append({"name": "client-config", "mountPath": CONFIG_MOUNT})
        args += ["--config-file", f"{CONFIG_MOUNT}/client.properties"]
    else:
        raise ValueError(f"protocol_source must be env or configmap, not {protocol_source!r}")
    if kind == "StatefulSet":
        env.append({"name": "KAFKA_GROUP_INSTANCE_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
        args += ["--instance-id", "$(KAFKA_GROUP_INSTANCE_ID)"]
    if record_dir is not None:
        args += ["--record-file", f"{record_dir}/$(POD_NAME).jsonl"]
    args += list(extra_args or ())
    container = {"name": CONTAINER, "image": "kip848/consumer-app:local", "command": args, "env": env,
                 "volumeMounts": mounts}
    template = {"metadata": {"labels": labels},
                "spec": {"containers": [container], "volumes": volumes,
                         "terminationGracePeriodSeconds": termination_grace_seconds}}
    spec: dict[str, Any] = {"replicas": replicas, "selector": {"matchLabels": labels}, "template": template,
                            "minReadySeconds": min_ready_seconds}
    if kind == "Deployment":
        spec["progressDeadlineSeconds"] = progress_deadline_seconds
        spec["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
        api_version = "apps/v1"
    elif kind == "StatefulSet":
        spec["serviceName"] = name
        spec["podManagementPolicy"] = "Parallel"
        api_version = "apps/v1"
    else:
        raise ValueError(f"kind must be Deployment or StatefulSet, not {kind!r}")
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "labels": labels}, "spec": spec}


def wordcount_app(name: str, *, java_command: list[str], config_map: str, replicas: int = 1,
                  termination_grace_seconds: int = 30) -> dict[str, Any]:
    """A Deployment of Kafka's WordCountDemo (a real Streams topology), reading its properties (group.protocol
    among them) from key ``wordcount.properties`` of ConfigMap ``config_map`` mounted at /etc/app.
    ``java_command`` is the JVM's argument list up to the main class (the cached Kafka release's classpath); its
    ``state.dir`` may be relative: the pod's directory is its working directory."""
    labels = {"app": name}
    container = {"name": "streams", "image": "kip848/wordcount:local",
                 "command": [*java_command, f"{CONFIG_MOUNT}/wordcount.properties"],
                 "volumeMounts": [{"name": "config", "mountPath": CONFIG_MOUNT}]}
    template = {"metadata": {"labels": labels},
                "spec": {"containers": [container], "volumes": [{"name": "config", "configMap": {"name": config_map}}],
                         "terminationGracePeriodSeconds": termination_grace_seconds}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": template,
                     "strategy": {"type": "Recreate"}}}


def on_consumer_protocol(manifest: dict[str, Any], then: str) -> dict[str, Any]:
    """Make the manifest's application do ``then`` (a shell command; ``{command}`` in it is the container's own
    command) instead of its command when it is started with ``GROUP_PROTOCOL=consumer``: a planted failure of
    the new protocol (``exit 3``: it never comes up; ``{command} --exit-after-s 5``: it joins, then crashes)."""
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    command = " ".join(json.dumps(a) for a in container["command"])
    container["command"] = ["sh", "-c", f'[ "${PROTOCOL_ENV}" = consumer ] && {then.replace("{command}", command)}; '
                                        f"exec {command}"]
    return manifest


def controller_target(name: str, *, kind: str, conn_id: str, namespace: str, protocol_source: str = "env",
                      config_map: str | None = None, **extra: Any) -> dict[str, Any]:
    """The registry target of the ``kubernetes`` controller for :func:`consumer_app` ``name``."""
    target: dict[str, Any] = {"kubernetes_conn_id": conn_id, "namespace": namespace,
                              "workload": f"{kind.lower()}/{name}", "container": CONTAINER, "client": "librdkafka"}
    if protocol_source == "env":
        target["protocol_env"] = PROTOCOL_ENV
    else:
        target["protocol_config_map"] = {"name": config_map, "key": "client.properties",
                                         "property": "group.protocol"}
        target["properties_config_map"] = {"name": config_map, "key": "client.properties"}
    properties: dict[str, Any] = {CLIENT_ID_ENV: "client.id"}
    if kind == "StatefulSet":
        properties["KAFKA_GROUP_INSTANCE_ID"] = "group.instance.id"
    target["env_properties"] = {**properties, **(extra.pop("env_properties", None) or {})}
    target.update(extra)
    return target


__all__ = ["CLIENT_ID_ENV", "CONFIG_MOUNT", "CONTAINER", "PROTOCOL_ENV", "consumer_app", "consumer_app_config_map",
           "controller_target", "on_consumer_protocol", "wordcount_app"]
