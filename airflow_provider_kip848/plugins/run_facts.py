"""The fleet migration's runs as the metadata DB holds them: task instances, XComs, the recorded plan.

:func:`read_runs` reads the latest runs of a DAG (one query for the runs, one for their task instances, one
for the XComs the view needs: the plan, the approvals' answers, the rechecks' units, the judges' records and
units to send back, and the ``fleet_result`` and ``fleet_progress`` of each mapped task instance) inside the
API server, with Airflow's own models and session. With ``group_id`` it reads only the runs whose recorded
plan moves that group (:func:`plan_moves`): the runs of the fleet DAG a group's link on the fleet page finds,
which the UI's own Dag Runs filter cannot (a fleet run's conf names applications, teams or prefixes, not
groups). :mod:`.fleet_runs` turns these facts into what the page shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

from airflow_provider_kip848.fleet.names import (
    PLAN_TASK,
    PROGRESS_KEY,
    RESULT_KEY,
    RETURN_KEY,
    WAVE_XCOMS,
)
from airflow_provider_kip848.kafka.errors import InvalidArgument

#: runs of a DAG looked at, newest first, for those whose plan moves a group (their plans are read and parsed)
GROUP_SCAN = 500

# -- the facts (what the DB holds) --------------------------------------------------------------


@dataclass(frozen=True)
class TaskFact:
    """One task instance: ``state`` None is Airflow's "no status" (created, not scheduled yet)."""

    task_id: str
    map_index: int
    state: str | None
    try_number: int = 0
    start_date: datetime | None = None
    end_date: datetime | None = None
    rendered_map_index: str | None = None


@dataclass(frozen=True)
class RunFacts:
    """One DAG run with its task instances and the XComs the view reads ((task_id, map_index, key) -> value)."""

    dag_id: str
    run_id: str
    state: str | None
    run_type: str | None = None
    run_after: datetime | None = None
    logical_date: datetime | None = None
    start_date: datetime | None = None
    end_date: datetime | None = None
    triggering_user: str | None = None
    tasks: tuple[TaskFact, ...] = ()
    xcoms: Mapping[tuple[str, int, str], Any] = field(default_factory=dict)  # Any: XComs as stored (JSON)

    def task(self, task_id: str, map_index: int = -1) -> TaskFact | None:
        return next((t for t in self.tasks if t.task_id == task_id and t.map_index == map_index), None)

    def instances(self, task_id: str) -> list[TaskFact]:
        """Every task instance of ``task_id`` (mapped: its expanded indexes, not the unexpanded -1)."""
        found = sorted((t for t in self.tasks if t.task_id == task_id), key=lambda t: t.map_index)
        mapped = [t for t in found if t.map_index >= 0]
        return mapped or found


def _state(value: Any) -> str | None:
    """A state enum or string -> its value ("running"), None stays None."""
    if value is None:
        return None
    return str(getattr(value, "value", value))


