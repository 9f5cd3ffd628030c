"""The ``report`` task of every single-group DAG, built from a declaration.

Each change DAG ends with one task (``trigger_rule="all_done"``) that
judges the run's outcome, gathers what its tasks returned, measures the
downtime, writes the report, releases the change lock and fails the run for a
failing outcome. The steps are the same everywhere; what differs is declared:
the title, the outcome rule, which task results go in which section, the tasks
whose changes the audit trail quotes. :func:`report_task` turns a
:class:`RunReport` into the task, so a DAG file declares its report in a few
lines and the logic lives here once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow.sdk import XComArg, task
from airflow.sdk.exceptions import AirflowFailException
from airflow.sdk.types import RuntimeTaskInstanceProtocol

from airflow_provider_kip848.changecontrol import report as run_reports
from airflow_provider_kip848.changecontrol.artifacts import write_run_file
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.audit import trail_location
from airflow_provider_kip848.kafka.errors import Kip848Error
from airflow_provider_kip848.operators.downtime import measured_downtime
from airflow_provider_kip848.operators.lock import release_change_lock
from airflow_provider_kip848.operators.report_link import with_report_link

#: a section of the report's results: a task id (its return value), ``(task id, key)`` (its return value, else
#: that XCom key: a preflight that failed pushed its report there), or a mapping of such
Pull = str | tuple[str, str] | Mapping[str, Any]
#: ``(params, context, plan) -> outcome``
OutcomeRule = Callable[[dict[str, Any], dict[str, Any], dict[str, Any] | None], str]

#: the preflight's result: its return value, or the report it pushed before failing
PREFLIGHT: tuple[str, str] = ("preflight", "report")


def pull(ti: RuntimeTaskInstanceProtocol, spec: Pull) -> Any:  # Any: an XCom value, any JSON
    """What ``spec`` names, from the run's XComs."""
    if isinstance(spec, str):
        return ti.xcom_pull(task_ids=spec)
    if isinstance(spec, tuple):
        return ti.xcom_pull(task_ids=spec[0]) or ti.xcom_pull(task_ids=spec[0], key=spec[1])
    return {name: pull(ti, inner) for name, inner in spec.items()}


def downtime_rule(*, done: str, way_back_task: str, deadline_tasks: tuple[str, ...],
                  nothing_to_do: Callable[[dict[str, Any]], bool] | None = None,  # Any: the plan, JSON
                  ) -> OutcomeRule:
    """The outcome of a downtime DAG (:func:`~airflow_provider_kip848.changecontrol.report.downtime_outcome`):
    the new application missing one of ``deadline_tasks`` is what the way back is for, not a failure once
    ``way_back_task`` succeeded. ``nothing_to_do(plan)``: default the plan's own ``nothing_to_do``."""

    def rule(params: dict[str, Any], context: dict[str, Any], plan: dict[str, Any] | None) -> str:
        nothing = bool(plan and (nothing_to_do(plan) if nothing_to_do else plan["nothing_to_do"]))
        return run_reports.downtime_outcome(context, nothing_to_do=nothing, dry_run=params["dry_run"], done=done,
                                            way_back_task=way_back_task, deadline_tasks=deadline_tasks)

    return rule


def change_rule(*, apply_task: str) -> OutcomeRule:
    """The outcome of a DAG that applies one change
    (:func:`~airflow_provider_kip848.changecontrol.report.change_outcome`)."""

    def rule(params: dict[str, Any], context: dict[str, Any], plan: dict[str, Any] | None) -> str:
        return run_reports.change_outcome(context, plan=plan, dry_run=params["dry_run"], apply_task=apply_task)

    return rule


