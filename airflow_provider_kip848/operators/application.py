"""The application's side of a migration: its controller checked, the downtime's two hands, the rolling restart.

The provider does not own deployments. Every operator here names the
application's controller from the deployment's registry
(:mod:`airflow_provider_kip848.controllers.registry`): a run's Params select a
*name* (and the arguments that controller declares for a run), never code.

* :class:`KafkaApplicationControllerOperator` runs first in every DAG that
  touches an application, before the change lock: it refuses a name or an
  argument the registry does not know (nothing is executed), and reads what the
  approval shows: the controller, its target, the exact action of each step,
  the instances the platform reports now, and the client configuration the
  application will run with (the lint's input).
* :class:`KafkaApplicationStopOperator` stops every instance and waits until the
  platform shows none (``instances_gone``: the confirmation the empty wait acts
  on; None when the platform cannot tell).
* :class:`KafkaApplicationStartOperator` takes one last look at the group (a
  member that appeared since the Empty wait means an instance of the old
  application still runs; a missing source topic would leave a streams group
  NOT_READY), then starts the application; nothing is started twice, and the
  platform's status right after the start is the baseline a later crash or
  restart is measured against.
* :class:`KafkaApplicationRollOperator`: the rolling restart. Through a controller that can stop and start
  one instance, the provider rolls instance by instance
  (:mod:`airflow_provider_kip848.engine.instance_roll`): the first instance is a gate (it must come in on
  the new protocol before any other restarts), and a static member whose instance is gone is removed
  (audited) before its successor joins. Otherwise the platform's own rolling restart.

Each takes ``when_failed``: the way back of a DAG runs only when one of the
named tasks failed (its wait for the new protocol ran out), and is skipped
otherwise; give such a task ``trigger_rule="all_done"``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_provider_kip848.changecontrol.report import task_states
from airflow_provider_kip848.controllers import GROUP_PROTOCOLS, ControllerError, NamedController
from airflow_provider_kip848.controllers.named import STOP_CONFIRM_SECONDS
from airflow_provider_kip848.controllers.pairing import pairing_basis
from airflow_provider_kip848.controllers.releases import logged_releases
from airflow_provider_kip848.engine.application import last_look
from airflow_provider_kip848.engine.instance_roll import InstanceRollFailed, RollLimits, roll_application
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.audit import complete_earlier_tries
from airflow_provider_kip848.hooks.instances import named_controller, task_error
from airflow_provider_kip848.kafka.arguments import is_template, parse_number, require_group_id
from airflow_provider_kip848.kafka.errors import Kip848Error
from airflow_provider_kip848.operators.run_conf import check_run_conf
from airflow_provider_kip848.operators.schedule import check_unattended_run


def resolve(controller: object, controller_args: object) -> NamedController:
    """The registry's controller for a task: a refused name or argument fails the task at once (bad input)."""
    try:
        named = named_controller(controller, controller_args)
    except Kip848Error as exc:
        raise AirflowFailException(str(exc)) from exc
    if named is None:
        raise AirflowFailException("No application controller was named: set the DAG's app_controller Param to a "
                                   "controller of the deployment's registry (docs/controllers.md).")
    return named