def read_runs(dag_id: str, limit: int, run_id: str | None = None,
              group_id: str | None = None) -> tuple[bool, list[RunFacts]]:
    """(whether Airflow knows the DAG, its latest ``limit`` runs newest first, or only ``run_id``) from the
    metadata DB, in the API server's process. ``group_id``: only the runs whose recorded plan moves that group,
    among the latest :data:`GROUP_SCAN` runs."""
    # The metadata DB's models: only the API server reads them; every Airflow process (scheduler, each task)
    # loads the plugin, so they are imported where a request is served.
    from airflow.models.dag import DagModel  # noqa: PLC0415 - see above
    from airflow.models.dagrun import DagRun  # noqa: PLC0415 - see above
    from airflow.models.taskinstance import TaskInstance  # noqa: PLC0415 - see above
    from airflow.models.xcom import XComModel  # noqa: PLC0415 - see above
    from airflow.utils.session import create_session  # noqa: PLC0415 - see above
    from sqlalchemy import and_, or_, select  # noqa: PLC0415 - see above

    with create_session(scoped=False) as session:
        dag_exists = session.scalar(select(DagModel.dag_id).where(DagModel.dag_id == dag_id)) is not None
        query = select(DagRun).where(DagRun.dag_id == dag_id)
        if run_id is not None:
            query = query.where(DagRun.run_id == run_id)
        if group_id is not None:
            # the plans of the latest runs (one query), each parsed: only those that move the group are read
            plans = session.execute(
                select(XComModel.run_id, XComModel.value).join(
                    DagRun, and_(DagRun.dag_id == XComModel.dag_id, DagRun.run_id == XComModel.run_id))
                .where(XComModel.dag_id == dag_id, XComModel.task_id == PLAN_TASK, XComModel.key == RETURN_KEY,
                       XComModel.map_index == -1)
                .order_by(DagRun.run_after.desc(), DagRun.id.desc()).limit(GROUP_SCAN))
            query = query.where(DagRun.run_id.in_(
                [row.run_id for row in plans if plan_moves(XComModel.deserialize_value(row), group_id)]))
        runs = list(session.scalars(query.order_by(DagRun.run_after.desc(), DagRun.id.desc()).limit(limit)))
        run_ids = [r.run_id for r in runs]
        tasks: dict[str, list[TaskFact]] = {r: [] for r in run_ids}
        xcoms: dict[str, dict[tuple[str, int, str], Any]] = {r: {} for r in run_ids}
        if run_ids:
            ti_rows = session.execute(
                select(TaskInstance.run_id, TaskInstance.task_id, TaskInstance.map_index, TaskInstance.state,
                       TaskInstance.try_number, TaskInstance.start_date, TaskInstance.end_date,
                       TaskInstance._rendered_map_index.label("rendered_map_index"))
                .where(TaskInstance.dag_id == dag_id, TaskInstance.run_id.in_(run_ids)))
            for row in ti_rows:
                tasks[row.run_id].append(TaskFact(row.task_id, row.map_index, _state(row.state), row.try_number or 0,
                                                  row.start_date, row.end_date, row.rendered_map_index))
            wanted = or_(XComModel.key.in_((RESULT_KEY, PROGRESS_KEY)),
                         and_(XComModel.key == RETURN_KEY, XComModel.task_id == PLAN_TASK),
                         *(and_(XComModel.key == key, XComModel.task_id.endswith(suffix, autoescape=True))
                           for key, suffix in WAVE_XCOMS))
            xcom_rows = session.execute(
                select(XComModel.run_id, XComModel.task_id, XComModel.map_index, XComModel.key, XComModel.value)
                .where(XComModel.dag_id == dag_id, XComModel.run_id.in_(run_ids), wanted))
            for row in xcom_rows:
                # stored by the Task Execution API as JSON (or as a JSON string by XComModel.set): decoded alike
                xcoms[row.run_id][(row.task_id, row.map_index, row.key)] = XComModel.deserialize_value(row)
        facts = [RunFacts(dag_id=dag_id, run_id=r.run_id, state=_state(r.state), run_type=_state(r.run_type),
                          run_after=r.run_after, logical_date=r.logical_date, start_date=r.start_date,
                          end_date=r.end_date, triggering_user=r.triggering_user_name,
                          tasks=tuple(tasks[r.run_id]), xcoms=xcoms[r.run_id]) for r in runs]
    return dag_exists, facts


# -- links into the Airflow UI ------------------------------------------------------------------


def url_segment(value: object) -> str:
    return quote(str(value), safe="")


def run_url(ui_base: str, dag_id: str, run_id: str) -> str:
    return f"{ui_base}dags/{url_segment(dag_id)}/runs/{url_segment(run_id)}"


