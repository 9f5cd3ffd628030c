"""When a DAG of this provider runs without a person: only when the deployment said so, and only on what it set up.

The example DAGs ship with ``schedule=None``: Airflow's trigger form unpauses
a DAG by default ("Unpause on trigger"), and a DAG with a timetable then starts
its scheduled runs at once, with the Params' defaults, on the example's
application. A deployment that wants a maintenance window gives the DAG its
schedule explicitly, as an Airflow option read when the DAG file is parsed
(``[kip848] <dag_id>_schedule``, :func:`parse_schedule`); a value that does
not read fails the import, because a silent fallback (no schedule, or some
other) is a window nobody agreed to, or a migration that never happens.

A run that is not manual (scheduled, backfill, asset-triggered: no person typed
its Params) must not act with what the deployment did not configure:
:func:`refuse_unattended_run` refuses a controller name that is not in the
deployment's registry (or none, where the DAG acts through one) and a Param
whose value is the shipped example's (``streams-wordcount``). The DAGs' first
task calls it, before the change lock. Pure: no I/O, no Airflow.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from airflow_provider_kip848.changecontrol.window import check_zone
from airflow_provider_kip848.kafka.errors import InvalidMaintenanceWindow, InvalidSchedule, UnattendedRunRefused

#: the Airflow configuration section of the schedules (the provider's own, with ``controllers``)
SCHEDULE_SECTION = "kip848"
#: run types a person did not start with Params of their own (Airflow's DagRunType values); ``manual`` and
#: ``operator_triggered`` (a DAG that triggers another passes its conf) are attended
UNATTENDED_RUN_TYPES = frozenset({"scheduled", "backfill", "asset_triggered", "asset_materialization"})
#: the Param a DAG names its application's controller with (operators.params.controller_params)
CONTROLLER_PARAM = "app_controller"


def schedule_option(dag_id: str) -> str:
    """The option of ``[kip848]`` that gives ``dag_id`` a schedule (``kip1071_streams_offline_migration_schedule``;
    environment ``AIRFLOW__KIP848__KIP1071_STREAMS_OFFLINE_MIGRATION_SCHEDULE``)."""
    return f"{dag_id}_schedule"


@dataclass(frozen=True)
class WindowSchedule:
    """A cron expression (five fields) on the clock of an IANA time zone: when a maintenance window opens."""

    cron: str
    tz: str

    def describe(self) -> str:
        return f"{self.cron} ({self.tz})"


def parse_schedule(value: object, option: str) -> WindowSchedule | None:
    """The schedule an option's value gives: None when unset or empty (the DAG runs only when triggered);
    ``'<minute> <hour> <day of month> <month> <day of week> <IANA zone>'`` otherwise. The zone is required: a
    window is agreed on somebody's clock, and the server's is nobody's. Anything else raises
    :class:`InvalidSchedule` naming the option (the cron fields' values are checked by Airflow's timetable)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise InvalidSchedule(f"{option} must be text, not {value!r}")
    fields = value.split()
    if fields[0].startswith("@"):
        raise InvalidSchedule(
            f"{option} = {value!r}: a preset ({fields[0]}) says neither the hour nor the time zone of the window",
            remedy="Write the five cron fields and the zone, e.g. '0 2 * * SAT UTC' for Saturdays at 02:00 UTC.")
    if len(fields) != 6:
        raise InvalidSchedule(
            f"{option} = {value!r} has {len(fields)} field(s): it needs five cron fields (minute hour day-of-month "
            "month day-of-week) and an IANA time zone")
    try:
        tz = check_zone(fields[5])
    except InvalidMaintenanceWindow as exc:
        raise InvalidSchedule(f"{option} = {value!r}: its last field {fields[5]!r} is not a usable time zone "
                              f"({exc.what})") from exc
    return WindowSchedule(" ".join(fields[:5]), tz)


def refuse_unattended_run(run_type: str, params: Mapping[str, object], *, controllers: Collection[str] | None,
                          example_params: Mapping[str, object] | None = None) -> None:
    """Raise :class:`UnattendedRunRefused` when a run of ``run_type`` that no person started would act with what
    the deployment did not configure; a manual (or operator-triggered) run passes untouched.

    :param controllers: the names in the deployment's registry; None when the DAG names no controller (it has no
        ``app_controller`` Param), then only the example values are checked. The refusal names neither them nor
        the registry's file (whoever reads the run's error is not necessarily the deployment's administrator).
    :param example_params: Param values that are the shipped example's (``{"application_id":
        "streams-wordcount"}``): a run that is not manual acting on them is refused.
    """
    if run_type not in UNATTENDED_RUN_TYPES:
        return
    reasons: list[str] = []
    remedies: list[str] = []
    if controllers is not None:
        name = params.get(CONTROLLER_PARAM)
        if name in (None, ""):
            reasons.append("it names no application controller (app_controller's default is empty), so it could "
                           "not stop, start or check the application")
            remedies.append("give app_controller a default in your copy of the DAG, naming an entry of the registry")
        elif name not in controllers:
            reasons.append(f"its application controller {name!r} is not one this deployment configured")
            remedies.append(f"add {name!r} to the deployment's controller registry ([kip848] controllers)")
    for key, example in (example_params or {}).items():
        if params.get(key) == example:
            reasons.append(f"its {key} is the example's ({example!r}, the DAG's shipped default)")
            remedies.append(f"give {key} your application's value in your copy of the DAG")
    if reasons:
        raise UnattendedRunRefused(
            f"This {run_type} run was refused before the change lock, nothing done: a run nobody triggered uses "
            f"the Params' defaults, and {'; and '.join(reasons)}.",
            remedy=f"{_sentence('; '.join(remedies))}; or trigger the DAG by hand with the values you mean.")


def _sentence(text: str) -> str:
    """``text`` with its first letter upper case (str.capitalize would lower the rest: 'DAG' -> 'dag')."""
    return text[:1].upper() + text[1:]
