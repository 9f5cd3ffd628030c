"""The example DAGs' schedule and their runs nobody triggered: the Airflow side of ``changecontrol.schedule``.

:func:`deployment_schedule` is what each example DAG passes as ``schedule=``:
None (triggered only) unless the deployment sets ``[kip848] <dag_id>_schedule``;
read when the DAG file is parsed, so a value that does not read is the DAG's
import error (the UI's "DAG Import Errors"), never a silent fallback.

:func:`check_unattended_run` is called by the DAGs' first task (the window
guard, the controller task) next to ``check_run_conf``: a scheduled, backfill or
asset-triggered run naming a controller the deployment's registry does not have,
or acting on the example's application, fails there (no retry), before the lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import CronTriggerTimetable
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowFailException, AirflowTimetableInvalid

from airflow_provider_kip848.changecontrol.schedule import (
    CONTROLLER_PARAM,
    SCHEDULE_SECTION,
    UNATTENDED_RUN_TYPES,
    parse_schedule,
    refuse_unattended_run,
    schedule_option,
)
from airflow_provider_kip848.controllers.registry import ControllerRegistry
from airflow_provider_kip848.kafka.errors import InvalidSchedule, Kip848Error, UnattendedRunRefused


def deployment_schedule(dag_id: str) -> CronTriggerTimetable | None:
    """The schedule the deployment gives ``dag_id`` (``[kip848] <dag_id>_schedule``: five cron fields and an IANA
    zone, e.g. ``0 2 * * SAT Europe/Berlin``), or None: the DAG runs only when triggered. A value that does not
    read raises :class:`InvalidSchedule` (the DAG file does not import)."""
    option = schedule_option(dag_id)
    where = f"[{SCHEDULE_SECTION}] {option}"
    parsed = parse_schedule(conf.get(SCHEDULE_SECTION, option, fallback=None), where)
    if parsed is None:
        return None
    timetable = CronTriggerTimetable(parsed.cron, timezone=parsed.tz)
    try:
        timetable.validate()
    except AirflowTimetableInvalid as exc:
        raise InvalidSchedule(f"{where} = {parsed.cron!r} {parsed.tz}: the cron expression does not read "
                              f"({exc})") from exc
    return timetable


def _run_type(context: Mapping[str, Any]) -> str:
    run_type = getattr(context.get("dag_run"), "run_type", None)
    return str(getattr(run_type, "value", run_type) or "manual")


def check_unattended_run(context: Mapping[str, Any],  # Any: a task's Context, or a @task's keyword context
                         *, example_params: Mapping[str, object] | None = None) -> None:
    """Fail the task (no retry) when the run is not manual and would act with a controller the deployment did not
    configure or on the example's application (``example_params``); see
    :func:`~airflow_provider_kip848.changecontrol.schedule.refuse_unattended_run`."""
    run_type = _run_type(context)
    if run_type not in UNATTENDED_RUN_TYPES:
        return
    params = context.get("params") or {}
    controllers: list[str] | None = None
    if CONTROLLER_PARAM in params:
        try:
            registry = ControllerRegistry.load()
        except Kip848Error as exc:  # a registry that does not read names nothing
            raise AirflowFailException(f"This {run_type} run was refused before the change lock: {exc}") from exc
        controllers = registry.names()
    try:
        refuse_unattended_run(run_type, params, controllers=controllers, example_params=example_params)
    except UnattendedRunRefused as exc:
        raise AirflowFailException(str(exc)) from exc
