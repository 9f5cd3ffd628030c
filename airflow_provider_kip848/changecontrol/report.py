"""The run report: what was found, approved, changed and verified, as JSON and readable Markdown."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol import storage
from airflow_provider_kip848.changecontrol.artifacts import optional_run_location
from airflow_provider_kip848.changecontrol.audit import FAILED, UNKNOWN, read_audit, summary
from airflow_provider_kip848.changecontrol.downtime import downtime_chart, downtime_markdown
from airflow_provider_kip848.changecontrol.monitoring import metrics_chart, metrics_section
from airflow_provider_kip848.kafka.errors import Kip848Error
from airflow_provider_kip848.kafka.inert import md_fence, md_name, md_text

#: the downtime chart's file name next to report.md
DOWNTIME_CHART = "downtime.svg"
#: the outcome of a run that could not take its change lock (another run holds it): it changed nothing, and fails
LOCKED = "locked"


def approval_record(payload: Any) -> dict[str, Any] | None:  # Any: a HITL operator's XCom (JSON)
    """Normalise a HITL operator's XCom (chosen option, who, when)."""
    if not payload:
        return None
    user = payload.get("responded_by_user") or {}
    responded = payload.get("responded_at")
    return {
        "decision": (payload.get("chosen_options") or [None])[0],
        "by": user.get("name") if isinstance(user, dict) else str(user),
        "by_id": user.get("id") if isinstance(user, dict) else None,
        "at": responded.isoformat() if hasattr(responded, "isoformat") else responded,
        "params_input": payload.get("params_input") or {},
    }


def render_markdown(  # Any: JSON of several shapes (XCom, reports)
        report: dict[str, Any], chart: str | None = None, downtime_file: str | None = None) -> str:
    """The report as a person reads it: the run, its downtime (``downtime_file``: its chart's SVG file), its approvals
    and lock, before/after, the brokers' group metrics over the change (``chart``: the SVG file next to it),
    change control, results. The report's values are data (names, broker messages): each is a name
    (:func:`~airflow_provider_kip848.kafka.inert.md_name`) or inert text (:func:`~.inert.md_text`); the
    plan is the Markdown its approver saw (:meth:`~.plan.Plan.render_markdown`, which escaped its names)."""
    lines = _summary_lines(report)
    downtime = report.get("downtime")
    if downtime and downtime.get("error"):
        lines += ["", "## Downtime", "", f"Not measured: {md_text(downtime['error'])}"]
    elif downtime:
        lines += ["", *downtime_markdown(downtime, downtime_file)]
    for section in ("before", "after"):
        if report.get(section):
            lines += ["", f"## {section.title()}", "", *_json_block(report[section])]
    if report.get("split"):
        lines += ["", "## After the way back (the coordinator's members, the platform's instances)", "",
                  *_json_block(report["split"])]
    lines += _metrics_lines(report.get("metrics"), chart)
    lines += _change_control_lines(report.get("change_control") or {})
    if report.get("plan"):
        lines += ["", "## Plan", "", report["plan"].get("markdown", "")]
    for name, value in (report.get("results") or {}).items():
        lines += ["", f"## {md_text(name)}", "", *_json_block(value, limit=4000)]
    return "\n".join(lines) + "\n"


def _metrics_lines(section: dict[str, Any] | None, chart: str | None) -> list[str]:
    if not section:
        return []
    lines = ["", "## Group metrics (brokers)", "", f"_{md_text(section.get('note', ''))}_", "",
             "| point | taken at | groups by protocol | streams groups by state | rebalances classic / consumer / "
             "streams (total) |", "|---|---|---|---|---|"]
    for row in section["samples"]:
        counts = " / ".join("?" if row.get(f"{p}_rebalance_count") is None else str(row[f"{p}_rebalance_count"])
                            for p in ("classic", "consumer", "streams"))
        lines.append(f"| {md_text(row['label'], cell=True)} | "
                     f"{md_text(row.get('taken_at') or row.get('note') or '?', cell=True)} | "
                     f"{md_text(row.get('groups_by_protocol') or '?', cell=True)} | "
                     f"{md_text(row.get('streams_groups_by_state') or '?', cell=True)} | {counts} |")
    if section.get("rebalances_during_change"):
        lines += ["", "Rebalances counted during the change: " + ", ".join(
            f"{p} {'?' if n is None else n}" for p, n in section["rebalances_during_change"].items())]
    if chart:
        lines += ["", f"![group metrics over the change]({chart})"]
    return lines