def rollout_rule(*, done: str, way_back_task: str, back_task: str, deadline_tasks: tuple[str, ...]) -> OutcomeRule:
    """The outcome of a rolling change with a way back
    (:func:`~airflow_provider_kip848.changecontrol.report.rollout_outcome`)."""

    def rule(params: dict[str, Any], context: dict[str, Any], plan: dict[str, Any] | None) -> str:
        return run_reports.rollout_outcome(context, nothing_to_do=bool(plan and plan["nothing_to_do"]),
                                           dry_run=params["dry_run"], done=done, way_back_task=way_back_task,
                                           back_task=back_task, deadline_tasks=deadline_tasks)

    return rule


def output_written(context: Mapping[str, Any],  # Any: the @task's keyword context
                   before_task: str = "capture_output_before",
                   after_task: str = "capture_output_after") -> int | None:
    """Records the application wrote to its output topic between the two captures (None: not captured)."""
    ti = context["ti"]
    before, after = ti.xcom_pull(task_ids=before_task), ti.xcom_pull(task_ids=after_task)
    if not before or not after:
        return None
    return sum(v["log_end"] - before.get(k, {}).get("log_end", 0) for k, v in after.items())


def group_after(params: Mapping[str, Any], group_param: str, *,
                members: bool = True) -> dict[str, Any]:  # Any: the run's params in, the group as JSON out
    """The group as the cluster shows it when the report is written (an error says why, never a guess)."""
    try:
        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            now = hook.describe_group(params[group_param]).to_dict()
    except Exception as exc:  # noqa: BLE001 - the report must still be written
        return {"error": str(exc)}
    listed: Any = [(m["client_id"], m["protocol"]) for m in now["members"]] if members else len(now["members"])
    return {"type": now["type"], "state": now["state"], "members": listed}


def audit_trail_of(params: Mapping[str, Any]) -> str | None:  # Any: the run's params (JSON)
    """Where the run's change tasks wrote their audit records (the deployment's location for the run's
    connection): the report reads the run's changes there, an intent without an outcome included."""
    try:
        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            return trail_location(hook, params.get("audit_log"))
    except Exception as exc:  # noqa: BLE001 - the report must still be written: it falls back to the XComs
        logging.getLogger("airflow.task").warning("The run's audit trail cannot be located (%s); the report "
                                                  "quotes the change tasks' records only.", exc)
        return None


