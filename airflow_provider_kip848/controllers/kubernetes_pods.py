"""The ``kubernetes`` controller's roll by instance: one pod at a time, as Kubernetes itself moves pods.

The rolling upgrade's roll by instance (engine/instance_roll.py) restarts one instance, checks that its member
joined on the new protocol (the first instance is the gate), and only then goes on. A Kubernetes workload's pods
are replaced by its own controller, so each step here is a Kubernetes-native way to let exactly one pod through:

* **StatefulSet**: a partitioned rolling update (``spec.updateStrategy.rollingUpdate.partition``). The first step
  changes the template's protocol env and sets the partition to the replicas in one patch (nothing moves: no
  ordinal is at or above it); each step then lowers the partition to the pod's ordinal, highest first, as
  Kubernetes orders a rolling update, and the StatefulSet controller terminates that pod (SIGTERM, its grace
  period) and recreates it under the same name on the new template. A pod below the partition that restarts
  (a crash, a node drain) comes back on the old template: the partition holds the others where they were.
* **Deployment**: its own rolling update, held between pods. The first step changes the template's protocol env
  with ``strategy: RollingUpdate, maxSurge 0, maxUnavailable 1`` and ``minReadySeconds`` at
  :data:`HOLD_MIN_READY_SECONDS` (``progressDeadlineSeconds`` above it, as Kubernetes requires): Kubernetes
  terminates one old pod (the one the roll named, marked first for deletion by
  ``controller.kubernetes.io/pod-deletion-cost``) and creates one new pod, which never counts as available during
  the hold, so the rollout stops there. Each later step lowers ``minReadySeconds`` below the new pods' time Ready
  (they pass), so Kubernetes moves exactly one more pod, and restores the hold as soon as the new pod exists. Once
  every pod runs the protocol, the strategy, ``minReadySeconds`` and progress deadline the Deployment had are
  restored (recorded in the workload's annotation :data:`ROLL_ANNOTATION`) and its rollout completes.

Only a protocol carried by the pod template (``protocol_env``) can be staged per pod: a ConfigMap is read by
every pod that starts, so a pod of the old template restarting would take the new protocol (such a target rolls
as a whole, :meth:`KubernetesController.roll`).

The way back is the same steps toward the protocol the application came from: the pods that moved (their env
says so) move back, the others are left as they are (``unchanged``), and the recorded settings are restored.
"""

from __future__ import annotations

import datetime
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from airflow_provider_kip848.controllers.errors import PlatformError

#: the workload annotation recording what the roll by pod changed besides the protocol (a StatefulSet's partition,
#: a Deployment's strategy and minReadySeconds), restored once every pod runs the protocol
ROLL_ANNOTATION = "kip848.io/roll-by-pod-before"
#: Kubernetes' annotation ranking the pods a ReplicaSet deletes first (lowest first; int32)
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
FIRST_TO_GO = str(-(2**31))
#: a Deployment's minReadySeconds while the roll holds it between pods: a day (the longest wait a task takes)
HOLD_MIN_READY_SECONDS = 86_400
#: a Deployment's new pods must have been Ready this long before the next step lowers minReadySeconds under it: the
#: next new pod would pass the lowered value after as long, and the hold is restored well before
RELEASE_MIN_S = 10


