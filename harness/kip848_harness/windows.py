"""Maintenance-window Params for runs that must be inside (or outside) their window now.

"Today, 00:00-23:59" is closed in the last minute of each UTC day, and a run started at 23:58 ends in another
day: the demo failed its ``window_guard`` that way once. These windows are relative to the moment they are made,
every day of the week, an hour either side of it, so a run that takes a few hours stays inside (or outside).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow_provider_kip848.changecontrol.window import DAYS


def _every_day(start: datetime, hours: int) -> dict[str, str]:
    """Window Params opening at ``start``'s time of day, every day, for ``hours`` (UTC)."""
    return {"window_days": ",".join(DAYS), "window_start": start.strftime("%H:%M"),
            "window_end": (start + timedelta(hours=hours)).strftime("%H:%M"), "window_tz": "UTC"}


def open_window(now: datetime | None = None, hours: int = 6) -> dict[str, str]:
    """Window Params that contain ``now`` and the next ``hours`` - 1 hours (every day, UTC)."""
    return _every_day((now or datetime.now(UTC)) - timedelta(hours=1), hours)


def closed_window(now: datetime | None = None) -> dict[str, str]:
    """Window Params that open three hours after ``now`` for an hour (every day, UTC): closed now and for the next
    two hours."""
    return _every_day((now or datetime.now(UTC)) + timedelta(hours=3), 1)


__all__ = ["closed_window", "open_window"]
