"""The Param blocks the change DAGs share, so a form field means the same thing in every DAG.

Each function returns Params to splice into a DAG's ``params`` (``**window_params()``).
The operators read them through templates (``{{ params.window_days }}`` ...):
``MaintenanceWindowGuardOperator`` the window, the application operators and the
Empty sensor the downtime block, the snapshot/validation/report tasks the rest.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param


def window_params(days: str = "SAT", start: str = "02:00", end: str = "05:00", tz: str = "UTC") -> dict[str, Any]:
    """The maintenance window (``MaintenanceWindowGuardOperator``)."""
    return {
        "window_days": Param(days, type="string", title="Maintenance window days (MON..SUN, comma-separated)"),
        "window_start": Param(start, type="string", title="Window opens (HH:MM)"),
        "window_end": Param(end, type="string", title="Window closes (HH:MM)"),
        "window_tz": Param(tz, type="string", title="Window time zone"),
    }


def downtime_params(controller: str) -> dict[str, Any]:
    """Stopping the application and emptying its group: the controller (``module:Class`` + arguments,
    see ``controllers``), when members left behind are forced out, how long Empty must last."""
    return {
        "app_controller": Param(controller, type="string", title="Application controller (module:Class)"),
        "app_controller_args": Param({}, type="object", title="Controller arguments"),
        "remove_members_after": Param(30, type=["number", "null"], minimum=0,
                                      title="Force out members left behind after (s)",
                                      description="Empty: never force them out; wait for their session timeout."),
        "empty_settle_seconds": Param(10, type="number", minimum=0, title="Empty must last (s)",
                                      description="A member still running rejoins within a heartbeat or two of "
                                                  "leaving or being forced out: the group must stay empty this "
                                                  "long before the migration goes on."),
        "empty_timeout_minutes": Param(10, type="number", minimum=0.1, title="Wait for Empty at most (min)"),
    }


def artifact_params() -> dict[str, Any]:
    """Where a run writes its snapshots and its report (``changecontrol.artifacts``)."""
    return {
        "snapshot_dir": Param(None, type=["null", "string"], title="Offsets snapshots (path or URL)",
                              description="Empty: the connection's extra artifacts_url, else $KIP848_ARTIFACTS_URL "
                                          "(a location every worker reaches). Each run writes its own folder."),
        "report_dir": Param(None, type=["null", "string"], title="Reports (path or URL)",
                            description="Empty: the deployment's artifact location, if any. Each run writes "
                                        "<dir>/<dag>/<run>/report."),
    }


def validation_params() -> dict[str, Any]:
    """The PySpark validation (``KafkaValidationOperator``)."""
    return {
        "validate_with_spark": Param(True, type="boolean", title="Run the PySpark validation"),
        "reader": Param("connector", type="string", enum=["connector", "python"], title="Spark Kafka reader"),
    }
