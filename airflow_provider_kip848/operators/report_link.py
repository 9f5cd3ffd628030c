"""The "Report" button of a report task: its run's report page in the provider's plugin.

Airflow 3 computes an operator extra link on the worker when the task ends (the task runner pushes
``get_link()`` to the XCom ``_link_ReportLink``) and the UI shows the stored link: so the link is the same
whether the report task succeeded or failed, and the page it opens says what the run has (a report, or why
there is none). The link is ``<the UI's base path>kip848-reports/<dag_id>/<run_id>``: the API server's own
page, outside the UI's frame (Airflow opens extra links as links, not in a plugin view), under the path prefix
the deployment serves Airflow from (``[api] base_url``).

The provider registers the class in its provider info (``extra-links``); the report tasks carry it through
:func:`with_report_link`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlsplit

from airflow.sdk import BaseOperator, BaseOperatorLink
from airflow.sdk.configuration import conf
from airflow.sdk.definitions.xcom_arg import PlainXComArg, XComArg

from airflow_provider_kip848.changecontrol.run_artifacts import report_page_path

if TYPE_CHECKING:
    from airflow.sdk.types import TaskInstanceKey

#: an operator, or the XComArg a ``@task`` call returns; :func:`with_report_link` hands back what it was given
OperatorOrXComArg = TypeVar("OperatorOrXComArg", BaseOperator, XComArg)


def ui_base_path() -> str:
    """The path Airflow is served under (``/`` or ``/airflow/`` ...), from ``[api] base_url``."""
    base = conf.get("api", "base_url", fallback="/") or "/"
    return "/" + urlsplit(base).path.strip("/") + "/" if urlsplit(base).path.strip("/") else "/"


class ReportLink(BaseOperatorLink):
    """"Report": the run's report page (``/kip848-reports/<dag_id>/<run_id>``)."""

    name = "Report"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        return ui_base_path().rstrip("/") + report_page_path(ti_key.dag_id, ti_key.run_id)


def with_report_link(task: OperatorOrXComArg) -> OperatorOrXComArg:
    """``task`` (an operator, or the XComArg a ``@task`` call returns) with the "Report" extra link."""
    if isinstance(task, BaseOperator):
        task.operator_extra_links = (*task.operator_extra_links, ReportLink())
    elif isinstance(task, PlainXComArg):  # a @task call's result: the link goes on its operator
        task.operator.operator_extra_links = (*task.operator.operator_extra_links, ReportLink())
    else:
        raise TypeError(f"with_report_link takes an operator or a @task call's result, not {type(task).__name__}")
    return task


__all__ = ["ReportLink", "ui_base_path", "with_report_link"]
