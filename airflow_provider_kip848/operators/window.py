"""``MaintenanceWindowGuardOperator``: a change with downtime runs only inside its maintenance window.

The first task of every DAG that stops an application. A manual trigger (or
a fleet wave) outside the window fails here, before the lock, the plan or any
change; the report says when the window opens next. The window itself is
:class:`airflow_provider_kip848.changecontrol.window.MaintenanceWindow`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol.window import OutsideMaintenanceWindow, guard_window


class MaintenanceWindowGuardOperator(BaseOperator):
    """Fail (no retry) unless now is inside the window; returns ``{window, checked_at}``.

    :param window_days: ``MON..SUN``, comma-separated (templated, like the other three).
    :param window_start: ``HH:MM``; :param window_end: ``HH:MM`` (an end before the start spans midnight).
    :param window_tz: an IANA time zone.
    """

    template_fields = ("window_days", "window_start", "window_end", "window_tz")
    ui_color = "#fff4d6"

    def __init__(self, *, window_days: str = "{{ params.window_days }}",
                 window_start: str = "{{ params.window_start }}", window_end: str = "{{ params.window_end }}",
                 window_tz: str = "{{ params.window_tz }}", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.window_days, self.window_start, self.window_end = window_days, window_start, window_end
        self.window_tz = window_tz

    def execute(self, context: Any) -> dict[str, str]:
        window = {"window_days": self.window_days, "window_start": self.window_start,
                  "window_end": self.window_end, "window_tz": self.window_tz}
        try:
            return guard_window(window, datetime.now(UTC))
        except (OutsideMaintenanceWindow, ValueError) as exc:  # outside, or a window that cannot be read
            raise AirflowFailException(str(exc)) from exc
