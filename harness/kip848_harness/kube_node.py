"""A node agent for the test control plane: each pod bound to its node runs as local processes.

A kubelet needs a container runtime and images; this machine has neither an
image registry nor a writable memory cgroup. What the Kubernetes controller's
verdicts rest on is not the runtime but the pod lifecycle the API shows: pods
created by a ReplicaSet or a StatefulSet, bound to a node, Running and Ready
when their process is up, restarted (``restartCount``, a new ``containerID``)
when it exits, ``CrashLoopBackOff`` between restarts, stopped with SIGTERM and
the pod's grace period when deleted. This agent gives exactly that lifecycle to
real processes, so real consumers join real Kafka groups as pods come and go::

    python -m kip848_harness.kube_node --kubeconfig admin.kubeconfig --node kip848-node-0 \\
        --workdir /tmp/node

What it does, like a kubelet:

* registers its Node (Ready) and binds every unscheduled pod to itself (the
  ``binding`` subresource, what kube-scheduler does: there is one node);
* runs each container's ``command`` + ``args`` (``$(VAR)`` expanded) as a
  process in a session of its own, with the container's environment: ``env``
  (``value``, ``valueFrom`` a ConfigMap or Secret key or a pod field),
  ``envFrom`` (ConfigMaps and Secrets, with ``prefix``); a missing ConfigMap is
  ``CreateContainerConfigError`` until it appears;
* writes ConfigMap and Secret volumes into the pod's directory and maps each
  ``mountPath`` there: an argument or env value that names a path under a
  mount names the file the agent wrote (there is no mount namespace);
* reports the pod ``Running`` with ``Ready`` from its processes (a
  ``readinessProbe``'s ``initialDelaySeconds`` is honoured; probe commands are
  not run), ``restartCount``, ``containerID`` (new per process), the last
  termination's exit code, and ``CrashLoopBackOff`` while it waits to restart
  an exited container (``restartPolicy`` ``Always``; ``OnFailure``/``Never`` end
  the pod ``Succeeded`` or ``Failed``);
* on deletion sends SIGTERM to the process group, SIGKILL when the pod's grace
  period ends, and only then removes the pod object (a force-deleted pod's
  processes are killed at once);
* serves the kubelet API's ``/containerLogs`` over HTTPS (:mod:`.kube_node_logs`), registered in the Node's
  ``daemonEndpoints``, from each container's log file: the API server's ``pods/log`` (``kubectl logs``, the
  Kubernetes controller's ``logs()``) reads real pod logs, ``previous`` included.

Not done: images (``image`` is only reported), probes' commands, resource
limits, networking (every pod's IP is 127.0.0.1), live updates of mounted
ConfigMaps (the Kubernetes controller rolls pods with a hash annotation
instead, as production deployments do). docs/controllers.md says so.

Why over 500 lines: it is one state machine, a pod's lifecycle as a kubelet reports it (bind, start, Ready,
exit, CrashLoopBackOff, restart, SIGTERM and the grace period, removal), run by one class whose methods share
one lock over the pods' runtimes and are called from the watch thread and the tending loop alike; the parts that
could stand alone (the environment and volumes of a container, about 100 lines) read the API through the same
client and are used by one method, ``_start``. Split, a reader would follow one pod's life across files; the
launcher of the agent's process (``KubeNode``, 40 lines) stays beside the ``main`` it runs.

Nothing in the product imports this module (see ``kip848_harness/__init__``).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from kip848_harness.kube_node_logs import LogServer, LogSpans
from kip848_harness.processes import die_with_parent, send_signal

log = logging.getLogger("kip848.kube_node")
HOST_IP = "127.0.0.1"
#: kubelet's back-off is 10 s doubling to 300 s; the tests' node restarts sooner (same shape, same states)
BACKOFF_SECONDS, BACKOFF_CAP_SECONDS = 1.0, 16.0
#: how often a container blocked on configuration (a ConfigMap not there yet) is tried again
CONFIG_RETRY_SECONDS = 1.0
_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_FIELD_PATH = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: a defined variable is replaced, an undefined one left as written, and
    ``$$`` is a literal ``$``."""
    def repl(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)
    return _VAR_REF.sub(repl, text)


