"""``KubernetesController``: an application that runs as a Kubernetes Deployment or StatefulSet.

Most consumers and Kafka Streams applications a platform team migrates are
workloads on Kubernetes. This controller acts on one of them through the
Kubernetes connection and hook of Airflow's cncf-kubernetes provider (the
optional extra ``airflow-provider-kip848[kubernetes]``)::

    orders:
      kind: kubernetes
      target:
        kubernetes_conn_id: k8s_prod          # an Airflow connection of type kubernetes
        namespace: orders
        workload: deployment/orders-consumer  # or statefulset/NAME; or `selector` + deployment|statefulset
        container: consumer                   # the container running the Kafka client (default: the only one)
        protocol_env: KAFKA_GROUP_PROTOCOL    # where the application reads group.protocol: an env var, or
        # protocol_config_map: {name: orders-client, key: consumer.properties, property: group.protocol}
        env_properties: {KAFKA_GROUP_INSTANCE_ID: group.instance.id}
        properties_config_map: {name: orders-client, key: consumer.properties}

What each step does, in Kubernetes' own terms:

* ``stop``: records the replicas in the workload's annotation
  ``kip848.io/replicas-before-stop`` (and the task's result), scales to 0
  (the ``scale`` subresource), and waits until no pod matching the workload's
  own selector exists: a terminating pod's process may still heartbeat, so
  only an absent pod counts as gone.
* ``start(group_protocol)``: sets ``group.protocol`` where the application
  reads it (the container's env var, or a ConfigMap key; a changed ConfigMap
  reaches the pods through the pod-template annotation
  ``kip848.io/config-<name>``, its data's hash, which makes Kubernetes replace
  them), scales back to the recorded replicas in the same patch, and waits
  until the rollout is complete and every pod is Ready.
* ``roll(group_protocol)``: the same change as a rolling update; waits for
  the rollout the workload's own status reports, and fails with its reason
  when it stalls (``ProgressDeadlineExceeded`` for a Deployment; a StatefulSet,
  which has no deadline, after ``rollout_timeout_seconds``), naming the pods
  that do not come up (``CrashLoopBackOff``, their exit code, restarts).
* ``status``: the workload's pods, each an instance named by its pod name
  (a StatefulSet's is stable: the natural ``group.instance.id``), Running and
  Ready as the kubelet reports them, restarts and container id.
* ``config``: the client properties the workload is configured with (a
  properties file in a ConfigMap key, env vars mapped to properties), for the lint.

Before anything is patched, every step reads the workload and checks the
target against it (the container, the env var, the ConfigMap and its key,
what references it) and asks the API server whether this identity may do the
step (``SelfSubjectAccessReview``): a wrong name or a missing permission is a
clear error, and nothing is scaled. The exact Role is :data:`ROLE_RULES`
(docs/controllers.md).

Why over 500 lines: one :class:`~.protocol.ApplicationController` implementation for two workload kinds
(Deployment, StatefulSet) over one API: its status, stop, start, roll and instance actions share the workload
lookup, the pod selection and the rollout watch, and each action's refusal and verdict wording is written once
for both kinds. What stands alone (the label selector, the API errors' wording) is a module function already.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
from kubernetes import client as k8s
from kubernetes import watch
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from airflow_provider_kip848.controllers.errors import PlatformError
from airflow_provider_kip848.controllers.formats import FormatError, parse_config
from airflow_provider_kip848.controllers.kubernetes_pods import ROLL_ANNOTATION, PodByPod
from airflow_provider_kip848.controllers.protocol import (
    GROUP_PROTOCOLS,
    ApplicationController,
    ApplicationStatus,
    ClientConfig,
    Instance,
    InstanceLog,
)
from airflow_provider_kip848.controllers.schema import Arg

#: the workload annotation where ``stop`` records the replicas ``start`` scales back to
REPLICAS_ANNOTATION = "kip848.io/replicas-before-stop"
#: the pod-template annotation (one per ConfigMap) whose change makes Kubernetes replace the pods
CONFIG_ANNOTATION_PREFIX = "kip848.io/config-"
WORKLOAD_KINDS = {"deployment": "Deployment", "statefulset": "StatefulSet"}
#: the bounds of the target's numbers: a wait past a day belongs in a deferrable sensor, not a task; a consumer
#: group gains nothing from more instances than that (its partitions bound the useful count long before)
MAX_TIMEOUT_SECONDS = 86_400
MAX_REPLICAS = 10_000
_NAME = r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?"
_WORKLOAD = re.compile(rf"(deployment|statefulset)(/{_NAME})?")
_ENV_NAME = r"[-._a-zA-Z][-._a-zA-Z0-9]*"
_PROPERTY_LINE = r"^(\s*{key}\s*[=:]).*$"
#: the Role the controller needs in the application's namespace: (API group, resources, verbs). ConfigMaps only
#: when the target names one; SelfSubjectAccessReview needs no Role (every authenticated user may ask). ``patch``
#: pods only for a Deployment rolled by pod: the old pod that goes next is marked with the deletion-cost annotation.
ROLE_RULES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("apps", ("deployments", "statefulsets"), ("get", "patch")),
    ("apps", ("deployments/scale", "statefulsets/scale"), ("get", "patch")),
    ("", ("pods",), ("list", "watch", "patch")),
    ("", ("pods/log",), ("get",)),
    ("", ("configmaps",), ("get", "patch")),
)


def label_selector(selector: Mapping[str, Any] | None) -> str:  # Any: JSON of several shapes (XCom, reports)
    """A workload's ``spec.selector`` as a label-selector string (what ``kubectl get pods -l`` takes)."""
    selector = selector or {}
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr["key"], expr["operator"], ",".join(expr.get("values") or ())
        parts.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key,
                      "DoesNotExist": f"!{key}"}[op])
    return ",".join(parts)


