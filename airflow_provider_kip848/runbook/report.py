"""The run report: what was found, approved, changed and verified, as JSON and readable Markdown."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any


def approval_record(payload: Any) -> dict[str, Any] | None:
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


def render_markdown(report: dict[str, Any]) -> str:
    lines = [f"# {report['title']}", "", f"- DAG run: `{report.get('dag_id')}` / `{report.get('run_id')}`",
             f"- outcome: **{report['outcome']}**", f"- generated: {report['generated_at']}"]
    for key in ("group_id", "triggered_by"):
        if report.get(key):
            lines.append(f"- {key.replace('_', ' ')}: {report[key]}")
    for name, approval in (report.get("approvals") or {}).items():
        if approval:
            lines.append(f"- approval `{name}`: {approval['decision']} by {approval['by']} at {approval['at']}")
    for section in ("before", "after"):
        if report.get(section):
            lines += ["", f"## {section.title()}", "", "```json", json.dumps(report[section], indent=1, default=str), "```"]
    if report.get("plan"):
        lines += ["", "## Plan", "", report["plan"].get("markdown", "")]
    for name, value in (report.get("results") or {}).items():
        lines += ["", f"## {name}", "", "```json", json.dumps(value, indent=1, default=str)[:4000], "```"]
    return "\n".join(lines) + "\n"


def build_report(*, title: str, outcome: str, context: dict[str, Any], **sections: Any) -> dict[str, Any]:
    dag_run = context.get("dag_run")
    return {
        "title": title,
        "outcome": outcome,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "dag_id": getattr(dag_run, "dag_id", None),
        "run_id": getattr(dag_run, "run_id", None),
        "triggered_by": getattr(dag_run, "triggering_user_name", None),
        **sections,
    }


def write_report(directory: str, report: dict[str, Any]) -> dict[str, str]:
    from airflow_provider_kip848.operators import storage

    base = directory.rstrip("/")
    json_path, md_path = f"{base}/report.json", f"{base}/report.md"
    storage.write_text(json_path, json.dumps(report, indent=1, default=str) + "\n")
    storage.write_text(md_path, render_markdown(report))
    return {"json": json_path, "markdown": md_path}


def task_states(context: dict[str, Any]) -> dict[str, str]:
    """State of every task of this DAG run (read through the Task SDK, as a running task may)."""
    ti = context["ti"]
    run_id = context["dag_run"].run_id
    states = ti.get_task_states(dag_id=ti.dag_id, run_ids=[run_id])
    return {k: str(v) for k, v in (states.get(run_id) or {}).items()}


def failed_tasks(context: dict[str, Any]) -> list[str]:
    """Tasks that failed themselves (not those only blocked by an upstream failure)."""
    return sorted(t for t, s in task_states(context).items() if s == "failed")


def finish(context: dict[str, Any], report_dir: str | None, report: dict[str, Any],
           fail_outcomes: tuple[str, ...] = ("failed",)) -> dict[str, Any]:
    """Write the report (when a directory is given), log it, and fail the task for failing outcomes."""
    import logging

    log = logging.getLogger("airflow.task")
    if report_dir:
        report["files"] = write_report(report_dir, report)
    log.info("%s", render_markdown(report))
    if report["outcome"] in fail_outcomes:
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(f"{report['title']}: outcome {report['outcome']}"
                                   + (f" (failed tasks: {', '.join(report.get('failed_tasks', []))})"
                                      if report.get("failed_tasks") else "")
                                   + (f"; report {report['files']['markdown']}" if report.get("files") else ""))
    return {k: report[k] for k in ("outcome", "files") if k in report} | {"title": report["title"]}