@dataclass(frozen=True)
class RunReport:
    """What a DAG's report holds.

    :param title: the report's title, from the run's params.
    :param outcome: the outcome rule (:func:`downtime_rule`, :func:`change_rule`, or the DAG's own).
    :param results: report section name -> :data:`Pull`.
    :param change_tasks: the tasks whose changes the audit trail holds (quoted with their approvals).
    :param approval_task_ids: the approvals the change-control section quotes (None: its default).
    :param group_param: the Param naming the group (``group_id``, ``application_id``); None: no group.
    :param target: the group type the run moves to (its downtime is measured); None: no downtime section.
    :param after_members: the group after as (client id, protocol) pairs; False: a count.
    :param before, after: the report's before and after from ``(params, context, plan)``, instead of the
        plan's facts and the group now.
    :param extra: more results from ``(params, context)``.
    :param fail_outcomes: outcomes that fail the task, from the params.
    :param metrics: include the brokers' group metrics.
    :param validation_task: the task whose result may hold the output records' timing (downtime).
    :param split: where a way back left the group (:func:`~airflow_provider_kip848.engine.way_back.split_of`,
        pushed by the way back's task): the report says whether the group is mixed, and which instances and
        members are not back.
    """

    title: Callable[[dict[str, Any]], str]  # Any: the run's params, JSON of each DAG's own Params
    outcome: OutcomeRule
    results: Mapping[str, Pull]
    change_tasks: tuple[str, ...] = ()
    approval_task_ids: tuple[str, ...] | None = None
    group_param: str | None = "group_id"
    target: Callable[[dict[str, Any]], str] | None = None  # Any: the run's params (JSON)
    after_members: bool = True
    before: Callable[[dict[str, Any], dict[str, Any], dict[str, Any] | None], Any] | None = None  # Any: JSON
    after: Callable[[dict[str, Any], dict[str, Any], dict[str, Any] | None], Any] | None = None  # Any: JSON
    extra: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None  # Any: JSON
    fail_outcomes: Callable[[dict[str, Any]], tuple[str, ...]] = field(  # Any: the run's params (JSON)
        default=lambda params: ("failed", "refused", "locked"))
    metrics: bool = True
    validation_task: str | None = "validate"
    split: tuple[str, str] | None = None  # (task id, XCom key): the key only, never the task's return value

    def build(self, params: dict[str, Any], context: dict[str, Any],
              ) -> dict[str, Any]:  # Any: the @task's params and context in, the report (JSON) out
        """Judge, gather, measure, write, release the lock; the task's return value (fails a failing outcome)."""
        ti = context["ti"]
        plan = ti.xcom_pull(task_ids="make_plan")
        decision = ti.xcom_pull(task_ids="approval", key="decision")
        outcome = self.outcome(params, context, plan)
        before = self.before(params, context, plan) if self.before else (plan or {}).get("facts")
        if self.after is not None:
            after = self.after(params, context, plan)
        elif self.group_param is not None:
            after = group_after(params, self.group_param, members=self.after_members)
        else:
            after = None
        sections: dict[str, Any] = {}
        if self.group_param is not None:
            sections["group_id"] = params[self.group_param]
        if self.target is not None and self.group_param is not None:
            sections["downtime"] = measured_downtime(context, params["kafka_conn_id"], params[self.group_param],
                                                     outcome, target=self.target(params),
                                                     facts=(plan or {}).get("facts"),
                                                     validation_task=self.validation_task)
        if self.metrics:
            sections["metrics"] = run_reports.group_metrics(context)
        if self.split is not None and (split := ti.xcom_pull(task_ids=self.split[0], key=self.split[1])):
            sections["split"] = split
        results = {name: pull(ti, spec) for name, spec in self.results.items()}
        if self.extra is not None:
            results.update(self.extra(params, context))
        trail = audit_trail_of(params)
        control = (run_reports.change_control(context, self.change_tasks, audit_log=trail)
                   if self.approval_task_ids is None else
                   run_reports.change_control(context, self.change_tasks, approval_task_ids=self.approval_task_ids,
                                              audit_log=trail))
        result = run_reports.build_report(
            title=self.title(params), outcome=outcome, context=context, failed_tasks=run_reports.failed_tasks(context),
            plan=plan, approvals={"approval": decision}, before=before, after=after, results=results,
            change_control=control, **sections)
        return run_reports.finish(context, result, lock=release_change_lock(context),
                                  fail_outcomes=self.fail_outcomes(params))


def write_report_file(context: Mapping[str, Any], name: object, text: str, *,  # Any: a @task's keyword context
                      param: str) -> str:
    """Write ``text`` as the file ``name`` (the run's Param ``param``: a file name alone) of the run's own report
    folder (``changecontrol.artifacts.write_run_file``); a name that is not one, or no configured location, fails
    the task without a retry and writes nothing."""
    dag, conn_id = context.get("dag"), (context.get("params") or {}).get("kafka_conn_id")
    try:
        return write_run_file(conn_id, getattr(dag, "dag_id", "dag"), str(context.get("run_id") or "run"), "report",
                              name, text, param=param)
    except Kip848Error as exc:
        raise AirflowFailException(str(exc)) from exc


def report_task(spec: RunReport, *, task_id: str = "report") -> XComArg:
    """The DAG's report task (``trigger_rule="all_done"``: it runs however the run went), with the "Report"
    extra link to the run's report page."""

    @task(task_id=task_id, trigger_rule="all_done")
    def report(params: dict[str, Any] | None = None, **context: Any) -> dict[str, Any]:
        return spec.build(params or {}, context)

    return with_report_link(report())


__all__ = ["PREFLIGHT", "OutcomeRule", "Pull", "RunReport", "audit_trail_of", "change_rule", "downtime_rule",
           "group_after", "output_written", "pull", "report_task", "rollout_rule"]