class PodWorkload(Protocol):
    """What the roll by pod uses of :class:`~.kubernetes.KubernetesController` (its API calls and target)."""

    kind: str
    name: str | None
    protocol_env: str | None
    rollout_timeout: float
    poll_seconds: float

    @property
    def label(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    def _read(self) -> dict[str, Any]: ...  # Any: the API's JSON

    def _patch(self, body: Mapping[str, Any], what: str) -> dict[str, Any]: ...  # Any: the API's JSON

    def _patch_pod(self, name: str, body: Mapping[str, Any], what: str) -> None: ...  # Any: the API's JSON

    def _pods(self, selector: str) -> tuple[list[dict[str, Any]], str]: ...  # Any: the API's JSON

    def _selector(self, workload: Mapping[str, Any]) -> str: ...  # Any: the API's JSON

    def _await_pod_change(self, selector: str, resource_version: str, seconds: float) -> None: ...

    def _describe_pods(self, pods: list[dict[str, Any]]) -> str: ...  # Any: the API's JSON

    def _container(self, workload: Mapping[str, Any]) -> dict[str, Any]: ...  # Any: the API's JSON


def pod_protocol(pod: Mapping[str, Any], container: str, env_name: str) -> str | None:  # Any: the API's JSON
    """The protocol env the pod was created with (its own spec, not the template's)."""
    for c in (pod.get("spec") or {}).get("containers") or ():
        if c.get("name") == container:
            var: dict[str, Any] = next((v for v in c.get("env") or () if v.get("name") == env_name), {})
            return None if var.get("value") is None else str(var["value"])
    return None


def ordinal(workload_name: str, pod_name: str) -> int | None:
    """A StatefulSet pod's ordinal (``NAME-<n>``), or None for a name that is not one of its pods."""
    found = re.fullmatch(re.escape(workload_name) + r"-(0|[1-9][0-9]*)", pod_name)
    return int(found.group(1)) if found else None


def _ready_age(pod: Mapping[str, Any]) -> float | None:  # Any: the API's JSON
    """Seconds since the pod turned Ready (None: not Ready)."""
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready" and cond.get("status") == "True" and cond.get("lastTransitionTime"):
            since = datetime.datetime.fromisoformat(str(cond["lastTransitionTime"]).replace("Z", "+00:00"))
            return (datetime.datetime.now(datetime.UTC) - since).total_seconds()
    return None


def _live(pods: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:  # Any: the API's JSON
    return [dict(p) for p in pods if not p["metadata"].get("deletionTimestamp")]


class PodByPod:
    """One step of the roll by pod on ``workload`` (see the module)."""

    def __init__(self, workload: PodWorkload) -> None:
        self.w = workload

    def order(self, names: Sequence[str], group_protocol: str) -> list[str]:
        """A StatefulSet's pods highest ordinal first (its partition moves that way); a Deployment's pods not yet
        on ``group_protocol`` first, by name."""
        workload = self.w._read()
        if self.w.kind == "StatefulSet":
            name = str(workload["metadata"]["name"])
            return sorted(names, key=lambda n: (-(ordinal(name, n) or 0) if ordinal(name, n) is not None else 1, n))
        container, env = self._container_env(workload)
        on = {p["metadata"]["name"] for p in self.w._pods(self.w._selector(workload))[0]
              if pod_protocol(p, container, env) == group_protocol}
        return sorted(names, key=lambda n: (n in on, n))

    def _container_env(self, workload: Mapping[str, Any]) -> tuple[str, str]:  # Any: the API's JSON
        assert self.w.protocol_env is not None  # can_roll_instances: only a template-carried protocol
        return str(self.w._container(workload)["name"]), self.w.protocol_env

    def step(self, workload: dict[str, Any], name: str, group_protocol: str,
             # Any: the API's JSON; the patch that sets the protocol in the template, and what it changes
             protocol_patch: dict[str, Any], change: str, template_protocol: str | None) -> dict[str, Any]:
        container, env = self._container_env(workload)
        selector = self.w._selector(workload)
        # every pod as it is before anything is patched: what the step's successor is told apart from
        listed = self.w._pods(selector)[0]
        pods = _live(listed)
        pod = next((p for p in pods if p["metadata"]["name"] == name), None)
        if pod is None:
            raise PlatformError(f"pod {name} of {self.w.label} does not exist (pods: {self.w._describe_pods(pods)}): "
                                "nothing was changed", retriable=True)
        base = {"workload": f"{self.w.kind.lower()}/{self.w.name}", "namespace": self.w.namespace, "pod": name,
                "group_protocol": group_protocol}
        if pod_protocol(pod, container, env) == group_protocol:
            done = {**base, "unchanged": f"pod {name} already runs {env}={group_protocol}",
                    "uid": pod["metadata"]["uid"]}
            if template_protocol == group_protocol:
                done["restored"] = self._restore_when_done(container, env, group_protocol)
            return done
        if self.w.kind == "StatefulSet":
            moved = self._statefulset_step(workload, pod, listed, group_protocol, protocol_patch, template_protocol)
        else:
            moved = self._deployment_step(workload, pod, listed, group_protocol, protocol_patch, template_protocol)
        restored = self._restore_when_done(container, env, group_protocol)
        return {**base, "change": change, **moved, "restored": restored}

    # -- StatefulSet ---------------------------------------------------------------------------------------------

    def _statefulset_step(self, workload: dict[str, Any], pod: Mapping[str, Any], listed: list[dict[str, Any]],
                          group_protocol: str,
                          # Any: the API's JSON
                          protocol_patch: dict[str, Any], template_protocol: str | None) -> dict[str, Any]:
        name = pod["metadata"]["name"]
        number = ordinal(str(workload["metadata"]["name"]), name)
        replicas = int(workload["spec"].get("replicas") or 0)
        if number is None or number >= replicas:
            raise PlatformError(f"{name} is not a pod of {self.w.label} (NAME-<ordinal> below {replicas}): nothing "
                                "was changed")
        rolling = ((workload["spec"].get("updateStrategy") or {}).get("rollingUpdate") or {})
        partition = int(rolling.get("partition") or 0)
        started = time.monotonic()
        if template_protocol != group_protocol:
            # the template and a partition nothing is at or above, in one patch: no pod moves
            patch = json.loads(json.dumps(protocol_patch))
            patch["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"partition": replicas}}
            patch["metadata"] = {"annotations": self._record(workload, {"partition": partition})}
            self.w._patch(patch, f"group.protocol={group_protocol} in the template, partition {replicas}")
            partition = replicas
        if partition > number:
            self.w._patch({"spec": {"updateStrategy": {"rollingUpdate": {"partition": number}}}},
                          f"partition {partition} -> {number}: pod {name} moves")
        new = self._await_successor(workload, pod, listed, group_protocol, same_name=True, started=started)
        return {"partition": number, "replaced_uid": pod["metadata"]["uid"], "uid": new["metadata"]["uid"],
                "successor": name, "seconds": round(time.monotonic() - started, 3)}

    # -- Deployment ----------------------------------------------------------------------------------------------

    def _deployment_step(self, workload: dict[str, Any], pod: Mapping[str, Any], listed: list[dict[str, Any]],
                         group_protocol: str,
                         # Any: the API's JSON
                         protocol_patch: dict[str, Any], template_protocol: str | None) -> dict[str, Any]:
        name = pod["metadata"]["name"]
        started = time.monotonic()
        # Kubernetes deletes this pod first when its rollout scales the old ReplicaSet down by one
        self.w._patch_pod(name, {"metadata": {"annotations": {DELETION_COST_ANNOTATION: FIRST_TO_GO}}},
                          "mark it the first to go")
        released: int | None = None
        if template_protocol != group_protocol:
            spec = workload["spec"]
            patch = json.loads(json.dumps(protocol_patch))
            patch["spec"]["strategy"] = {"type": "RollingUpdate",
                                         "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
            # pods already on the protocol (the way back's, a rerun's) are in the ReplicaSet that becomes the new
            # one: under the hold they would count as unavailable and Kubernetes would move nothing, so this first
            # step lets them pass, like a later step, and the hold follows once the new pod exists
            container, env = self._container_env(workload)
            if any(pod_protocol(p, container, env) == group_protocol for p in _live(listed)):
                released = self._release(workload, group_protocol, apply=False)
            patch["spec"]["minReadySeconds"] = HOLD_MIN_READY_SECONDS if released is None else released
            # Kubernetes requires progressDeadlineSeconds above minReadySeconds: raised with the hold (the roll's
            # own deadlines judge each pod meanwhile)
            patch["spec"]["progressDeadlineSeconds"] = HOLD_MIN_READY_SECONDS + 1
            patch["metadata"] = {"annotations": self._record(workload, {
                "strategy": spec.get("strategy") or {}, "minReadySeconds": int(spec.get("minReadySeconds") or 0),
                "progressDeadlineSeconds": spec.get("progressDeadlineSeconds")})}
            self.w._patch(patch, f"group.protocol={group_protocol} in the template, held after one pod")
        else:
            released = self._release(workload, group_protocol)
        new = self._await_successor(workload, pod, listed, group_protocol, same_name=False, started=started,
                                    on_new=(lambda: self._hold(released)) if released is not None else None)
        return {"replaced_uid": pod["metadata"]["uid"], "uid": new["metadata"]["uid"],
                "successor": new["metadata"]["name"], "released_at_min_ready_s": released,
                "seconds": round(time.monotonic() - started, 3)}

    def _release(self, workload: Mapping[str, Any], group_protocol: str, *, apply: bool = True) -> int:
        """Lower minReadySeconds under the new pods' time Ready (waiting until it is at least
        :data:`RELEASE_MIN_S`): they count as available, and Kubernetes moves one more pod."""
        container, env = self._container_env(workload)
        deadline = time.monotonic() + self.w.rollout_timeout
        while True:
            pods = _live(self.w._pods(self.w._selector(workload))[0])
            new = [p for p in pods if pod_protocol(p, container, env) == group_protocol]
            ages = [_ready_age(p) for p in new]
            if new and all(a is not None for a in ages):
                youngest = min(a for a in ages if a is not None)
                if youngest >= RELEASE_MIN_S + 1:
                    value = int(youngest) - 1
                    if apply:
                        self.w._patch({"spec": {"minReadySeconds": value}},
                                      f"minReadySeconds {value}: the new pods pass, one more pod moves")
                    return value
            if time.monotonic() >= deadline:
                raise PlatformError(f"the new pods of {self.w.label} are not Ready for {RELEASE_MIN_S} s "
                                    f"({self.w._describe_pods(new)}): no further pod was moved")
            time.sleep(self.w.poll_seconds)

    def _hold(self, released: int | None) -> None:
        if released is not None:
            self.w._patch({"spec": {"minReadySeconds": HOLD_MIN_READY_SECONDS}}, "hold the rollout again")

    # -- both ----------------------------------------------------------------------------------------------------

    def _record(self, workload: Mapping[str, Any], what: Mapping[str, Any]) -> dict[str, str]:
        """The annotation recording ``what`` the roll changes (kept when a roll in progress recorded it first)."""
        existing = (workload["metadata"].get("annotations") or {}).get(ROLL_ANNOTATION)
        return {ROLL_ANNOTATION: existing or json.dumps(what, sort_keys=True)}

    def _await_successor(self, workload: Mapping[str, Any], pod: Mapping[str, Any], before: list[dict[str, Any]],
                         group_protocol: str, *,
                         same_name: bool, started: float,
                         on_new: Callable[[], None] | None = None) -> dict[str, Any]:
        """The pod that replaced ``pod``, once ``pod`` is gone and exactly one new pod on ``group_protocol`` exists
        with its container started (a StatefulSet's under the same name); PlatformError naming the pods when
        another pod went, more than one moved, or nothing moved within the rollout timeout."""
        container, env = self._container_env(workload)
        selector = self.w._selector(workload)
        name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        # every other pod stays as it is while this one moves
        others = {p["metadata"]["uid"]: p["metadata"]["name"] for p in _live(before) if p["metadata"]["uid"] != uid}
        known = {p["metadata"]["uid"] for p in before}
        held = False
        while True:
            pods, version = self.w._pods(selector)
            uids = {p["metadata"]["uid"] for p in pods}
            fresh = [p for p in _live(pods) if p["metadata"]["uid"] not in known]
            if fresh and on_new is not None and not held:
                on_new()
                held = True
            live = {p["metadata"]["uid"] for p in _live(pods)}
            went = [n for u, n in others.items() if u not in live]  # gone or terminating
            if went:
                raise PlatformError(f"Kubernetes replaced {', '.join(went)} of {self.w.label} instead of (or besides) "
                                    f"{name} (pods: {self.w._describe_pods(pods)}): the roll stops here",
                                    remedy="Read the pods' state (a pod that is not Ready is replaced first); the "
                                           "DAG's way back restores the previous group.protocol.")
            if len(fresh) > 1:
                raise PlatformError(f"more than one pod of {self.w.label} moved in one step "
                                    f"({', '.join(p['metadata']['name'] for p in fresh)}): the roll stops here")
            gone = uid not in uids
            # its container started (an incarnation of its own, what the roll holds it to from now on)
            if fresh and gone and (not same_name or fresh[0]["metadata"]["name"] == name) and any(
                    cs.get("name") == container and cs.get("containerID")
                    for cs in (fresh[0].get("status") or {}).get("containerStatuses") or ()):
                if pod_protocol(fresh[0], container, env) != group_protocol:
                    raise PlatformError(f"the pod that replaced {name} of {self.w.label} runs "
                                        f"{env}={pod_protocol(fresh[0], container, env)}, not {group_protocol}")
                return fresh[0]
            left = self.w.rollout_timeout - (time.monotonic() - started)
            if left <= 0:
                raise PlatformError(f"pod {name} of {self.w.label} was not replaced within "
                                    f"{self.w.rollout_timeout:g} s (pods: {self.w._describe_pods(pods)})",
                                    remedy="Read the workload's events and the pods' state; the DAG's way back "
                                           "restores the previous group.protocol.")
            self.w._await_pod_change(selector, version, min(left, self.w.poll_seconds * 2))

    def _restore_when_done(self, container: str, env: str, group_protocol: str) -> dict[str, Any] | None:
        """Once every pod runs ``group_protocol``: the recorded partition (or strategy and minReadySeconds) back,
        the record removed; None while pods are left to move."""
        workload = self.w._read()
        recorded = (workload["metadata"].get("annotations") or {}).get(ROLL_ANNOTATION)
        if not recorded:
            return None
        pods = _live(self.w._pods(self.w._selector(workload))[0])
        replicas = int(workload["spec"].get("replicas") or 0)
        if len(pods) != replicas or any(pod_protocol(p, container, env) != group_protocol for p in pods):
            return None
        before = json.loads(recorded)
        if self.w.kind == "StatefulSet":
            spec: dict[str, Any] = {"updateStrategy": {"rollingUpdate": {"partition": int(before["partition"])}}}
        else:
            spec = {"minReadySeconds": int(before["minReadySeconds"]),
                    "progressDeadlineSeconds": before.get("progressDeadlineSeconds"),
                    "strategy": {"$retainKeys": ["type", "rollingUpdate"], **(before["strategy"] or {
                        "type": "RollingUpdate"})}}
        self.w._patch({"spec": spec, "metadata": {"annotations": {ROLL_ANNOTATION: None}}},
                      "every pod moved: the recorded settings restored")
        return dict(before)


__all__ = ["DELETION_COST_ANNOTATION", "HOLD_MIN_READY_SECONDS", "ROLL_ANNOTATION", "PodByPod", "PodWorkload",
           "ordinal", "pod_protocol"]
