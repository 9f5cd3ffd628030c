"""The Param blocks the change DAGs share, so a form field means the same thing in every DAG.

Each function returns Params to splice into a DAG's ``params`` (``**window_params()``).
The operators read them through templates (``{{ params.window_days }}`` ...):
``KafkaMaintenanceWindowGuardOperator`` the window, the application operators and the
Empty sensor the downtime block, the validation task the rest.

No Param names a path or URL: where a run's snapshots, reports and audit records go is the
deployment's (``changecontrol.artifacts``, ``changecontrol.audit``); a run that still sends
``snapshot_dir`` or ``report_dir`` is refused by its first task (``operators.run_conf``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from airflow.sdk import Param

from airflow_provider_kip848.kafka.arguments import (
    CONTROLLER_NAME_FORM_PATTERN,
    MAX_INT32,
    MAX_MINUTES,
    MAX_RECORDS,
    MAX_SECONDS,
    parse_number,
)
from airflow_provider_kip848.kafka.rules.lag import MARGIN_FRACTION, MARGIN_RECORDS, WINDOW_SECONDS

#: a window's opening or closing time as the form takes it: H:MM or HH:MM, 00:00 to 23:59, nothing after it
WINDOW_TIME_PATTERN = r"^([01]?[0-9]|2[0-3]):[0-5][0-9]$"


def window_params(days: str = "SAT", start: str = "02:00", end: str = "05:00", tz: str = "UTC") -> dict[str, Param]:
    """The maintenance window (``KafkaMaintenanceWindowGuardOperator``). The form refuses a time that is not HH:MM (a
    UTC offset such as 02:00+02:00 among them); the guard refuses the rest of what cannot be what was meant."""
    clock = "On the clock of the window's time zone, without a UTC offset (02:00, not 02:00+02:00 or 02:00Z)."
    return {
        "window_days": Param(days, type="string", minLength=1,
                             title="Maintenance window days (MON..SUN, comma-separated)",
                             description="Ranges are expanded and shown as read: THU-FRI is THU,FRI; FRI-MON is "
                                         "FRI,SAT,SUN,MON."),
        "window_start": Param(start, type="string", pattern=WINDOW_TIME_PATTERN, title="Window opens (HH:MM)",
                              description=clock),
        "window_end": Param(end, type="string", pattern=WINDOW_TIME_PATTERN, title="Window closes (HH:MM)",
                            description=clock + " Before the opening: the window ends the next day. At most "
                                                "[kip848] max_window_hours (default 12) after the opening."),
        "window_tz": Param(tz, type="string", minLength=1, title="Window time zone",
                           description="An IANA zone (UTC, Europe/Berlin): its clock, with its daylight saving "
                                       "time, is the one the times are read on."),
    }


def controller_params(description: str = "") -> dict[str, Param]:
    """The application's controller: a *name* from the deployment's registry (``[kip848] controllers``, see
    ``controllers.registry``) and the arguments it declares for a run. Never code: a module path, an unknown
    name or an undeclared argument is refused by the first task, before the lock and before anything runs."""
    return {
        "app_controller": Param(None, type=["null", "string"], pattern=CONTROLLER_NAME_FORM_PATTERN,
                                title="Application controller (a name from the deployment's registry)",
                                description=description or "How the application is stopped, started and "
                                "checked: the name of its entry in the deployment's controller registry "
                                "(docs/controllers.md)."),
        "app_controller_args": Param({}, type="object", title="Controller arguments",
                                     description="Only the arguments that controller declares for a run (e.g. a "
                                                 "stop mode); anything else is refused."),
    }


def downtime_params() -> dict[str, Param]:
    """Stopping the application and emptying its group: the controller (a registry name, see
    :func:`controller_params`), when members left behind are forced out, how long Empty must last."""
    return {
        **controller_params(),
        "remove_members_after": Param(30, type=["number", "null"], minimum=0, maximum=MAX_SECONDS,
                                      title="Force out members left behind after (s)",
                                      description="Only once the controller confirmed that no instance exists; "
                                                  "without that confirmation members are never forced out (they "
                                                  "leave when their session times out). Empty: never."),
        "empty_settle_seconds": Param(10, type="number", minimum=0, maximum=MAX_SECONDS, title="Empty must last (s)",
                                      description="When the controller cannot confirm the instances gone: how "
                                                  "long the group must stay empty before the migration goes on "
                                                  "(a member seen after it was empty fails the run, named)."),
        "empty_timeout_minutes": Param(10, type="number", minimum=0.1, maximum=MAX_MINUTES,
                                       title="Wait for Empty at most (min)"),
    }


def carried_consumer_params() -> dict[str, Param]:
    """The consumer group's session timeout and heartbeat interval a migration to the consumer protocol sets
    (which ignores the client's own): empty carries over (``runbook_steps.carried_settings``)."""
    return {
        "session_timeout_ms": Param(None, type=["null", "integer"], minimum=1, maximum=MAX_INT32,
                                    title="consumer.session.timeout.ms",
                                    description="The group's session timeout on the consumer protocol (which "
                                                "ignores the client's session.timeout.ms). Empty: carry over (the "
                                                "group's value, else the application's session.timeout.ms on "
                                                "classic, clamped into the brokers' bounds, else the brokers' "
                                                "default)."),
        "heartbeat_interval_ms": Param(None, type=["null", "integer"], minimum=1, maximum=MAX_INT32,
                                       title="consumer.heartbeat.interval.ms",
                                       description="Empty: carry over, as above (heartbeat.interval.ms)."),
    }


def validation_params() -> dict[str, Param]:
    """The PySpark validation (``KafkaValidationOperator``)."""
    return {
        "validate_with_spark": Param(True, type="boolean", title="Run the PySpark validation"),
        "reader": Param("connector", type="string", enum=["connector", "python"], title="Spark Kafka reader"),
    }


def lag_params(what: str = "before validating") -> dict[str, Param]:
    """The lag wait's rules (``KafkaGroupLagSensor``, the fleet's moves; kafka/rules/lag.py): on a live application
    the lag is never 0, so "caught up" is the lag before the change (the run's offsets snapshot) plus a margin, or
    a lag that stops growing while the group commits; ``max_lag`` only as an explicit override."""
    return {
        "max_lag": Param(None, type=["null", "integer"], minimum=0, maximum=MAX_RECORDS,
                         title=f"Absolute lag override {what}",
                         description="Empty (the default): the group has caught up when its lag is back at its "
                                     "level before the change (the offsets snapshot) plus the margin below, or "
                                     "stops growing over the window while it commits where records arrive. A "
                                     "number: wait for total lag <= it instead (0 only when nobody writes to "
                                     "the topics during the change: a live producer never lets lag reach 0)."),
        "lag_margin_fraction": Param(MARGIN_FRACTION, type="number", minimum=0, maximum=1000,
                                     title="Lag margin: fraction of the lag before",
                                     description="A partition (and the total) has caught up at its lag before the "
                                                 "change + this fraction of it + the records below."),
        "lag_margin_records": Param(MARGIN_RECORDS, type="integer", minimum=0, maximum=MAX_RECORDS,
                                    title="Lag margin: records",
                                    description="Added to every allowance (a live consumer's lag moves between two "
                                                "commits by its write rate times the commit interval)."),
        "lag_window_seconds": Param(WINDOW_SECONDS, type="number", minimum=1, maximum=MAX_SECONDS,
                                    title="Lag window without a baseline (s)",
                                    description="The not-growing rule: over this long no partition's lag grows "
                                                "beyond the margin and the group commits wherever records "
                                                "arrive (a stopped consumer never passes while records arrive)."),
    }


class LagSettings(TypedDict):
    """The lag Params, parsed (:class:`~airflow_provider_kip848.engine.move.MoveSettings`'s lag fields)."""

    max_lag: int | None
    lag_margin_fraction: float
    lag_margin_records: int
    lag_window_seconds: float


def lag_settings(max_lag: object, fraction: object, records: object, window: object) -> LagSettings:
    """Rendered lag Params as :class:`~airflow_provider_kip848.engine.move.MoveSettings` takes them (``max_lag``
    None: no override); a value that is not a number raises :class:`InvalidArgument`, naming the Param."""
    override = parse_number(max_lag, "max_lag", integer=True, optional=True)
    return LagSettings(max_lag=None if override is None else int(override),
                       lag_margin_fraction=float(parse_number(fraction, "lag_margin_fraction") or 0.0),
                       lag_margin_records=int(parse_number(records, "lag_margin_records", integer=True) or 0),
                       lag_window_seconds=float(parse_number(window, "lag_window_seconds", minimum=1) or 0.0))


def lag_wait_args() -> dict[str, str]:
    """The :func:`lag_params` as a lag wait's templated arguments (``KafkaGroupLagSensor(**lag_wait_args(), ...)``)."""
    return {name: f"{{{{ params.{name} }}}}"
            for name in ("max_lag", "lag_margin_fraction", "lag_margin_records", "lag_window_seconds")}


def lag_plan_line(params: Mapping[str, object], *, baseline: bool = True) -> str:
    """The plan's step for the lag wait, as the run will judge it (``baseline``: the DAG took a snapshot first)."""
    if params.get("max_lag") is not None:
        return f"wait until total lag <= {params['max_lag']} (max_lag, the absolute override)"
    margin = (f"{params.get('lag_margin_fraction', MARGIN_FRACTION):g} x + "
              f"{params.get('lag_margin_records', MARGIN_RECORDS)}")
    growing = (f"not growing over {params.get('lag_window_seconds', WINDOW_SECONDS):g} s while the group commits "
               "where records arrive")
    if not baseline:
        return f"wait until the lag is {growing} (no offsets snapshot before the change: no baseline)"
    return f"wait until the lag is back at its level in the snapshot before ({margin} records), or {growing}"