def _api_error(exc: Exception, what: str) -> PlatformError:
    """An API refusal (or an unreachable API server) as a platform error with the API's own words."""
    if isinstance(exc, ApiException):
        reason = exc.reason or ""
        try:
            reason = json.loads(exc.body or "{}").get("message") or reason
        except ValueError:
            pass
        status = int(exc.status or 0)
        if status in (401, 403):
            return PlatformError(f"{what}: forbidden ({status}): {reason}", retriable=False,
                                 remedy="Bind the controller's Role (docs/controllers.md, 'RBAC') to the identity of "
                                        "the Kubernetes connection in this namespace, then rerun the task.")
        if status == 404:
            return PlatformError(f"{what}: not found: {reason}", retriable=False,
                                 remedy="Fix the controller's target in the registry (namespace, workload, "
                                        "ConfigMap), then rerun the task.")
        return PlatformError(f"{what}: the API server answered {status}: {reason}",
                             retriable=status in (409, 429) or status >= 500)
    return PlatformError(f"{what}: the API server cannot be reached: {type(exc).__name__}: {exc}", retriable=True)


class KubernetesController(ApplicationController):
    """A Deployment or StatefulSet, through Airflow's Kubernetes connection (see the module docstring)."""

    schema: ClassVar[Mapping[str, Arg]] = {
        "kubernetes_conn_id": Arg("string", description="an Airflow connection of type kubernetes "
                                                        "(default kubernetes_default)"),
        "namespace": Arg("string", pattern=r"[a-z0-9]([-a-z0-9]*[a-z0-9])?",
                         description="the workload's namespace (default: the connection's, else 'default')"),
        "workload": Arg("string", required=True, pattern=_WORKLOAD.pattern,
                        description="deployment/NAME or statefulset/NAME; or deployment|statefulset with selector"),
        "selector": Arg("string", description="a label selector choosing exactly one workload of the kind "
                                              "(instead of its name)"),
        "container": Arg("string", description="the container running the Kafka client (default: the only one)"),
        "protocol_env": Arg("string", pattern=_ENV_NAME,
                            description="the container's env var the application reads group.protocol from"),
        "protocol_config_map": Arg("object", description="{name, key, property?}: the ConfigMap key holding "
                                                         "group.protocol (property: the key is a properties file)"),
        "properties_config_map": Arg("object", description="{name, key}: a ConfigMap key holding the client's "
                                                           "properties file (read for the lint)"),
        "env_properties": Arg("object", description="env var -> client property (or {property, protocols}: "
                                                    "only on those group protocols), read for the lint"),
        "replicas": Arg("integer", minimum=1, maximum=MAX_REPLICAS,
                        description="what start scales to when no stop recorded the replicas"),
        "stop_timeout_seconds": Arg("number", minimum=1, maximum=MAX_TIMEOUT_SECONDS,
                                    description="how long pods may take to go (default 300)"),
        "rollout_timeout_seconds": Arg("number", minimum=1, maximum=MAX_TIMEOUT_SECONDS,
                                       description="how long a start or roll may take (default 600)"),
        "client": Arg("string", enum=("java", "librdkafka"), description="the application's client library"),
        "client_version": Arg("string", pattern=r"\d+\.\d+(\.\d+)?", description="its release"),
    }

    def __init__(self, *, workload: str, namespace: str | None = None, selector: str | None = None,
                 # Any: registry arguments (YAML values), checked by the schema
                 kubernetes_conn_id: str = "kubernetes_default", container: str | None = None,
                 protocol_env: str | None = None, protocol_config_map: Mapping[str, str] | None = None,
                 properties_config_map: Mapping[str, str] | None = None,
                 env_properties: Mapping[str, str | Mapping[str, Any]] | None = None, replicas: int | None = None,
                 stop_timeout_seconds: float = 300.0, rollout_timeout_seconds: float = 600.0,
                 client: str | None = None, client_version: str | None = None, poll_seconds: float = 1.0) -> None:
        kind, _, name = workload.partition("/")
        if kind not in WORKLOAD_KINDS:
            raise ValueError(f"workload must be deployment/NAME or statefulset/NAME, not {workload!r}")
        if selector is not None and not str(selector).strip():
            # a blank label selector selects every workload of the namespace (kubectl get -l ' ' lists all)
            raise ValueError(f"selector must select something, not {selector!r}: a blank label selector matches "
                             "every workload of the namespace")
        if bool(name) == bool(selector):
            raise ValueError("name the workload (workload: deployment/NAME) or select it (workload: deployment and "
                             "selector: ...), not both and not neither")
        if (protocol_env is None) == (protocol_config_map is None):
            raise ValueError("say where the application reads group.protocol: protocol_env (an env var of the "
                             "container) or protocol_config_map ({name, key}), exactly one")
        self.protocol_config_map = self._config_map_ref(protocol_config_map, "protocol_config_map",
                                                        optional=("property",))
        self.properties_config_map = self._config_map_ref(properties_config_map, "properties_config_map")
        #: env var -> (client property, the group protocols on which the application applies it; None: all)
        self.env_properties = {str(k): self._env_property(str(k), v) for k, v in (env_properties or {}).items()}
        self.kind, self.name, self.selector = WORKLOAD_KINDS[kind], name or None, selector
        self._namespace, self.conn_id, self.container_name = namespace, kubernetes_conn_id, container
        self.protocol_env = protocol_env
        self.replicas = replicas
        self.stop_timeout, self.rollout_timeout = float(stop_timeout_seconds), float(rollout_timeout_seconds)
        self.client, self.client_version = client, client_version
        self.poll_seconds = poll_seconds
        self._hook: KubernetesHook | None = None

    @staticmethod
    def _env_property(name: str, spec: object) -> tuple[str, tuple[str, ...] | None]:
        if isinstance(spec, str) and spec:
            return spec, None
        if isinstance(spec, Mapping) and not set(spec) - {"property", "protocols"}:
            prop, protocols = spec.get("property"), spec.get("protocols")
            if isinstance(prop, str) and prop and isinstance(protocols, list) and protocols and all(
                    p in GROUP_PROTOCOLS for p in protocols):
                return prop, tuple(protocols)
        raise ValueError(f"env_properties.{name}: a client property name, or {{property, protocols}} with "
                         f"protocols a non-empty list of {', '.join(GROUP_PROTOCOLS)} (the application applies "
                         "the property only on those), not " + repr(spec))

    @staticmethod
    def _config_map_ref(ref: Mapping[str, str] | None, what: str,
                        optional: tuple[str, ...] = ()) -> dict[str, str] | None:
        if ref is None:
            return None
        unknown = sorted(set(ref) - {"name", "key", *optional})
        missing = [k for k in ("name", "key") if not isinstance(ref.get(k), str) or not ref.get(k)]
        if unknown or missing:
            raise ValueError(f"{what} is {{name, key{''.join(', ' + o + '?' for o in optional)}}}"
                             + (f": unknown {', '.join(unknown)}" if unknown else "")
                             + (f": {', '.join(missing)} required" if missing else ""))
        return {k: str(v) for k, v in ref.items()}

    # -- the API ------------------------------------------------------------------------------------------

    @property
    def hook(self) -> KubernetesHook:
        if self._hook is None:  # a Configuration of its own: two connections in one process never share one
            self._hook = KubernetesHook(conn_id=self.conn_id, client_configuration=k8s.Configuration())
        return self._hook

    def _api(self) -> k8s.ApiClient:
        try:
            return self.hook.api_client
        except Exception as exc:  # noqa: BLE001 - a connection that cannot be loaded (a bad kubeconfig)
            raise PlatformError(f"cannot load the Kubernetes connection {self.conn_id!r}: {type(exc).__name__}: "
                                f"{exc}", remedy="Fix the Airflow connection (docs/controllers.md).") from exc

    @property
    def namespace(self) -> str:
        if self._namespace:
            return self._namespace
        try:
            return self.hook.get_namespace() or "default"
        except Exception:  # noqa: BLE001 - a connection without extras: Kubernetes' default namespace
            return "default"

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except (ApiException, HTTPError, OSError) as exc:
            raise _api_error(exc, what) from exc

    @property
    def _resource(self) -> str:
        return "deployments" if self.kind == "Deployment" else "statefulsets"

    @property
    def label(self) -> str:
        return f"{self.kind.lower()}/{self.name or '(' + str(self.selector) + ')'} in namespace {self.namespace}"

    def _apps(self) -> k8s.AppsV1Api:
        return k8s.AppsV1Api(self._api())

    def _core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self._api())

    def _plain(self, obj: Any) -> dict[str, Any]:
        plain: dict[str, Any] = self._api().sanitize_for_serialization(obj)
        return plain

    def _workload_name(self) -> str:
        if self.name:
            return self.name
        listing = (self._apps().list_namespaced_deployment if self.kind == "Deployment"
                   else self._apps().list_namespaced_stateful_set)
        found = self._call(f"list {self._resource} -l {self.selector} in namespace {self.namespace}",
                           lambda: listing(self.namespace, label_selector=self.selector))
        names = sorted(item.metadata.name for item in found.items)
        if len(names) != 1:
            raise PlatformError(f"the selector {self.selector!r} matches {len(names)} {self._resource} in namespace "
                                f"{self.namespace}" + (f" ({', '.join(names)})" if names else "")
                                + ": it must choose exactly one", remedy="Fix the selector (or name the workload) "
                                                                        "in the registry.")
        self.name = names[0]
        return self.name

    def _read(self) -> dict[str, Any]:
        name = self._workload_name()
        read = (self._apps().read_namespaced_deployment if self.kind == "Deployment"
                else self._apps().read_namespaced_stateful_set)
        return self._plain(self._call(f"read {self.kind.lower()}/{name} in namespace {self.namespace}",
                                      lambda: read(name, self.namespace)))

    def _patch(self, body: Mapping[str, Any], what: str) -> dict[str, Any]:
        name = self._workload_name()
        patch = (self._apps().patch_namespaced_deployment if self.kind == "Deployment"
                 else self._apps().patch_namespaced_stateful_set)
        return self._plain(self._call(f"patch {self.kind.lower()}/{name} ({what})", lambda: patch(
            name, self.namespace, body, _content_type="application/strategic-merge-patch+json")))

    def _scale(self, replicas: int) -> None:
        name = self._workload_name()
        patch = (self._apps().patch_namespaced_deployment_scale if self.kind == "Deployment"
                 else self._apps().patch_namespaced_stateful_set_scale)
        self._call(f"scale {self.kind.lower()}/{name} to {replicas}",
                   lambda: patch(name, self.namespace, {"spec": {"replicas": replicas}}))

    def _patch_pod(self, name: str, body: Mapping[str, Any], what: str) -> None:  # Any: the API's JSON
        self._call(f"patch pod/{name} in namespace {self.namespace} ({what})",
                   lambda: self._core().patch_namespaced_pod(name, self.namespace, body))

    def _read_scale(self) -> int:
        name = self._workload_name()
        read = (self._apps().read_namespaced_deployment_scale if self.kind == "Deployment"
                else self._apps().read_namespaced_stateful_set_scale)
        scale = self._call(f"read the scale of {self.kind.lower()}/{name}", lambda: read(name, self.namespace))
        return int(scale.spec.replicas or 0)

    def _pods(self, selector: str) -> tuple[list[dict[str, Any]], str]:
        listed = self._call(f"list pods -l {selector} in namespace {self.namespace}",
                            lambda: self._core().list_namespaced_pod(self.namespace, label_selector=selector))
        return [self._plain(p) for p in listed.items], str(listed.metadata.resource_version or "")

    def _await_pod_change(self, selector: str, resource_version: str, seconds: float) -> None:
        """Block until a pod of ``selector`` changes after ``resource_version``, or ``seconds`` pass."""
        stream = watch.Watch()
        try:
            for _ in stream.stream(self._core().list_namespaced_pod, self.namespace, label_selector=selector,
                                   resource_version=resource_version, timeout_seconds=max(1, int(seconds)),
                                   _request_timeout=seconds + 5):
                return
        except (ApiException, HTTPError, OSError):  # an expired version or a dropped watch: the caller lists again
            time.sleep(min(seconds, 0.5))
        finally:
            stream.stop()

    def _config_map(self, name: str) -> dict[str, str]:
        cm = self._call(f"read configmap/{name} in namespace {self.namespace}",
                        lambda: self._core().read_namespaced_config_map(name, self.namespace))
        return dict(cm.data or {})

    # -- the target, checked against the workload -------------------------------------------------------------

    def _container(self, workload: Mapping[str, Any]) -> dict[str, Any]:
        containers = workload["spec"]["template"]["spec"].get("containers") or []
        names = [c["name"] for c in containers]
        if self.container_name is None:
            if len(containers) != 1:
                raise PlatformError(f"{self.label} has {len(containers)} containers ({', '.join(names)}): name the "
                                    "one running the Kafka client (container in the target)",
                                    remedy="Set container in the registry's target.")
            return dict(containers[0])
        for c in containers:
            if c["name"] == self.container_name:
                return dict(c)
        raise PlatformError(f"{self.label} has no container {self.container_name!r} (it has {', '.join(names)})",
                            remedy="Fix container in the registry's target.")

    def _references(self, workload: Mapping[str, Any], container: Mapping[str, Any], config_map: str) -> bool:
        """Whether the pods read ConfigMap ``config_map`` (an env var, envFrom, or a volume)."""
        for var in container.get("env") or ():
            ref = ((var.get("valueFrom") or {}).get("configMapKeyRef") or {})
            if ref.get("name") == config_map:
                return True
        if any((s.get("configMapRef") or {}).get("name") == config_map for s in container.get("envFrom") or ()):
            return True
        for volume in workload["spec"]["template"]["spec"].get("volumes") or ():
            if (volume.get("configMap") or {}).get("name") == config_map:
                return True
            for source in (volume.get("projected") or {}).get("sources") or ():
                if (source.get("configMap") or {}).get("name") == config_map:
                    return True
        return False

    def _check_target(self, workload: Mapping[str, Any]) -> dict[str, Any]:
        """The container, after checking every name of the target against the workload (PlatformError: one is
        wrong; nothing has been changed)."""
        container = self._container(workload)
        env = {v["name"]: v for v in container.get("env") or ()}
        if not label_selector(workload["spec"].get("selector")):
            raise PlatformError(f"{self.label} has an empty selector: its pods cannot be told apart")
        if self.protocol_env is not None:
            var = env.get(self.protocol_env)
            if var is None:
                raise PlatformError(
                    f"container {container['name']} of {self.label} has no env var {self.protocol_env!r} (it has "
                    f"{', '.join(sorted(env)) or 'none'}): the application must read group.protocol from it",
                    remedy="Fix protocol_env in the registry's target (or add the env var to the workload).")
            if var.get("valueFrom"):
                ref = (var["valueFrom"].get("configMapKeyRef") or {})
                hint = (f" (from configmap {ref.get('name')} key {ref.get('key')}: name that key as "
                        "protocol_config_map)" if ref else "")
                raise PlatformError(f"env var {self.protocol_env} of container {container['name']} takes its value "
                                    f"from elsewhere{hint}: protocol_env must be a literal value",
                                    remedy="Point the target at where the value is set.")
        for name in sorted(self.env_properties):
            if name not in env:
                raise PlatformError(f"container {container['name']} of {self.label} has no env var {name!r} "
                                    f"(env_properties; it has {', '.join(sorted(env)) or 'none'})",
                                    remedy="Fix env_properties in the registry's target.")
        for what, ref in (("protocol_config_map", self.protocol_config_map),
                          ("properties_config_map", self.properties_config_map)):
            if ref is None:
                continue
            data = self._config_map(ref["name"])
            if ref["key"] not in data:
                raise PlatformError(f"configmap/{ref['name']} in namespace {self.namespace} has no key "
                                    f"{ref['key']!r} ({what}; it has {', '.join(sorted(data)) or 'none'})",
                                    remedy=f"Fix {what} in the registry's target.")
            if not self._references(workload, container, ref["name"]):
                raise PlatformError(f"the pods of {self.label} do not read configmap/{ref['name']} ({what}): "
                                    "changing it would not reach the application",
                                    remedy=f"Fix {what} (or the workload).")
            if what == "protocol_config_map" and ref.get("property") and not re.search(
                    _PROPERTY_LINE.format(key=re.escape(ref["property"])), data[ref["key"]], re.MULTILINE):
                raise PlatformError(f"configmap/{ref['name']} key {ref['key']} has no {ref['property']} line: "
                                    "the application does not read group.protocol from it",
                                    remedy="Fix protocol_config_map.property (or add the line).")
        return container

    def _needed(self, step: str) -> list[tuple[str, str, str]]:
        """(verb, API group, resource) the step needs here."""
        workload, scale = self._resource, f"{self._resource}/scale"
        needs = [("get", "apps", workload), ("list", "", "pods")]
        if step in ("stop", "start", "roll", "roll_instance"):
            needs += [("patch", "apps", workload), ("watch", "", "pods")]
        if step == "roll_instance" and self.kind == "Deployment":
            needs.append(("patch", "", "pods"))
        if step == "stop":
            needs += [("get", "apps", scale), ("patch", "apps", scale)]
        if self.protocol_config_map is not None or self.properties_config_map is not None:
            needs.append(("get", "", "configmaps"))
        if self.protocol_config_map is not None and step in ("start", "roll"):
            needs.append(("patch", "", "configmaps"))
        return needs

    def _authorized(self, step: str) -> None:
        """Ask the API server whether this identity may do ``step`` (SelfSubjectAccessReview); PlatformError
        naming every missing permission, before anything is changed."""
        api = k8s.AuthorizationV1Api(self._api())
        missing = []
        for verb, group, resource in self._needed(step):
            plural, _, sub = resource.partition("/")
            attrs: dict[str, Any] = {"namespace": self.namespace, "verb": verb, "group": group, "resource": plural}
            if sub:
                attrs["subresource"] = sub
            review = self._call("ask the API server what this identity may do (SelfSubjectAccessReview)",
                                lambda a=attrs: api.create_self_subject_access_review(  # type: ignore[misc]
                                    {"spec": {"resourceAttributes": a}}))
            if not review.status.allowed:
                missing.append(f"{verb} {resource}" + (f" ({group})" if group else ""))
        if missing:
            raise PlatformError(f"the Kubernetes connection {self.conn_id!r} may not {', '.join(missing)} in namespace "
                                f"{self.namespace} ({step} of {self.label} needs them): nothing was changed",
                                remedy="Bind the controller's Role (docs/controllers.md, 'RBAC') to the connection's "
                                       "identity in this namespace, then rerun the task.")

    def _prepare(self, step: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The workload and its container, once the target, the workload's ability to do ``step`` and the
        permissions are checked."""
        workload = self._read()
        container = self._check_target(workload)
        spec = workload["spec"]
        if step in ("start", "roll", "roll_instance") and spec.get("paused"):
            raise PlatformError(f"{self.label} is paused (spec.paused): Kubernetes would not roll out the change, "
                                "and the wait for its pods would only time out; nothing was changed",
                                remedy=f"Resume it (kubectl rollout resume {self.kind.lower()}/{self.name}) or have "
                                       "its owner do so, then rerun the task.")
        replaced_by_hand = (spec.get("updateStrategy") or {}).get("type") == "OnDelete"
        if replaced_by_hand and (step in ("roll", "roll_instance")
                                 or (step == "start" and int(spec.get("replicas") or 0) > 0)):
            raise PlatformError(f"{self.label} has updateStrategy OnDelete: its pods take a new template only when "
                                "deleted, which this controller never does; nothing was changed",
                                remedy="Migrate it offline (stop, then start: new pods take the new template), or "
                                       "switch it to RollingUpdate.")
        self._authorized(step)
        return workload, container

    # -- waiting ------------------------------------------------------------------------------------------------

    def _selector(self, workload: Mapping[str, Any]) -> str:
        """The workload's pods as a label selector; PlatformError for an empty one, which would list every pod of
        the namespace as the application's (an empty selection never widens to everything)."""
        selector = label_selector(workload["spec"].get("selector"))
        if not selector:
            raise PlatformError(f"{self.label} has an empty selector: its pods cannot be told apart from the "
                                "namespace's other pods", remedy="Give the workload a spec.selector.")
        return selector

    def _wait_no_pod(self, workload: Mapping[str, Any]) -> float:
        selector = self._selector(workload)
        started = time.monotonic()
        while True:
            pods, version = self._pods(selector)
            if not pods:
                return time.monotonic() - started
            left = self.stop_timeout - (time.monotonic() - started)
            if left <= 0:
                raise PlatformError(f"{self.label} is scaled to 0, but after {self.stop_timeout:g} s "
                                    f"{len(pods)} pod(s) still exist: {self._describe_pods(pods)}",
                                    retriable=True, remedy="Find why those pods do not terminate (a finalizer, a "
                                                           "node that is gone), then rerun the task.")
            self._await_pod_change(selector, version, min(left, 5.0))

    @staticmethod
    def _pod_state(pod: Mapping[str, Any]) -> str:
        """What the kubelet says of a pod: Terminating, a container's waiting reason (CrashLoopBackOff ...) or the
        phase and readiness, with the last termination's exit code when a container ended before."""
        status = pod.get("status") or {}
        if pod["metadata"].get("deletionTimestamp"):
            state = "Terminating"
        else:
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())
            state = f"{status.get('phase', 'Pending')}{', ready' if ready else ', not ready'}"
        for cs in status.get("containerStatuses") or ():
            waiting = (cs.get("state") or {}).get("waiting")
            if waiting and not pod["metadata"].get("deletionTimestamp"):
                state = str(waiting.get("reason"))
            last = ((cs.get("lastState") or {}).get("terminated") or {})
            if "exitCode" in last:
                state += f", last exit code {last['exitCode']}"
        return state

    def _describe_pods(self, pods: list[dict[str, Any]]) -> str:
        out = []
        for pod in pods:
            restarts = sum(cs.get("restartCount", 0) for cs in (pod.get("status") or {}).get("containerStatuses") or ())
            out.append(f"{pod['metadata']['name']} ({self._pod_state(pod)}, {restarts} restart(s))")
        return "; ".join(out) or "none"

    def _rolled_out(self, workload: Mapping[str, Any], replicas: int) -> tuple[bool, str | None]:
        """(complete, stalled reason) from the workload's own status, as ``kubectl rollout status`` reads it."""
        meta, spec, status = workload["metadata"], workload["spec"], workload.get("status") or {}
        if status.get("observedGeneration", 0) < meta.get("generation", 0):
            return False, None
        if self.kind == "Deployment":
            for cond in status.get("conditions") or ():
                if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
                    return False, f"{cond['reason']}: {cond.get('message', '')}"
            done = (status.get("updatedReplicas", 0) == replicas and status.get("replicas", 0) == replicas
                    and status.get("availableReplicas", 0) == replicas and status.get("readyReplicas", 0) == replicas)
            return done, None
        on_delete = (spec.get("updateStrategy") or {}).get("type") == "OnDelete"
        done = (status.get("readyReplicas", 0) == replicas and status.get("replicas", 0) == replicas
                and (on_delete or (status.get("updatedReplicas", 0) == replicas
                                   and status.get("currentRevision") == status.get("updateRevision"))))
        return done, None

    def _wait_rollout(self, replicas: int, step: str) -> dict[str, Any]:
        started = time.monotonic()
        while True:
            workload = self._read()
            selector = self._selector(workload)
            pods, version = self._pods(selector)
            done, stalled = self._rolled_out(workload, replicas)
            ready = [p for p in pods if not p["metadata"].get("deletionTimestamp") and any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (p.get("status") or {}).get("conditions") or ())]
            if done and len(pods) == replicas and len(ready) == replicas:
                return {"seconds": round(time.monotonic() - started, 3), "pods": sorted(p["metadata"]["name"]
                                                                                          for p in pods)}
            if stalled is not None:
                raise PlatformError(f"the rollout of {self.label} ({step}) cannot complete: {stalled}; pods: "
                                    f"{self._describe_pods(pods)}", retriable=False,
                                    remedy="Read the pods' logs; the DAG's way back restores the previous "
                                           "group.protocol.")
            left = self.rollout_timeout - (time.monotonic() - started)
            if left <= 0:
                raise PlatformError(f"the rollout of {self.label} ({step}) did not complete in "
                                    f"{self.rollout_timeout:g} s: {len(ready)} of {replicas} pod(s) ready; pods: "
                                    f"{self._describe_pods(pods)}", retriable=False,
                                    remedy="Read the pods' logs (a StatefulSet stuck on a broken pod needs that "
                                           "pod deleted once its template is fixed, as Kubernetes documents); "
                                           "the DAG's way back restores the previous group.protocol.")
            self._await_pod_change(selector, version, min(left, self.poll_seconds * 2))

    # -- changing group.protocol ----------------------------------------------------------------------------------

    def _protocol_now(self, container: Mapping[str, Any]) -> str | None:
        if self.protocol_env is not None:
            var: dict[str, Any] = next((v for v in container.get("env") or () if v["name"] == self.protocol_env), {})
            value = var.get("value")
            return None if value is None else str(value)
        ref = self.protocol_config_map
        assert ref is not None
        text = self._config_map(ref["name"]).get(ref["key"], "")
        if not ref.get("property"):
            return text.strip()
        props = parse_config("properties", text) if text.strip() else {}
        return props.get(ref["property"])

    def _protocol_patch(self, container: Mapping[str, Any], group_protocol: str) -> tuple[dict[str, Any], str]:
        """The pod-template patch that makes the pods run with ``group_protocol`` (changing the ConfigMap
        first, when that is where it is read), and what changed."""
        before = self._protocol_now(container)
        if self.protocol_env is not None:
            env = [{"name": self.protocol_env, "value": group_protocol}]
            return ({"spec": {"template": {"spec": {"containers": [{"name": container["name"], "env": env}]}}}},
                    f"env {self.protocol_env} of container {container['name']}: {before} -> {group_protocol}")
        ref = self.protocol_config_map
        assert ref is not None
        data = self._config_map(ref["name"])
        text = data.get(ref["key"], "")
        if ref.get("property"):
            new_text = re.sub(_PROPERTY_LINE.format(key=re.escape(ref["property"])),
                              lambda m: f"{m.group(1)}{group_protocol}", text, count=1, flags=re.MULTILINE)
        else:
            new_text = group_protocol
        if new_text != text:
            self._call(f"patch configmap/{ref['name']} key {ref['key']}",
                       lambda: self._core().patch_namespaced_config_map(ref["name"], self.namespace,
                                                                        {"data": {ref["key"]: new_text}}))
            data[ref["key"]] = new_text
        digest = hashlib.sha256("\0".join(f"{k}={v}" for k, v in sorted(data.items())).encode()).hexdigest()[:16]
        annotation = {CONFIG_ANNOTATION_PREFIX + ref["name"]: digest}
        where = f"configmap/{ref['name']} key {ref['key']}" + (f" ({ref['property']})" if ref.get("property") else "")
        return ({"spec": {"template": {"metadata": {"annotations": annotation}}}},
                f"{where}: {before} -> {group_protocol} (pod template annotation {digest})")

    # -- the protocol -----------------------------------------------------------------------------------------------

    def stop(self) -> Mapping[str, Any]:  # Any: the platform's answer, JSON of several shapes
        workload, _ = self._prepare("stop")
        replicas = self._read_scale()
        recorded = (workload["metadata"].get("annotations") or {}).get(REPLICAS_ANNOTATION)
        if replicas > 0:
            # the record first: a stop interrupted between the two patches still knows what to start again
            self._patch({"metadata": {"annotations": {REPLICAS_ANNOTATION: str(replicas)}}}, "record replicas")
            self._scale(0)
            recorded = str(replicas)
        gone_s = self._wait_no_pod(workload)
        return {"workload": f"{self.kind.lower()}/{self.name}", "namespace": self.namespace,
                "replicas_before": replicas, "recorded_replicas": int(recorded) if recorded else None,
                "scaled_to": 0, "pods_gone_s": round(gone_s, 3)}

    def _replicas_to_start(self, workload: Mapping[str, Any]) -> int:
        current = int(workload["spec"].get("replicas") or 0)
        if current > 0:
            return current
        recorded = (workload["metadata"].get("annotations") or {}).get(REPLICAS_ANNOTATION)
        if recorded and recorded.isdigit() and int(recorded) > 0:
            return int(recorded)
        if self.replicas:
            return int(self.replicas)
        raise PlatformError(f"{self.label} has 0 replicas and no record of how many it ran (annotation "
                            f"{REPLICAS_ANNOTATION}, written by the stop): nothing was changed",
                            remedy="Set replicas in the controller's target, or scale the workload yourself.")

    def start(self, group_protocol: str) -> Mapping[str, Any]:  # Any: the platform's answer, JSON of several shapes
        workload, container = self._prepare("start")
        replicas = self._replicas_to_start(workload)
        patch, change = self._protocol_patch(container, group_protocol)
        patch.setdefault("spec", {})["replicas"] = replicas
        patch["metadata"] = {"annotations": {REPLICAS_ANNOTATION: None}}  # the record is spent
        self._patch(patch, f"group.protocol={group_protocol}, {replicas} replica(s)")
        rollout = self._wait_rollout(replicas, "start")
        return {"workload": f"{self.kind.lower()}/{self.name}", "namespace": self.namespace,
                "group_protocol": group_protocol, "change": change, "replicas": replicas, **rollout}

    def can_roll(self) -> bool:
        return True

    def roll(self, group_protocol: str) -> Mapping[str, Any]:  # Any: the platform's answer, JSON of several shapes
        workload, container = self._prepare("roll")
        replicas = int(workload["spec"].get("replicas") or 0)
        if replicas == 0:
            raise PlatformError(f"{self.label} has 0 replicas: there is nothing to roll (start it instead)")
        patch, change = self._protocol_patch(container, group_protocol)
        self._patch(patch, f"group.protocol={group_protocol}")
        rollout = self._wait_rollout(replicas, "roll")
        return {"workload": f"{self.kind.lower()}/{self.name}", "namespace": self.namespace,
                "group_protocol": group_protocol, "change": change, "replicas": replicas, **rollout}

    # -- the roll by pod (controllers/kubernetes_pods.py) ---------------------------------------------------------

    def can_roll_instances(self) -> bool:
        """One pod at a time (a StatefulSet's partition, a Deployment's held rollout) where the protocol is in the
        pod template (``protocol_env``): a ConfigMap is read by every pod that starts, so it cannot be staged."""
        return self.protocol_env is not None

    def replaces_instances(self) -> bool:
        return True  # Kubernetes terminates a pod and creates its successor in one step

    def instance_order(self, names: Sequence[str], group_protocol: str) -> list[str]:
        return PodByPod(self).order(names, group_protocol)

    def stop_instance(self, name: str) -> Mapping[str, Any]:  # Any: the platform's answer, JSON of several shapes
        raise PlatformError(f"pod {name} is not stopped on its own: Kubernetes replaces a pod in one step "
                            "(start_instance); nothing was changed")

    def start_instance(  # Any: the platform's answer, JSON of several shapes
            self, name: str, group_protocol: str) -> Mapping[str, Any]:
        """Move pod ``name`` to ``group_protocol`` (see controllers/kubernetes_pods.py): its successor's name and
        uid, or ``unchanged`` when it already runs it."""
        if not self.can_roll_instances():
            raise PlatformError(f"{self.label} takes group.protocol from a ConfigMap: its pods cannot be moved one "
                                "at a time (roll it as a whole)")
        workload, container = self._prepare("roll_instance")
        patch, change = self._protocol_patch(container, group_protocol)
        return PodByPod(self).step(workload, name, group_protocol, patch, change, self._protocol_now(container))

    def status(self) -> ApplicationStatus:
        workload = self._read()
        container = self._container(workload)
        selector = self._selector(workload)
        pods, _ = self._pods(selector)
        # a client property the container takes from its pod's name (env_properties + a fieldRef to
        # metadata.name) names each pod's member: the pairing of members with pods (issue 46) compares it, which
        # holds where pod IPs do not tell pods apart (host networking, one node's address for every pod)
        instance_id_from_pod = self._from_pod_name(container, "group.instance.id")
        client_id_from_pod = self._from_pod_name(container, "client.id")
        instances = []
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
            status = pod.get("status") or {}
            cs: dict[str, Any] = next((c for c in status.get("containerStatuses") or ()
                                       if c["name"] == container["name"]), {})
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())
            name = pod["metadata"]["name"]
            instances.append(Instance(
                name=name, running=status.get("phase") not in ("Succeeded", "Failed"), ready=ready,
                restarts=cs.get("restartCount"), incarnation=cs.get("containerID") or pod["metadata"].get("uid"),
                state=self._pod_state(pod), host=status.get("podIP"),
                client_id=name if client_id_from_pod else None,
                group_instance_id=name if instance_id_from_pod else None))
        return ApplicationStatus(known=True, instances=tuple(instances),
                                 source=f"pods of {self.label} (selector {selector}) on {self.hook_server()}")

    def _from_pod_name(self, container: Mapping[str, Any], prop: str) -> bool:  # Any: a container spec (JSON)
        """Whether the container sets client property ``prop`` from its pod's name (``env_properties`` maps an env
        var to it, and that env var is a fieldRef to ``metadata.name``)."""
        env_name = next((e for e, (p, _) in self.env_properties.items() if p == prop), None)
        return env_name is not None and any(
            v["name"] == env_name and ((v.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            == "metadata.name" for v in container.get("env") or ())

    def can_read_logs(self) -> bool:
        return True

    def logs(self, instance: str, *, max_bytes: int = 65536, from_start: bool = False,
             timeout_s: float = 20.0) -> InstanceLog:
        """A pod of the workload's log, its client container's, through the API (``pods/log``: ``tailLines`` and
        ``limitBytes``, or its first ``limitBytes`` with ``from_start``), within ``timeout_s``. A container that
        restarted also gives its previous one's last lines first: why it ended is there. A pod that is not the
        workload's, or a read refused: an unknown log, saying why."""
        try:
            workload = self._read()
            container = str(self._container(workload)["name"])
            pods, _ = self._pods(self._selector(workload))
        except PlatformError as exc:
            return InstanceLog.unknown(instance, exc.what)
        pod = next((p for p in pods if p["metadata"]["name"] == instance), None)
        if pod is None:
            return InstanceLog.unknown(instance, f"no pod {instance} of {self.label}")
        source = f"pod log {self.namespace}/{instance} container {container} on {self.hook_server()}"
        statuses = (pod.get("status") or {}).get("containerStatuses") or ()
        # a previous container to read first: one restarted and running again (one waiting to restart gives the
        # exited container's log as its current one, as the kubelet answers both reads then)
        restarted = any(c.get("name") == container and (c.get("restartCount") or 0) > 0
                        and (c.get("state") or {}).get("running") for c in statuses)
        deadline = time.monotonic() + timeout_s

        def read(previous: bool, limit: int) -> str:
            left = deadline - time.monotonic()
            if left <= 0.1:
                raise PlatformError(f"the pod log read took over {timeout_s:g} s", retriable=True)
            # the raw body, decoded here: kubernetes-client 36 returns a pod log as the repr of its bytes ("b'...'",
            # kubernetes-client/python#2596), and any release parses a log that happens to be JSON
            kwargs: dict[str, Any] = {"container": container, "previous": previous, "_request_timeout": left,
                                      "limit_bytes": limit, "_preload_content": False}
            if not from_start:  # the newest lines: a line count from the end; limitBytes would cut the newest off,
                # so it only bounds the answer (8x), and the newest ``limit`` bytes are kept here
                kwargs.update(tail_lines=max(1, limit // 100), limit_bytes=8 * limit)
            response = self._call(f"read the log of pod {instance}" + (" (previous container)" if previous else ""),
                                  lambda: self._core().read_namespaced_pod_log(instance, self.namespace, **kwargs))
            try:
                return bytes(response.data or b"").decode("utf-8", "replace")
            finally:
                response.release_conn()

        try:
            text = read(False, max_bytes)
            before = read(True, max(1, max_bytes // 4)) if restarted and not from_start else ""
        except PlatformError as exc:
            return InstanceLog.unknown(instance, exc.what, source=source)
        if before:
            source += " (and its previous container's last lines)"
            text = before.rstrip("\n") + "\n" + text
        cut = from_start and len(text.encode("utf-8", "replace")) >= max_bytes  # its last line is partial
        return InstanceLog.from_text(instance, text, source=source, max_bytes=max_bytes, from_start=from_start,
                                     cut=cut)

    def hook_server(self) -> str:
        return str(self._api().configuration.host)

    def config(self, group_protocol: str | None = None) -> ClientConfig | None:
        workload = self._read()
        container = self._check_target(workload)
        props: dict[str, str] = {}
        sources = []
        if self.properties_config_map is not None:
            ref = self.properties_config_map
            try:
                props.update(parse_config("properties", self._config_map(ref["name"]).get(ref["key"], "")))
            except FormatError as exc:
                raise PlatformError(f"configmap/{ref['name']} key {ref['key']}: {exc}") from exc
            sources.append(f"configmap/{ref['name']} key {ref['key']}")
        env = {v["name"]: v for v in container.get("env") or ()}
        protocol = group_protocol or str(self._protocol_now(container) or "classic")
        for name, (prop, protocols) in sorted(self.env_properties.items()):
            if protocols is not None and protocol not in protocols:
                continue  # the application does not apply it on this protocol
            var = env[name]
            source = var.get("valueFrom") or {}
            if "value" in var and not source:
                props[prop] = str(var.get("value") or "")
            elif source.get("configMapKeyRef"):
                ref = source["configMapKeyRef"]
                props[prop] = self._config_map(ref["name"]).get(ref["key"], "")
            elif source.get("fieldRef"):
                props[prop] = f"(the pod's {source['fieldRef'].get('fieldPath')})"
            else:  # a Secret: never read
                props[prop] = "***"
        if self.env_properties:
            sources.append(f"env {', '.join(sorted(self.env_properties))} of container {container['name']}")
        props["group.protocol"] = protocol
        sources.append(f"group.protocol from {self._protocol_source()}")
        return ClientConfig(properties=props, source=f"{self.label}: " + "; ".join(sources),
                            client=self.client, client_version=self.client_version)

    def _protocol_source(self) -> str:
        if self.protocol_env is not None:
            return f"env {self.protocol_env}"
        ref = self.protocol_config_map
        assert ref is not None
        return f"configmap/{ref['name']} key {ref['key']}" + (f" ({ref['property']})" if ref.get("property") else "")

    def actions(self, group_protocol: str | None) -> Mapping[str, str]:
        protocol = group_protocol or "<protocol>"
        where = self._protocol_source()
        rollout = ("the Deployment's rollout (failing on ProgressDeadlineExceeded)" if self.kind == "Deployment"
                   else f"the StatefulSet's rolling update (at most {self.rollout_timeout:g} s)")
        return {"stop": f"record the replicas of {self.label} (annotation {REPLICAS_ANNOTATION}), scale it to 0, "
                        "and wait until none of its pods exists",
                "start": f"set group.protocol={protocol} in {where}, scale back to the recorded replicas, and wait "
                         "until every pod is Ready",
                "roll": f"set group.protocol={protocol} in {where} as a rolling update, and wait for {rollout}",
                **({"roll_instance": self._by_pod(protocol, where)} if self.can_roll_instances() else {}),
                "status": f"list the pods of {self.label} (the workload's selector)"}

    def _by_pod(self, protocol: str, where: str) -> str:
        if self.kind == "StatefulSet":
            return (f"one pod at a time, highest ordinal first: set group.protocol={protocol} in {where} with the "
                    "update partition at the replicas (no pod moves), then lower the partition to each pod's "
                    "ordinal: Kubernetes terminates that pod (SIGTERM) and recreates it under its name; the "
                    f"partition is restored once every pod runs it (annotation {ROLL_ANNOTATION})")
        return (f"one pod at a time: set group.protocol={protocol} in {where} with strategy maxSurge 0 / "
                "maxUnavailable 1 and minReadySeconds holding the rollout after each new pod; each step marks the "
                "old pod that goes (pod-deletion-cost), lets Kubernetes replace it, and holds again; the strategy "
                f"and minReadySeconds are restored once every pod runs it (annotation {ROLL_ANNOTATION})")

    def describe_target(self) -> Mapping[str, Any]:  # Any: the platform's answer, JSON of several shapes
        return {"workload": f"{self.kind.lower()}/{self.name}" if self.name else
                f"{self.kind.lower()} selected by {self.selector}", "namespace": self.namespace,
                "connection": self.conn_id, "group.protocol in": self._protocol_source()}

    def check(self) -> str:
        workload = self._read()
        self._check_target(workload)
        by_pod = self.can_roll_instances()
        for step in ("stop", "start", "roll", *(("roll_instance",) if by_pod else ())):
            self._authorized(step)
        replicas = int(workload["spec"].get("replicas") or 0)
        return (f"{self.hook_server()}: {self.label}, {replicas} replica(s), selector {self._selector(workload)}; "
                "this identity may stop, start and roll it" + (" (pod by pod too)" if by_pod else ""))

    def close(self) -> None:
        if self._hook is not None and "api_client" in self._hook.__dict__:
            self._hook.api_client.close()
        self._hook = None


__all__ = ["CONFIG_ANNOTATION_PREFIX", "REPLICAS_ANNOTATION", "ROLE_RULES", "KubernetesController", "label_selector"]