def _json_block(value: Any, limit: int | None = None) -> list[str]:
    text = json.dumps(value, indent=1, default=str)
    return md_fence(text[:limit] if limit else text, "json")


def _summary_lines(report: dict[str, Any]) -> list[str]:
    lines = [f"# {md_text(report['title'])}", "",
             f"- DAG run: {md_name(report.get('dag_id'))} / {md_name(report.get('run_id'))}",
             f"- outcome: **{md_text(report['outcome'])}**", f"- generated: {md_text(report['generated_at'])}"]
    for key in ("group_id", "triggered_by"):
        if report.get(key):
            lines.append(f"- {key.replace('_', ' ')}: {md_name(report[key])}")
    for name, approval in (report.get("approvals") or {}).items():
        if approval:
            lines.append(f"- approval {md_name(name)}: {md_text(approval['decision'])} by {md_name(approval['by'])} "
                         f"at {md_text(approval['at'])}")
    split = report.get("split") or {}
    if split.get("summary"):  # where a way back left the group (engine/way_back.py)
        bold = "" if split.get("back") else "**"
        lines.append(f"- after the way back: {bold}{md_text(split['summary'])}{bold}")
    lock = report.get("lock") or {}
    if lock.get("refused"):
        lines.append(f"- change lock: **refused**: {md_text(lock['refused'])}")
        if lock.get("held_by"):
            lines.append(f"- lock held by: {md_text(lock['held_by'])}")
    elif lock.get("held"):
        released = ", released" if lock.get("released") else ", NOT released: " + md_text(lock.get("release_error"))
        lines.append(f"- change lock: {md_name(lock['resource'])} held by this run{released}")
    return lines


def _change_control_lines(control: dict[str, Any]) -> list[str]:
    if not control:
        return []
    policy = control.get("policy") or {}
    lines = ["", "## Change control", ""]
    if policy:
        relaxed = policy.get("four_eyes") == "relaxed"
        lines.append(f"- four-eyes rule: **{md_text(policy.get('four_eyes'))}**"
                     + (" (relaxed for this run: the triggering user could approve)" if relaxed else ""))
        who = policy.get("triggered_by")
        lines.append(f"- approvers: {_approvers(policy.get('approvers'))}; triggered by: "
                     f"{md_name(who) if who else md_text(who)}")
    for reason in (control.get("recheck") or {}).get("reasons") or []:
        lines.append(f"- approval not reused: {md_text(reason)}")
    if control.get("audit"):
        lines += ["", "| change | target | before | after | outcome | approved by | record |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {md_text(a['kind'], cell=True)} | {md_name(a['target'], cell=True)} | "
                  f"{md_name(json.dumps(a['before'], default=str), cell=True)} | "
                  f"{md_name(json.dumps(a['after'], default=str), cell=True)} | {_outcome_cell(a)} | "
                  f"{', '.join(md_name(u, cell=True) for u in a['approved_by'] if u) or '-'} "
                  f"| {md_text(a['record_id'][:12], cell=True)} |" for a in control["audit"]]
    elif policy:
        lines.append("- audit: no change was applied by this run")
    if control.get("audit_unread"):
        lines.append(f"- audit trail not read: {md_text(control['audit_unread'])}")
    return lines


def _approvers(value: object) -> str:
    """The approvers as the policy recorded them: user ids (names), or the words "anyone allowed by Airflow"."""
    if isinstance(value, (list, tuple)):
        return ", ".join(md_name(u) for u in value)
    return md_text(value)