class ConfigMissing(Exception):  # noqa: N818 - a kubelet reason, not an error of the agent
    """A ConfigMap or Secret (or a key of it) that a container needs does not exist (yet)."""


@dataclass
class Container:
    """One container of a pod: its process, restarts and last termination."""

    name: str
    image: str
    process: subprocess.Popen[bytes] | None = None
    log_file: IO[bytes] | None = None
    #: where each incarnation's output begins in the log file (the kubelet API's current and previous log)
    spans: LogSpans | None = None
    restarts: int = 0
    started_at: str | None = None
    started_mono: float = 0.0
    container_id: str = ""
    last_terminated: dict[str, Any] | None = None
    waiting: tuple[str, str] | None = ("ContainerCreating", "")
    next_start: float = 0.0
    finished: bool = False
    exit_code: int | None = None
    ready_delay: float = 0.0

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ready(self) -> bool:
        return self.running() and time.monotonic() - self.started_mono >= self.ready_delay


@dataclass
class PodRuntime:
    """A pod this node runs: its containers, deletion deadline and the status last written."""

    uid: str
    namespace: str
    name: str
    spec: dict[str, Any]
    metadata: dict[str, Any]
    directory: Path
    containers: dict[str, Container] = field(default_factory=dict)
    start_time: str = field(default_factory=_now)
    deleting: bool = False
    kill_at: float | None = None
    reported: dict[str, Any] | None = None
    ready_since: str | None = None
    was_ready: bool = False