class _ApplicationOperator(BaseOperator):
    template_fields: tuple[str, ...] = ("controller", "controller_args", "approved_fingerprint")
    ui_color = "#fdf1e6"

    def __init__(self, *, controller: str | None, controller_args: dict[str, Any] | str | None = None,
                 when_failed: Sequence[str] = (), required: bool = True, approved_fingerprint: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.controller, self.controller_args = controller, controller_args
        #: the controller's fingerprint the approval showed (templated: :func:`approved_fingerprint`); an action
        #: refuses to run when the registry entry or the run's arguments changed since
        self.approved_fingerprint = approved_fingerprint
        self.when_failed = tuple(when_failed)
        #: False: no controller named is allowed (the task then does nothing and says so)
        self.required = required

    def _unnamed(self) -> bool:
        """No controller named, and none required: the task has nothing to do."""
        return not self.required and self.controller in (None, "", "None")

    def _skip_unless_failed(self, context: Context) -> None:
        if not self.when_failed:
            return
        states = task_states({"ti": context["ti"], "dag_run": context["dag_run"]})
        if not any(states.get(task) == "failed" for task in self.when_failed):
            raise AirflowSkipException(f"none of {', '.join(self.when_failed)} failed: nothing to go back from")

    def _named(self) -> NamedController:
        return resolve(self.controller, self.controller_args)


class KafkaApplicationControllerOperator(_ApplicationOperator):
    """Check the run's controller against the deployment's registry and read what the approval shows.

    :param group_protocol: the protocol the application will be started or rolled with (templated): its
        actions are rendered for it, and its client configuration is read for it.
    :param way_back_protocol: the protocol of the DAG's way back, if any (its actions are shown too).
    :returns: ``{controller: {name, kind, description, args, target, actions, can_roll, way_back}, status,
        config, source_config, topology}``; ``status`` is the platform's status now (``known`` false when it
        cannot tell), ``config`` the client configuration for ``group_protocol``, ``source_config`` for
        ``way_back_protocol`` (the one the application runs with now: what a migration carries over; None: the
        controller does not report it, or no way back), ``topology`` (``group_protocol`` streams only)
        ``{description, source}``: the Streams application's ``Topology#describe()`` text as the controller
        reports it (None: it does not), ``client_releases`` the client release each running instance printed at
        start, read from its log (:func:`~airflow_provider_kip848.controllers.releases.logged_releases`; None:
        the platform cannot say which instances run). With ``required=False`` and no controller named: None.
    """

    template_fields = (*_ApplicationOperator.template_fields, "group_protocol", "way_back_protocol")
    ui_color = "#f3e8fd"

    def __init__(self, *, group_protocol: str, way_back_protocol: str | None = None,
                 **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        self.group_protocol, self.way_back_protocol = group_protocol, way_back_protocol

    def execute(self, context: Context) -> dict[str, Any] | None:  # Any: the controller's plan and status, JSON
        check_run_conf(context)  # the rolling upgrade's first task: a conf key no Param declares fails here
        check_unattended_run(context)  # a scheduled run: only with a controller the registry has
        if self._unnamed():
            self.log.info("No application controller named: the application is not acted on or checked by this run.")
            return None
        named = self._named()  # refused here, before anything of the controller runs
        protocol = str(self.group_protocol)
        if protocol not in GROUP_PROTOCOLS:
            raise AirflowFailException(f"group_protocol must be classic, consumer or streams, not {protocol!r}")
        back = None if self.way_back_protocol in (None, "", "None") else str(self.way_back_protocol)
        try:
            plan = named.plan(protocol)
            if back is not None:
                plan["way_back"] = named.plan(back)["actions"]
            plan["reached"] = named.check()  # a platform that cannot be reached fails here, before the approval
            status = named.status()
            config = named.config(protocol)
            source = named.config(back) if back is not None else None
            # a Streams application's topology, which its migration checks the topics against before the stop
            topology = named.topology() if protocol == "streams" else None
            # the client release each running instance printed at start: the preflight's client_release input
            releases = logged_releases(named, status)
        except ControllerError as exc:
            raise task_error(exc) from exc
        finally:
            named.close()
        self.log.info("Controller %s: %s", named.label, status.summary())
        return {"controller": plan, "status": status.to_dict(), "pairing": pairing_basis(status),
                "config": config.to_dict() if config is not None else None,
                "source_config": source.to_dict() if source is not None else None,
                "topology": {"description": topology, "source": f"controller {named.name!r}"} if topology else None,
                "client_releases": releases}


def instances_gone(stop_task_id: str) -> str:
    """The template that tells a :class:`~airflow_provider_kip848.sensors.group.KafkaGroupEmptySensor` whether
    the stop task's controller confirmed every instance gone (``instances_gone`` true in its result; False
    when the task did not run, or the platform could not tell)."""
    return f"{{{{ (ti.xcom_pull(task_ids='{stop_task_id}') or {{}}).get('instances_gone') == True }}}}"


def approved_fingerprint(controller_task_id: str = "controller") -> str:
    """The template handing an action the fingerprint of the controller its approval showed (None: none named)."""
    return (f"{{{{ ((ti.xcom_pull(task_ids='{controller_task_id}') or {{}}).get('controller') or {{}})"
            ".get('fingerprint') }}")


def start_baseline(start_task_id: str) -> str:
    """The template handing a :class:`~airflow_provider_kip848.sensors.group.KafkaGroupMigratedSensor` the
    platform's status right after the start (or roll) task: the baseline of its restart check."""
    return f"{{{{ (ti.xcom_pull(task_ids='{start_task_id}') or {{}}).get('status') }}}}"


class KafkaApplicationStopOperator(_ApplicationOperator):
    """Stop every instance through the controller and wait until the platform shows none; returns what was
    done, when the stop was issued (``stop_started_at``, epoch s: the start of the processing gap), the
    platform's status after it, and ``instances_gone`` (True: confirmed; None: it cannot tell). A
    stop after which instances still run fails, naming them: never reported as stopped.

    :param confirm_seconds: how long the platform may take to show every instance gone (templated).
    """

    template_fields = (*_ApplicationOperator.template_fields, "confirm_seconds")

    def __init__(self, *, confirm_seconds: float | str = STOP_CONFIRM_SECONDS,
                 **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        self.confirm_seconds = confirm_seconds

    def execute(self, context: Context) -> dict[str, Any]:  # Any: the controller's action and status, JSON
        self._skip_unless_failed(context)
        named = self._named()
        try:
            seconds = parse_number(self.confirm_seconds, "confirm_seconds") or 0.0
        except Kip848Error as exc:
            raise AirflowFailException(str(exc)) from exc
        started = time.time()
        try:
            named.require_fingerprint(self.approved_fingerprint)
            result = {**named.stop(confirm_seconds=seconds), "stop_started_at": started}
        except ControllerError as exc:
            raise task_error(exc) from exc
        finally:
            named.close()
        self.log.info("Stopped through %s: %s", named.label, result["status"]["summary"])
        if result["instances_gone"] is True:
            self.log.info("The platform confirms every instance gone: the group is emptied at once.")
        elif result["instances_gone"] is None:
            self.log.info("The platform cannot tell whether instances remain: their members are left to expire.")
        return result


class KafkaApplicationStartOperator(_ApplicationOperator):
    """Start the application with ``group.protocol=<group_protocol>`` once the group is still Empty (or gone)
    and every declared source topic exists.

    :param kafka_conn_id: the cluster of the group.
    :param group_id: the application's group (a Streams ``application.id``).
    :param group_protocol: ``classic``, ``consumer`` or ``streams`` (templated).
    :param source_topics: comma-separated or a list; None or empty: not checked.
    :param expected_instances: with this many instances already running, nothing is started (templated).
    """

    template_fields = (*_ApplicationOperator.template_fields, "kafka_conn_id", "group_id", "group_protocol",
                       "source_topics", "expected_instances")

    def __init__(self, *, kafka_conn_id: str, group_id: str, group_protocol: str,  # Any: passed to BaseOperator
                 source_topics: str | Sequence[str] | None = None, expected_instances: int | str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_conn_id, self.group_id, self.group_protocol = kafka_conn_id, group_id, group_protocol
        self.source_topics, self.expected_instances = source_topics, expected_instances

    def execute(self, context: Context) -> dict[str, Any]:  # Any: the controller's action and status, JSON
        self._skip_unless_failed(context)
        named = self._named()
        protocol = str(self.group_protocol)
        try:
            expected = parse_number(self.expected_instances, "expected_instances", minimum=1, integer=True,
                                    optional=True)
        except Kip848Error as exc:
            raise AirflowFailException(str(exc)) from exc
        with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
            last_look(hook, [self.group_id], protocol, self.source_topics)
        try:
            named.require_fingerprint(self.approved_fingerprint)
            result = named.start(protocol, expected=int(expected) if expected is not None else None)
        except ControllerError as exc:
            raise task_error(exc) from exc
        finally:
            named.close()
        self.log.info("Started through %s on %s: %s", named.label, protocol, result["status"]["summary"])
        return result


def _number(value: object, name: str, minimum: float) -> float:
    number = parse_number(value, name, minimum=minimum)
    assert number is not None  # not optional: parse_number returns a number or raises
    return number


#: the first-instance gate's deadline by default: a converting instance is in within seconds
FIRST_INSTANCE_MINUTES = 5.0


class KafkaApplicationRollOperator(_ApplicationOperator):
    """Restart the instances one at a time with ``group.protocol=<group_protocol>`` through the controller;
    returns what was done and the platform's status after it (the baseline of the migrated wait's restart
    check).

    Given the groups (``kafka_conn_id`` and ``group_ids``) and a controller that can stop and start one
    instance, the provider rolls instance by instance (:mod:`airflow_provider_kip848.engine.instance_roll`):
    the first instance must come in on the new protocol within ``first_instance_timeout_minutes`` before any
    other restarts (the gate), each later one within ``instance_timeout_minutes``, and a static member whose
    instance is gone is removed (audited to ``audit_log``) before its successor joins. Otherwise the
    platform's own rolling restart runs, and the result says so (``mode``: ``by_instance`` or ``platform``).

    :param group_protocol: ``consumer`` (the upgrade) or ``classic`` (its way back) (templated).

    With ``required=False`` and no controller named, nothing is rolled: the result says the application team
    rolls it (the migrated wait then judges from the broker alone).
    """

    template_fields = (*_ApplicationOperator.template_fields, "group_protocol", "kafka_conn_id", "group_ids",
                       "first_instance_timeout_minutes", "instance_timeout_minutes", "poll_interval", "audit_log")

    def __init__(self, *, group_protocol: str, kafka_conn_id: str | None = None,  # Any: passed to BaseOperator
                 group_ids: str | Sequence[str] | None = None,
                 first_instance_timeout_minutes: float | str = FIRST_INSTANCE_MINUTES,
                 instance_timeout_minutes: float | str = 15.0, poll_interval: float | str = 1.0,
                 audit_log: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.group_protocol, self.kafka_conn_id, self.group_ids = group_protocol, kafka_conn_id, group_ids
        self.first_instance_timeout_minutes = first_instance_timeout_minutes
        self.instance_timeout_minutes, self.poll_interval = instance_timeout_minutes, poll_interval
        self.audit_log = audit_log

    def execute(self, context: Context) -> dict[str, Any]:  # Any: the controller's action and status, JSON
        self._skip_unless_failed(context)
        if self._unnamed():
            return {"controller": None, "action": "roll", "group_protocol": str(self.group_protocol),
                    "platform": {"rolled_by": "the application team (no controller named)"}, "status": None}
        try:
            given = self.group_ids
            groups = ([] if given in (None, "", "None") else
                      [require_group_id(g) for g in ([given] if isinstance(given, str) else given)])
            limits = RollLimits(
                first_instance_s=60 * _number(self.first_instance_timeout_minutes, "first_instance_timeout_minutes",
                                              0.01),
                instance_s=60 * _number(self.instance_timeout_minutes, "instance_timeout_minutes", 0.01),
                poll_s=_number(self.poll_interval, "poll_interval", 0.1))
        except Kip848Error as exc:
            raise AirflowFailException(str(exc)) from exc
        named = self._named()
        try:
            named.require_fingerprint(self.approved_fingerprint)
            conn = None if self.kafka_conn_id in (None, "", "None") else str(self.kafka_conn_id)
            if conn is None or not groups:
                result = roll_application(named, None, [], str(self.group_protocol), limits, context=context,
                                          task_id=self.task_id, audit_log=self.audit_log, log=self.log)
            else:
                with KafkaGroupAdminHook(conn) as hook:
                    # a killed try's static-member removals: completed before this try rolls anything
                    complete_earlier_tries(context, self.task_id, hook, self.audit_log, log=self.log)
                    result = roll_application(named, hook, groups, str(self.group_protocol), limits,
                                              context=context, task_id=self.task_id, audit_log=self.audit_log,
                                              log=self.log)
        except ControllerError as exc:
            raise task_error(exc) from exc
        except InstanceRollFailed as exc:
            context["ti"].xcom_push(key="rolled", value=exc.rolled)
            raise AirflowFailException(f"The roll to {self.group_protocol} stopped: {exc.what}") from exc
        finally:
            named.close()
        self.log.info("Rolled through %s to %s (%s): %s", named.label, self.group_protocol, result["mode"],
                      result["status"]["summary"])
        return result


def controller_is_named(value: object) -> bool:
    """A controller Param that names one (null and empty mean none: e.g. the rolling upgrade rolled by a team)."""
    return value not in (None, "", "None") and not is_template(value)


def plan_lines(controller_result: Mapping[str, Any] | None) -> list[str]:  # Any: the controller task's XCom
    """The approval's lines about the controller: which one, where, the exact action of each step, and what the
    platform shows now (the DAGs' plans add them to their notes)."""
    if not controller_result:
        return ["application controller: none (the application is not stopped, started or checked by this run)"]
    plan = controller_result["controller"]
    lines = [f"application controller: {plan['name']} (kind {plan['kind']})"
             + (f": {plan['description']}" if plan.get("description") else "")
             + (f"; entry fingerprint {plan['fingerprint'][:16]} (an action refuses another)"
                if plan.get("fingerprint") else "")]
    if plan.get("args"):
        lines.append(f"controller arguments of this run: {plan['args']}")
    target = {k: v for k, v in (plan.get("target") or {}).items() if v not in (None, [], {})}
    if target:
        lines.append("controller target: " + ", ".join(f"{k}={v}" for k, v in sorted(target.items())))
    for step, action in (plan.get("actions") or {}).items():
        lines.append(f"controller {step}: `{action}`")
    for step, action in (plan.get("way_back") or {}).items():
        if step in ("start", "roll"):
            lines.append(f"controller {step} (way back): `{action}`")
    status = controller_result.get("status") or {}
    lines.append(f"instances now (the platform): {status.get('summary', 'unknown')}")
    if controller_result.get("pairing"):  # how the waits tell members from instances (issue 46)
        lines.append(f"members and instances: {controller_result['pairing']}")
    return lines


__all__ = ["KafkaApplicationControllerOperator", "KafkaApplicationRollOperator", "KafkaApplicationStartOperator",
           "KafkaApplicationStopOperator", "approved_fingerprint", "controller_is_named", "instances_gone",
           "last_look", "plan_lines", "resolve", "start_baseline"]