def task_url(ui_base: str, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """A task instance's page in the UI (``/dags/{dag}/runs/{run}/tasks/{task}[/mapped/{index}]``)."""
    url = f"{run_url(ui_base, dag_id, run_id)}/tasks/{url_segment(task_id)}"
    return url if map_index < 0 else f"{url}/mapped/{map_index}"


def group_url(ui_base: str, dag_id: str, run_id: str, group_id: str) -> str:
    """A task group's page in the UI (``/dags/{dag}/runs/{run}/tasks/group/{group}``)."""
    return f"{run_url(ui_base, dag_id, run_id)}/tasks/group/{url_segment(group_id)}"



# -- the recorded plan ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanWave:
    """A wave of the recorded plan: what the view needs of ``Wave.to_dict()``."""

    number: int
    canary: bool
    oversized: bool
    wave_hash: str
    teams: tuple[str, ...]
    applications: tuple[Mapping[str, Any], ...]  # Any: the plan's entries as the plan task wrote them (JSON)

    @property
    def apps(self) -> list[str]:
        return [a["app"] for a in self.applications]

    @property
    def group_count(self) -> int:
        return sum(len(pending_groups(a)) for a in self.applications)


def pending_groups(app: Mapping[str, Any]) -> list[Mapping[str, Any]]:  # Any: a plan's application, JSON
    """The groups the application's move migrates (the plan lists its migrated and held ones too)."""
    return [g for g in app["groups"] if g.get("status", "pending") == "pending"]


def _plan_wave(w: Any) -> PlanWave:
    number = w.get("number") if isinstance(w, Mapping) else None
    if not isinstance(number, int) or isinstance(number, bool) or not isinstance(w.get("wave_hash"), str) \
            or not isinstance(w.get("applications"), list):
        raise InvalidArgument(f"a wave of the plan lacks number, wave_hash or applications: {str(w)[:200]!r}")
    for a in w["applications"]:
        app, groups = (a.get("app"), a.get("groups")) if isinstance(a, Mapping) else (None, None)
        if not isinstance(app, str) or not isinstance(groups, list) \
                or not all(isinstance(g, Mapping) and isinstance(g.get("group_id"), str) for g in groups):
            raise InvalidArgument(f"an application of wave {number} lacks app or groups: {str(a)[:200]!r}")
    return PlanWave(number=number, canary=bool(w.get("canary")), oversized=bool(w.get("oversized")),
                     wave_hash=w["wave_hash"], teams=tuple(w.get("teams") or ()),
                     applications=tuple(w["applications"]))


def parse_plan(value: object) -> tuple[dict[str, Any], list[PlanWave]]:  # Any: the plan as JSON
    """(the plan's dict, its waves) of the ``plan`` task's return value; InvalidArgument if it is not one."""
    if not isinstance(value, Mapping) or not isinstance(value.get("plan"), Mapping):
        raise InvalidArgument(f"the plan XCom has no 'plan' object: {str(value)[:200]!r}")
    plan = dict(value["plan"])
    raw = plan.get("waves")
    if not isinstance(raw, list):
        raise InvalidArgument("the plan has no list of waves")
    waves = [_plan_wave(w) for w in raw]
    return plan, sorted(waves, key=lambda w: w.number)


def count_active_runs(dag_ids: Iterable[str], states: Iterable[str] = ("queued", "running")) -> int:
    """How many runs of ``dag_ids`` are in ``states`` (one query): the pages refresh while some are."""
    # the metadata DB's models, where a request is served (see read_runs)
    from airflow.models.dagrun import DagRun  # noqa: PLC0415 - see above
    from airflow.utils.session import create_session  # noqa: PLC0415 - see above
    from sqlalchemy import func, select  # noqa: PLC0415 - see above

    with create_session(scoped=False) as session:
        return int(session.scalar(select(func.count()).select_from(DagRun).where(
            DagRun.dag_id.in_(list(dag_ids)), DagRun.state.in_(list(states)))) or 0)


def plan_moves(value: object, group_id: str) -> bool:
    """Whether the ``plan`` task's return value plans to move ``group_id`` (a pending group of an application
    of one of its waves); False for a plan that does not parse (the runs page shows it unreadable)."""
    try:
        _, waves = parse_plan(value)
    except InvalidArgument:
        return False
    return any(g["group_id"] == group_id for w in waves for a in w.applications for g in pending_groups(a))


__all__ = ["GROUP_SCAN", "PlanWave", "RunFacts", "TaskFact", "count_active_runs", "group_url", "parse_plan",
           "pending_groups", "plan_moves", "read_runs", "run_url", "task_url", "url_segment"]