def _outcome_cell(row: dict[str, Any]) -> str:
    """A change's outcome in the table; one no outcome record completed stands out (the change may or may not
    have reached the cluster: its worker was killed and no retry completed the record)."""
    outcome = str(row.get("outcome") or "applied")
    shown = md_text(outcome, cell=True)  # a failure's outcome quotes the error, which may quote a name
    return f"**{shown}**" if outcome == UNKNOWN or outcome.startswith(FAILED) else shown


def build_report(  # Any: a task's Context (or the Airflow layers' dict of it)
        *, title: str, outcome: str, context: Mapping[str, Any], **sections: Any) -> dict[str, Any]:
    dag_run = context.get("dag_run")
    return {
        "title": title,
        "outcome": outcome,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "dag_id": getattr(dag_run, "dag_id", None),
        "run_id": getattr(dag_run, "run_id", None),
        "triggered_by": getattr(dag_run, "triggering_user_name", None),
        **sections,
    }


def change_control(context: Mapping[str, Any], change_task_ids: tuple[str, ...] = (),
                   # Any: a task's Context (or the Airflow layers' dict of it)
                   approval_task_ids: tuple[str, ...] = ("approval", "recheck_approval"),
                   audit_log: str | None = None) -> dict[str, Any]:
    """The run's change-control facts: the policy, the decisions, why an approval was not reused,
    and the run's changes with their outcome: the records the run's tasks wrote at ``audit_log`` (the trail:
    an intent a killed worker left alone is there, ``outcome unknown``), and those the change tasks pushed
    (their XCom ``audit``: what a trail on another worker's disk holds)."""
    ti = context["ti"]
    policy = next((p for t in approval_task_ids if (p := ti.xcom_pull(task_ids=t, key="change_control"))), None)
    pushed: list[dict[str, Any]] = []
    for task_id in change_task_ids:
        pushed += ti.xcom_pull(task_ids=task_id, key="audit") or []
    records, unread = _run_records(context, audit_log)
    known = {r.get("record_id") for r in records}
    records += [r for r in pushed if r.get("record_id") not in known]
    decisions = {t: d for t in approval_task_ids if (d := ti.xcom_pull(task_ids=t, key="decision"))}
    return {"policy": policy, "decisions": {t: {k: d.get(k) for k in ("decision", "by", "at", "plan_hash", "reused",
                                                                       "refused")} for t, d in decisions.items()},
            "recheck": (ti.xcom_pull(task_ids="recheck_approval", key="recheck")
                        if "recheck_approval" in approval_task_ids else None),
            "audit": summary(records), "audit_unread": unread,
            "audit_locations": sorted({r.get("written_to", "") for r in pushed}
                                      | ({audit_log} if audit_log else set()))}


def _run_records(context: Mapping[str, Any],  # Any: a task's Context; JSON records out
                 audit_log: str | None) -> tuple[list[dict[str, Any]], str | None]:
    """This run's records at ``audit_log`` (none without one), and why they could not be read (None: read)."""
    dag_run = context.get("dag_run")
    dag_id, run_id = getattr(dag_run, "dag_id", None), getattr(dag_run, "run_id", None)
    if not audit_log or run_id is None:
        return [], None
    started = getattr(dag_run, "start_date", None)
    since = started.astimezone(UTC).date().isoformat() if isinstance(started, datetime) else None
    try:
        found = read_audit(audit_log, since_day=since)
    except Kip848Error as exc:
        return [], str(exc)
    return [r for r in found if (r.get("dag_id"), r.get("run_id")) == (dag_id, run_id)], None


#: the side-branch tasks that sample the brokers' group metrics in the migration DAGs, in order
METRICS_TASK_IDS = ("metrics_before", "metrics_during", "metrics_after")


def group_metrics(  # Any: a task's Context (or the Airflow layers' dict of it)
        context: Mapping[str, Any], task_ids: tuple[str, ...] = METRICS_TASK_IDS) -> dict[str, Any] | None:
    """The run's group-metrics samples as the report's section (None when no sample task ran)."""
    return metrics_section([context["ti"].xcom_pull(task_ids=t) for t in task_ids])


