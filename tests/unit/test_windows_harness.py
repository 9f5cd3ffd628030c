"""The harness's window Params are open (or closed) at every minute of the week, midnight included."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow_provider_kip848.changecontrol.window import MaintenanceWindow
from kip848_harness.windows import closed_window, open_window


def _window(params: dict[str, str]) -> MaintenanceWindow:
    return MaintenanceWindow.parse(params["window_days"], params["window_start"], params["window_end"],
                                   params["window_tz"])


def test_open_for_hours_and_closed_for_hours_at_every_minute_of_a_week():
    monday = datetime(2026, 11, 23, tzinfo=UTC)
    for minute in range(0, 7 * 24 * 60, 7):
        now = monday + timedelta(minutes=minute)
        opened = _window(open_window(now))
        assert all(opened.contains(now + timedelta(minutes=m)) for m in (0, 59, 4 * 60)), now
        closed = _window(closed_window(now))
        assert not any(closed.contains(now + timedelta(minutes=m)) for m in (0, 59, 119)), now
