"""``KafkaMaintenanceWindowGuardOperator``: a change with downtime runs only inside its maintenance window.

The first task of every DAG that stops an application. A manual trigger (or
a fleet wave) outside the window fails here, before the lock, the plan or any
change; the report says when the window opens next. A window that cannot be
what was meant (a time with a UTC offset, start equal to end, longer than the
deployment's ``[kip848] max_window_hours``) fails here too; the window as read
(days, start-end, zone, length) is logged, returned for the report, and shown
in the approval. The window itself is
:class:`airflow_provider_kip848.changecontrol.window.MaintenanceWindow`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import BaseOperator, Context
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol.window import guard_window, max_window_hours
from airflow_provider_kip848.kafka.errors import Kip848Error
from airflow_provider_kip848.operators.run_conf import check_run_conf
from airflow_provider_kip848.operators.schedule import check_unattended_run

#: the Airflow configuration option holding the longest window a run may ask for (hours)
MAX_WINDOW_SECTION, MAX_WINDOW_OPTION = "kip848", "max_window_hours"


def configured_max_window_hours() -> float:
    """``[kip848] max_window_hours`` (unset: 12), read when a guard runs; a value that does not read fails."""
    return max_window_hours(conf.get(MAX_WINDOW_SECTION, MAX_WINDOW_OPTION, fallback=None))


class KafkaMaintenanceWindowGuardOperator(BaseOperator):
    """Fail (no retry) unless now is inside the window; returns ``{window, understood, max_hours, checked_at}``.

    :param window_days: ``MON..SUN``, comma-separated, ranges (``THU-FRI``) expanded (templated, like the
        other three).
    :param window_start: ``HH:MM``; :param window_end: ``HH:MM`` (an end before the start spans midnight), on
        the clock of ``window_tz``: no UTC offset.
    :param window_tz: an IANA time zone.
    :param example_params: Param values that are the shipped example's (``{"application_id":
        "streams-wordcount"}``): a run nobody triggered by hand (scheduled, backfill, asset-triggered) acting on
        them is refused here, as is one naming a controller the deployment's registry does not have
        (:func:`~airflow_provider_kip848.operators.schedule.check_unattended_run`).
    """

    template_fields = ("window_days", "window_start", "window_end", "window_tz")
    ui_color = "#fff4d6"

    def __init__(self, *, window_days: str = "{{ params.window_days }}",  # Any: passed to BaseOperator
                 window_start: str = "{{ params.window_start }}", window_end: str = "{{ params.window_end }}",
                 window_tz: str = "{{ params.window_tz }}", example_params: Mapping[str, object] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.example_params = dict(example_params or {})
        self.window_days, self.window_start, self.window_end = window_days, window_start, window_end
        self.window_tz = window_tz

    def execute(self, context: Context) -> dict[str, object]:
        check_run_conf(context)  # the first task: a conf key no Param declares fails the run here
        # a run nobody triggered (the deployment's schedule): only with a configured controller, never the example
        check_unattended_run(context, example_params=self.example_params)
        window = {"window_days": self.window_days, "window_start": self.window_start,
                  "window_end": self.window_end, "window_tz": self.window_tz}
        try:
            checked = guard_window(window, datetime.now(UTC), max_hours=configured_max_window_hours())
        except Kip848Error as exc:  # outside, or a window that cannot be what was meant: a retry would repeat it
            self.log.error("Maintenance window refused: %s", exc)
            raise AirflowFailException(str(exc)) from exc
        self.log.info("Maintenance window as understood: %s (longest allowed: %g h).",
                      checked["understood"]["understood"], checked["max_hours"])
        return checked