def write_report(  # Any: JSON of several shapes (XCom, reports)
        directory: str, report: dict[str, Any]) -> dict[str, str]:
    base = directory.rstrip("/")
    json_path, md_path = f"{base}/report.json", f"{base}/report.md"
    files = {"json": json_path, "markdown": md_path}
    chart = metrics_chart(report.get("metrics"))
    if chart:  # written first: the Markdown links to it
        files["metrics_chart"] = f"{base}/metrics.svg"
        storage.write_text(files["metrics_chart"], chart)
    downtime = report.get("downtime")
    downtime_svg = downtime_chart(downtime) if downtime and not downtime.get("error") else None
    if downtime_svg:
        files["downtime_chart"] = f"{base}/{DOWNTIME_CHART}"
        storage.write_text(files["downtime_chart"], downtime_svg)
    storage.write_text(json_path, json.dumps(report, indent=1, default=str) + "\n")
    storage.write_text(md_path, render_markdown(report, chart="metrics.svg" if chart else None,
                                                downtime_file=DOWNTIME_CHART if downtime_svg else None))
    return files


def task_states(  # Any: a task's Context (or the Airflow layers' dict of it)
        context: Mapping[str, Any]) -> dict[str, str]:
    """State of every task of this DAG run (read through the Task SDK, as a running task may)."""
    ti = context["ti"]
    run_id = context["dag_run"].run_id
    states = ti.get_task_states(dag_id=ti.dag_id, run_ids=[run_id])
    return {k: str(v) for k, v in (states.get(run_id) or {}).items()}


def failed_tasks(context: Mapping[str, Any]) -> list[str]:  # Any: a task's Context (or the Airflow layers' dict of it)
    """Tasks that failed themselves (not those only blocked by an upstream failure)."""
    return sorted(t for t, s in task_states(context).items() if s == "failed")


def refused(*decisions: dict[str, Any] | None) -> bool:  # Any: JSON of several shapes (XCom, reports)
    """True when change control refused a decision (e.g. a self-approval under the four-eyes rule)."""
    return any(d and d.get("refused") for d in decisions)


def downtime_outcome(context: Mapping[str, Any], *, nothing_to_do: bool, dry_run: bool, done: str,
                     # Any: a task's Context (or the Airflow layers' dict of it)
                     way_back_task: str, deadline_tasks: tuple[str, ...]) -> str:
    """The outcome of a run of a downtime DAG (stop, Empty, restart on another protocol, with a way back).

    ``refused`` (change control refused a decision), ``failed`` (a task failed that the way back does not
    account for), ``rolled_back`` (the new application missed its deadline, one of ``deadline_tasks``
    failed, and ``way_back_task``, the offsets comparison at the end of the way back, succeeded: the
    application runs as before), ``nothing_to_do``, ``dry_run``, ``rejected``, ``rejected_after_recheck``,
    ``nothing_applied`` (the restart never ran), else ``done``. The approvals are the XComs of the
    ``approval`` and ``recheck_approval`` tasks.
    """
    ti = context["ti"]
    states = task_states(context)
    decision = ti.xcom_pull(task_ids="approval", key="decision")
    recheck = ti.xcom_pull(task_ids="recheck_approval", key="decision")
    rolled_back = states.get(way_back_task) == "success"
    failed = sorted(t for t, s in states.items() if s == "failed")
    if refused(decision, recheck):
        return "refused"
    if [t for t in failed if not (rolled_back and t in deadline_tasks)]:
        return "failed"
    if rolled_back:
        return "rolled_back"
    if nothing_to_do:
        return "nothing_to_do"
    if dry_run:
        return "dry_run"
    if decision and decision["decision"] == "Reject":
        return "rejected"
    if recheck and recheck["decision"] == "Reject":
        return "rejected_after_recheck"
    if not ti.xcom_pull(task_ids="start_application"):
        return "nothing_applied"
    return done