class NodeAgent:
    """The agent's loop: a watch of every pod feeds a queue; each turn handles events, then the processes."""

    def __init__(self, api: client.ApiClient, node: str, workdir: Path) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.node = node
        self.workdir = workdir
        self.pods: dict[str, PodRuntime] = {}
        #: pods this node ran and removed: a late event about one never starts it again
        self.removed: set[str] = set()
        self.events: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        self.stopping = threading.Event()
        #: the kubelet API's port (kube_node_logs.LogServer), registered in the Node's daemonEndpoints; 0: none
        self.kubelet_port = 0

    # -- the node ------------------------------------------------------------------------------------------

    def register(self) -> None:
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": self.node, "labels": {"kubernetes.io/hostname": self.node,
                                                           "kubernetes.io/os": "linux",
                                                           "kip848.io/node-agent": "true"}}}
        with contextlib.suppress(ApiException):
            self.core.create_node(body)
        now = _now()
        self.core.patch_node_status(self.node, {"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kip848 node agent: pods run as local processes",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "addresses": [{"type": "InternalIP", "address": HOST_IP}, {"type": "Hostname", "address": self.node}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.kubelet_port}},
            "capacity": {"cpu": "64", "memory": "256Gi", "pods": "250"},
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "250"},
            "nodeInfo": {"kubeletVersion": "kip848-node-agent", "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64", "containerRuntimeVersion": "kip848-processes://1",
                         "osImage": "local processes", "kernelVersion": os.uname().release, "machineID": "",
                         "systemUUID": "", "bootID": ""}}})

    # -- the watch -----------------------------------------------------------------------------------------

    def _watch(self) -> None:
        """List every pod, then watch from that version; start over on any error (a 410 Gone, a dropped
        connection). Events reach the loop as (type, pod dict)."""
        while not self.stopping.is_set():
            try:
                listed = self.core.list_pod_for_all_namespaces()
                seen = set()
                for pod in listed.items:
                    data = self.api.sanitize_for_serialization(pod)
                    seen.add(data["metadata"]["uid"])
                    self.events.put(("SYNC", data))
                self.events.put(("LISTED", {"uids": sorted(seen)}))
                stream = watch.Watch().stream(self.core.list_pod_for_all_namespaces,
                                              resource_version=listed.metadata.resource_version,
                                              timeout_seconds=60)
                for event in stream:
                    if self.stopping.is_set():
                        return
                    self.events.put((event["type"], self.api.sanitize_for_serialization(event["object"])))
            except Exception as exc:  # noqa: BLE001 - the API server restarting, a watch expiring: list again
                if self.stopping.is_set():
                    return
                log.info("pod watch restarts: %s", exc)
                time.sleep(0.5)

    # -- the loop ------------------------------------------------------------------------------------------

    def run(self) -> None:
        self.register()
        threading.Thread(target=self._watch, name="pod-watch", daemon=True).start()
        while not self.stopping.is_set():
            try:
                kind, pod = self.events.get(timeout=0.1)
            except queue.Empty:
                pass
            else:
                self._on_event(kind, pod)
                while True:  # take every queued event before turning to the processes
                    try:
                        kind, pod = self.events.get_nowait()
                    except queue.Empty:
                        break
                    self._on_event(kind, pod)
            for runtime in list(self.pods.values()):
                try:
                    self._tend(runtime)
                except Exception:  # noqa: BLE001 - one pod's failure must not stop the node
                    log.exception("tending pod %s/%s", runtime.namespace, runtime.name)
        self.shutdown()

    def _on_event(self, kind: str, pod: dict[str, Any]) -> None:
        if kind == "LISTED":  # pods gone while the watch was down
            for uid in set(self.pods) - set(pod["uids"]):
                self._forget(self.pods[uid], force=True)
            return
        meta, spec = pod["metadata"], pod.get("spec") or {}
        uid = meta["uid"]
        if kind == "DELETED":
            if uid in self.pods:
                self._forget(self.pods[uid], force=True)
            return
        node = spec.get("nodeName")
        if not node:
            if (spec.get("schedulerName") or "default-scheduler") == "default-scheduler" \
                    and not meta.get("deletionTimestamp"):
                self._bind(meta["namespace"], meta["name"])
            return
        if node != self.node:
            return
        runtime = self.pods.get(uid)
        if runtime is None:
            if uid in self.removed:
                return
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                return  # finished before this agent (re)started: nothing to run
            runtime = PodRuntime(uid=uid, namespace=meta["namespace"], name=meta["name"], spec=spec, metadata=meta,
                                 directory=self.workdir / "pods" / f"{meta['namespace']}_{meta['name']}_{uid[:8]}")
            runtime.directory.mkdir(parents=True, exist_ok=True)
            for c in spec.get("containers") or ():
                delay = float(((c.get("readinessProbe") or {}).get("initialDelaySeconds")) or 0)
                runtime.containers[c["name"]] = Container(name=c["name"], image=str(c.get("image") or ""),
                                                          ready_delay=delay)
            self.pods[uid] = runtime
            log.info("pod %s/%s bound here: %d container(s)", runtime.namespace, runtime.name,
                     len(runtime.containers))
        runtime.metadata = meta
        if meta.get("deletionTimestamp") and not runtime.deleting:
            grace = meta.get("deletionGracePeriodSeconds")
            if grace is None:
                grace = spec.get("terminationGracePeriodSeconds", 30)
            self._terminate(runtime, float(grace))

    def _bind(self, namespace: str, name: str) -> None:
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                "target": {"apiVersion": "v1", "kind": "Node", "name": self.node}}
        try:  # the client cannot read a Binding back (target is required in its model): keep the raw response
            self.core.create_namespaced_pod_binding(name, namespace, body, _preload_content=False)
        except ApiException as exc:
            if exc.status not in (404, 409):  # gone, or bound already
                log.warning("binding %s/%s: %s", namespace, name, exc.reason)

    # -- containers ----------------------------------------------------------------------------------------

    def _config_value(self, kind: str, namespace: str, ref: Mapping[str, Any]) -> dict[str, str] | None:
        """The data of a ConfigMap or Secret (None: it does not exist)."""
        name = ref.get("name", "")
        try:
            obj = (self.core.read_namespaced_config_map(name, namespace) if kind == "configmap"
                   else self.core.read_namespaced_secret(name, namespace))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        if kind == "configmap":
            return dict(obj.data or {})
        return {k: base64.b64decode(v).decode() for k, v in (obj.data or {}).items()}

    def _field(self, runtime: PodRuntime, path: str) -> str:
        meta = runtime.metadata
        simple = {"metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
                  "metadata.uid": meta.get("uid"), "spec.nodeName": self.node,
                  "spec.serviceAccountName": runtime.spec.get("serviceAccountName"),
                  "status.podIP": HOST_IP, "status.hostIP": HOST_IP}
        if path in simple:
            return str(simple[path] or "")
        match = _FIELD_PATH.fullmatch(path)
        if match:
            return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
        raise ConfigMissing(f"fieldRef {path} is not supported by the node agent")

    def _environment(self, runtime: PodRuntime, spec: Mapping[str, Any]) -> dict[str, str]:
        env: dict[str, str] = {}
        ns = runtime.namespace
        for source in spec.get("envFrom") or ():
            for kind, key in (("configmap", "configMapRef"), ("secret", "secretRef")):
                ref = source.get(key)
                if ref:
                    data = self._config_value(kind, ns, ref)
                    if data is None:
                        if ref.get("optional"):
                            continue
                        raise ConfigMissing(f'{kind} "{ref.get("name")}" not found')
                    prefix = source.get("prefix") or ""
                    env.update({prefix + k: v for k, v in data.items()})
        for var in spec.get("env") or ():
            name = var["name"]
            if "valueFrom" not in var or var["valueFrom"] is None:
                env[name] = expand(str(var.get("value") or ""), env)
                continue
            source = var["valueFrom"]
            if source.get("fieldRef"):
                env[name] = self._field(runtime, source["fieldRef"]["fieldPath"])
                continue
            for kind, key in (("configmap", "configMapKeyRef"), ("secret", "secretKeyRef")):
                ref = source.get(key)
                if ref:
                    data = self._config_value(kind, ns, ref)
                    value = None if data is None else data.get(ref.get("key", ""))
                    if value is None:
                        if ref.get("optional"):
                            break
                        raise ConfigMissing(f'couldn\'t find key {ref.get("key")} in {kind} '
                                            f'{ns}/{ref.get("name")}' if data is not None
                                            else f'{kind} "{ref.get("name")}" not found')
                    env[name] = value
                    break
            else:
                if not source.get("fieldRef"):
                    raise ConfigMissing(f"env {name}: only fieldRef, configMapKeyRef and secretKeyRef are supported")
        return env

    def _volumes(self, runtime: PodRuntime, spec: Mapping[str, Any]) -> list[tuple[str, Path]]:
        """Write the ConfigMap and Secret volumes the container mounts; (mountPath, local path), longest first."""
        volumes = {v["name"]: v for v in runtime.spec.get("volumes") or ()}
        mounts = []
        for mount in spec.get("volumeMounts") or ():
            volume = volumes.get(mount["name"]) or {}
            for kind, key in (("configmap", "configMap"), ("secret", "secret")):
                ref = volume.get(key)
                if ref is None:
                    continue
                ref = {**ref, "name": ref.get("name") or ref.get("secretName")}
                data = self._config_value(kind, runtime.namespace, ref)
                if data is None:
                    if ref.get("optional"):
                        data = {}
                    else:
                        raise ConfigMissing(f'{kind} "{ref["name"]}" not found (volume {mount["name"]})')
                target = runtime.directory / "volumes" / mount["name"]
                target.mkdir(parents=True, exist_ok=True)
                items = ref.get("items") or [{"key": k, "path": k} for k in data]
                for item in items:
                    if item["key"] in data:
                        path = target / item["path"]
                        path.parent.mkdir(parents=True, exist_ok=True)
                        path.write_text(data[item["key"]])
                local = target / mount["subPath"] if mount.get("subPath") else target
                mounts.append((mount["mountPath"].rstrip("/") or "/", local))
        return sorted(mounts, key=lambda m: -len(m[0]))

    @staticmethod
    def _mapped(text: str, mounts: list[tuple[str, Path]]) -> str:
        for mount_path, local in mounts:
            text = re.sub(r"(?<![\w/.-])" + re.escape(mount_path) + r"(?=/|$|[\s:,;])", str(local), text)
        return text

    def _start(self, runtime: PodRuntime, container: Container) -> None:
        spec = next(c for c in runtime.spec.get("containers") or () if c["name"] == container.name)
        try:
            env = self._environment(runtime, spec)
            mounts = self._volumes(runtime, spec)
        except ConfigMissing as exc:
            container.waiting = ("CreateContainerConfigError", str(exc))
            container.next_start = time.monotonic() + CONFIG_RETRY_SECONDS
            return
        argv = [expand(str(a), env) for a in (spec.get("command") or []) + (spec.get("args") or [])]
        if not argv:
            container.waiting = ("CreateContainerError", "the node agent runs a container's command, and this "
                                                         "container has none (it would run its image)")
            container.next_start = float("inf")
            return
        argv = [self._mapped(a, mounts) for a in argv]
        base = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TZ") if k in os.environ}
        full_env = {**base, "HOME": str(runtime.directory), "HOSTNAME": runtime.name,
                    **{k: self._mapped(v, mounts) for k, v in env.items()}}
        if container.log_file is None:
            container.log_file = open(runtime.directory / f"{container.name}.log", "ab")  # noqa: SIM115
            container.spans = LogSpans(runtime.directory / f"{container.name}.log")
        assert container.spans is not None
        container.spans.started()
        try:
            container.process = subprocess.Popen(argv, env=full_env, cwd=runtime.directory,
                                                 stdout=container.log_file, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL, preexec_fn=die_with_parent,
                                                 start_new_session=True)
        except OSError as exc:  # a command that does not exist: what a runtime reports as StartError
            container.last_terminated = {"exitCode": 128, "reason": "StartError", "message": str(exc),
                                         "startedAt": _now(), "finishedAt": _now()}
            self._schedule_restart(runtime, container, 128)
            return
        container.started_at = _now()
        container.started_mono = time.monotonic()
        container.container_id = f"kip848://{self.node}/{runtime.uid[:8]}/{container.name}/{container.process.pid}"
        container.waiting = None
        log.info("pod %s/%s container %s started: pid %d", runtime.namespace, runtime.name, container.name,
                 container.process.pid)

    def _schedule_restart(self, runtime: PodRuntime, container: Container, code: int) -> None:
        policy = runtime.spec.get("restartPolicy") or "Always"
        if policy == "Never" or (policy == "OnFailure" and code == 0):
            container.finished, container.exit_code = True, code
            container.waiting = None
            return
        delay = min(BACKOFF_SECONDS * 2 ** container.restarts, BACKOFF_CAP_SECONDS)
        container.next_start = time.monotonic() + delay
        container.waiting = ("CrashLoopBackOff", f"back-off {delay:g}s restarting failed container="
                                                 f"{container.name} pod={runtime.name}")
        container.restarts += 1

    def _tend(self, runtime: PodRuntime) -> None:
        now = time.monotonic()
        for container in runtime.containers.values():
            process = container.process
            if process is not None and process.poll() is not None:
                code = process.returncode
                code = 128 - code if code < 0 else code  # killed by a signal: 128 + its number, as runtimes say
                container.last_terminated = {
                    "exitCode": code, "reason": "Completed" if code == 0 else "Error",
                    "startedAt": container.started_at, "finishedAt": _now(), "containerID": container.container_id}
                container.process = None
                if container.spans is not None:
                    container.spans.ended()
                log.info("pod %s/%s container %s exited %d", runtime.namespace, runtime.name, container.name, code)
                if not runtime.deleting:
                    self._schedule_restart(runtime, container, code)
            if runtime.deleting:
                continue
            if container.process is None and not container.finished and now >= container.next_start:
                self._start(runtime, container)
        if runtime.deleting:
            running = [c for c in runtime.containers.values() if c.running()]
            if running and runtime.kill_at is not None and now >= runtime.kill_at:
                for c in running:
                    self._signal(c, signal.SIGKILL)
                runtime.kill_at = None
            if not running:
                self._remove(runtime)
                return
        self._report(runtime)

    # -- status --------------------------------------------------------------------------------------------

    def _container_status(self, container: Container) -> dict[str, Any]:
        status: dict[str, Any] = {"name": container.name, "image": container.image,
                                  "imageID": f"kip848-process://{container.image}", "restartCount": container.restarts,
                                  "ready": container.ready(), "started": container.running()}
        if container.container_id:
            status["containerID"] = container.container_id
        if container.running():
            status["state"] = {"running": {"startedAt": container.started_at}}
        elif container.finished:
            status["state"] = {"terminated": container.last_terminated}
        else:
            reason, message = container.waiting or ("ContainerCreating", "")
            status["state"] = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
        if container.last_terminated and not container.finished:
            status["lastState"] = {"terminated": container.last_terminated}
        return status

    def _report(self, runtime: PodRuntime) -> None:
        containers = list(runtime.containers.values())
        statuses = [self._container_status(c) for c in containers]
        ready = bool(containers) and all(c.ready() for c in containers)
        if ready != runtime.was_ready or runtime.ready_since is None:
            runtime.ready_since, runtime.was_ready = _now(), ready
        if containers and all(c.finished for c in containers):
            phase = "Succeeded" if all(c.exit_code == 0 for c in containers) else "Failed"
        elif any(c.container_id for c in containers):
            phase = "Running"
        else:
            phase = "Pending"
        flag = "True" if ready else "False"
        status = {"phase": phase, "hostIP": HOST_IP, "podIP": HOST_IP, "podIPs": [{"ip": HOST_IP}],
                  "hostIPs": [{"ip": HOST_IP}], "startTime": runtime.start_time,
                  "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": runtime.start_time},
                                 {"type": "Initialized", "status": "True", "lastTransitionTime": runtime.start_time},
                                 {"type": "ContainersReady", "status": flag, "lastTransitionTime": runtime.ready_since},
                                 {"type": "Ready", "status": flag, "lastTransitionTime": runtime.ready_since}],
                  "containerStatuses": statuses}
        if status == runtime.reported:
            return
        try:
            self.core.patch_namespaced_pod_status(runtime.name, runtime.namespace, {"status": status})
        except ApiException as exc:
            if exc.status == 404:
                self._forget(runtime, force=True)
                return
            log.warning("status of %s/%s: %s", runtime.namespace, runtime.name, exc.reason)
            return
        runtime.reported = status

    # -- stopping ------------------------------------------------------------------------------------------

    @staticmethod
    def _signal(container: Container, sig: int) -> None:
        if container.process is not None:
            try:
                os.killpg(container.process.pid, sig)
            except ProcessLookupError:
                send_signal(container.process.pid, sig)

    def _terminate(self, runtime: PodRuntime, grace: float) -> None:
        runtime.deleting = True
        runtime.kill_at = time.monotonic() + grace
        log.info("pod %s/%s deleted: SIGTERM, SIGKILL after %g s", runtime.namespace, runtime.name, grace)
        for container in runtime.containers.values():
            self._signal(container, signal.SIGKILL if grace <= 0 else signal.SIGTERM)

    def _remove(self, runtime: PodRuntime) -> None:
        """Every process of a deleted pod has exited: remove the pod object (the kubelet's last word)."""
        body = client.V1DeleteOptions(grace_period_seconds=0, preconditions=client.V1Preconditions(uid=runtime.uid))
        try:
            self.core.delete_namespaced_pod(runtime.name, runtime.namespace, body=body)
        except ApiException as exc:
            if exc.status not in (404, 409):
                log.warning("removing %s/%s: %s", runtime.namespace, runtime.name, exc.reason)
                return
        self._forget(runtime, force=False)

    def _forget(self, runtime: PodRuntime, *, force: bool) -> None:
        for container in runtime.containers.values():
            if force and container.running():
                self._signal(container, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    container.process.wait(timeout=10)  # type: ignore[union-attr]
            if container.log_file is not None:
                container.log_file.close()
                container.log_file = None
        self.pods.pop(runtime.uid, None)
        self.removed.add(runtime.uid)
        log.info("pod %s/%s gone", runtime.namespace, runtime.name)

    def log_spans(self, namespace: str, name: str, container: str) -> LogSpans | None:
        """The kubelet API's lookup (called from its threads): the spans of a container of a pod this node runs
        (the newest pod of that name: a StatefulSet's successor, not its predecessor still terminating)."""
        runtimes = [r for r in list(self.pods.values()) if r.namespace == namespace and r.name == name]
        runtimes.sort(key=lambda r: (not r.deleting, r.start_time))
        for runtime in reversed(runtimes):
            found = runtime.containers.get(container)
            if found is not None and found.spans is not None:
                return found.spans
        return None

    def shutdown(self) -> None:
        """The agent stops: every process it runs gets SIGTERM, then SIGKILL after 5 s (the pods stay)."""
        containers = [c for r in self.pods.values() for c in r.containers.values() if c.running()]
        for c in containers:
            self._signal(c, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(c.running() for c in containers):
            time.sleep(0.05)
        for c in containers:
            if c.running():
                self._signal(c, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--node", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--tls-cert-file", help="the kubelet API's serving certificate (PEM); with "
                                                "--tls-private-key-file and --client-ca-file the agent serves "
                                                "/containerLogs over HTTPS")
    parser.add_argument("--tls-private-key-file")
    parser.add_argument("--client-ca-file", help="the CA of the API server's kubelet client certificate")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)
    api = config.new_client_from_config(args.kubeconfig)
    agent = NodeAgent(api, args.node, Path(args.workdir))
    if args.tls_cert_file:
        server = LogServer(agent.log_spans, cert_file=args.tls_cert_file, key_file=args.tls_private_key_file,
                           client_ca_file=args.client_ca_file).start()
        agent.kubelet_port = server.port
        log.info("kubelet API (/containerLogs) on https://%s:%d", HOST_IP, server.port)
    signal.signal(signal.SIGTERM, lambda *_: agent.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: agent.stopping.set())
    agent.run()
    return 0


class KubeNode:
    """The node agent as a child process of the test session (:meth:`KubeControlPlane.start_node`)."""

    def __init__(self, kubeconfig: Path, name: str, workdir: Path, *,
                 tls: tuple[Path, Path, Path] | None = None) -> None:
        self.kubeconfig, self.name, self.workdir = kubeconfig, name, workdir
        #: (serving certificate, its key, the API server's client CA): the kubelet API's TLS; None: no log API
        self.tls = tls
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.workdir / "kube-node.log"

    def start(self) -> KubeNode:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed by stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kip848_harness.kube_node", "--kubeconfig", str(self.kubeconfig),
             "--node", self.name, "--workdir", str(self.workdir),
             *([f"--tls-cert-file={self.tls[0]}", f"--tls-private-key-file={self.tls[1]}",
                f"--client-ca-file={self.tls[2]}"] if self.tls else [])],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent,
            start_new_session=True)
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            send_signal(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                send_signal(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["KubeNode", "NodeAgent", "expand"]