def rollout_outcome(context: Mapping[str, Any], *, nothing_to_do: bool, dry_run: bool, done: str, way_back_task: str,
                    # Any: a task's Context (or the Airflow layers' dict of it)
                    back_task: str, deadline_tasks: tuple[str, ...]) -> str:
    """The outcome of a rolling change with a way back (the rolling upgrade): ``refused``, ``failed`` (a task
    failed that the way back does not account for), ``nothing_to_do``, ``dry_run``, ``timed_out_rolled_back``
    (one of ``deadline_tasks`` failed, ``way_back_task`` ran and ``back_task`` saw the group back),
    ``rejected_rolled_back`` (the approval was rejected and the group is back), else ``done``; a way back that
    did not bring the group back is ``failed``."""
    ti = context["ti"]
    states = task_states(context)
    decision = ti.xcom_pull(task_ids="approval", key="decision")
    failed = sorted(t for t, s in states.items() if s == "failed")
    timed_out = states.get(way_back_task) == "success"
    rolled_back = states.get(back_task) == "success"
    if refused(decision):
        return "refused"
    if [t for t in failed if not (timed_out and t in deadline_tasks)]:
        return "failed"
    if nothing_to_do:
        return "nothing_to_do"
    if dry_run:
        return "dry_run"
    if timed_out:
        return "timed_out_rolled_back" if rolled_back else "failed"
    if decision and decision["decision"] == "Reject":
        return "rejected_rolled_back" if rolled_back else "failed"
    return done


def change_outcome(  # Any: a task's Context (or the Airflow layers' dict of it)
        context: Mapping[str, Any], *, plan: dict[str, Any] | None, dry_run: bool, apply_task: str) -> str:
    """The outcome of a DAG that applies one change after an approval and its recheck: ``refused``,
    ``failed``, ``nothing_to_do``, ``dry_run``, ``rejected``, ``rejected_after_recheck``, ``changed`` (the
    apply task says it applied something) or ``nothing_applied``."""
    ti = context["ti"]
    decision = ti.xcom_pull(task_ids="approval", key="decision")
    recheck = ti.xcom_pull(task_ids="recheck_approval", key="decision")
    applied = ti.xcom_pull(task_ids=apply_task)
    if refused(decision, recheck):
        return "refused"
    if failed_tasks(context):
        return "failed"
    if plan and plan["nothing_to_do"]:
        return "nothing_to_do"
    if dry_run:
        return "dry_run"
    if decision and decision["decision"] == "Reject":
        return "rejected"
    if recheck and recheck["decision"] == "Reject":
        return "rejected_after_recheck"
    return "changed" if applied and applied.get("applied") else "nothing_applied"


def finish(context: Mapping[str, Any], report: dict[str, Any], *,
           lock: dict[str, Any] | None = None,  # Any: a task's Context (or the Airflow layers' dict of it)
           fail_outcomes: tuple[str, ...] = ("failed", "refused", "locked")) -> dict[str, Any]:
    """Write the report (under the run's own folder of the configured artifact location, see :mod:`.artifacts`;
    nowhere when none is configured), log it, and fail the task for failing outcomes.

    ``lock`` is what releasing the run's change lock said (``operators.lock.release_change_lock``).
    A run refused because another run holds the lock did nothing: it ends ``locked`` and FAILED in every
    DAG, whatever the DAG's own failing outcomes (a green run would hide that the change did not happen).
    """
    if lock is not None:
        report["lock"] = lock
        if lock.get("refused"):
            report["outcome"] = LOCKED
            fail_outcomes = (*fail_outcomes, LOCKED)
    dag, run_id = context.get("dag"), context.get("run_id")
    conn_id = (context.get("params") or {}).get("kafka_conn_id")
    location = optional_run_location(conn_id, getattr(dag, "dag_id", "dag"), str(run_id or "run"), "report")
    if location:
        report["files"] = write_report(location, report)
    logging.getLogger("airflow.task").info("%s", render_markdown(report))
    if report["outcome"] in fail_outcomes:
        raise AirflowFailException(f"{report['title']}: outcome {report['outcome']}"
                                   + (f" (failed tasks: {', '.join(report.get('failed_tasks', []))})"
                                      if report.get("failed_tasks") else "")
                                   + (f"; report {report['files']['markdown']}" if report.get("files") else ""))
    return {k: report[k] for k in ("outcome", "files") if k in report} | {"title": report["title"]}
