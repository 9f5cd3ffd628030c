"""Maintenance windows: when a change with downtime may run.

Scheduled runs get their start from a timetable (``CronTriggerTimetable``);
manual triggers are checked by :func:`check_window`, which fails fast, with the
next opening, instead of starting a downtime at the wrong hour.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

DAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")


class OutsideMaintenanceWindow(Exception):
    pass


@dataclass(frozen=True)
class MaintenanceWindow:
    days: tuple[str, ...]
    start: time
    end: time
    tz: str = "UTC"

    @classmethod
    def parse(cls, days: str | list[str], start: str, end: str, tz: str = "UTC") -> MaintenanceWindow:
        day_list = [d.strip().upper()[:3] for d in (days.split(",") if isinstance(days, str) else days) if d.strip()]
        if not day_list or any(d not in DAYS for d in day_list):
            raise ValueError(f"window days must be among {', '.join(DAYS)}, got {days!r}")
        try:
            ZoneInfo(tz)
        except Exception as exc:  # noqa: BLE001
            raise ValueError(f"unknown time zone {tz!r}") from exc
        return cls(tuple(day_list), time.fromisoformat(start), time.fromisoformat(end), tz)

    def contains(self, moment: datetime) -> bool:
        local = moment.astimezone(ZoneInfo(self.tz))
        t = local.time()
        day = DAYS[local.weekday()]
        if self.start <= self.end:
            return day in self.days and self.start <= t < self.end
        # across midnight: the window belongs to the day it opens
        if t >= self.start:
            return day in self.days
        return t < self.end and DAYS[(local.weekday() - 1) % 7] in self.days

    def next_opening(self, moment: datetime) -> datetime:
        local = moment.astimezone(ZoneInfo(self.tz))
        for delta in range(8):
            day = (local + timedelta(days=delta)).date()
            opening = datetime.combine(day, self.start, ZoneInfo(self.tz))
            if DAYS[opening.weekday()] in self.days and opening > local:
                return opening
        raise ValueError("window has no opening")  # pragma: no cover - parse() requires a day

    def describe(self) -> str:
        return f"{','.join(self.days)} {self.start.strftime('%H:%M')}-{self.end.strftime('%H:%M')} {self.tz}"


def check_window(window: MaintenanceWindow, moment: datetime) -> None:
    if not window.contains(moment):
        raise OutsideMaintenanceWindow(
            f"{moment.isoformat(timespec='minutes')} is outside the maintenance window {window.describe()}; "
            f"the next one opens {window.next_opening(moment).isoformat(timespec='minutes')}. Trigger the run "
            "inside the window (or let the schedule start it)."
        )


def guard_window(params: dict, now: datetime) -> dict[str, str]:
    """The migration DAGs' first task: the window their Params describe (``window_days``,
    ``window_start``, ``window_end``, ``window_tz``) must contain ``now``; raises
    :class:`OutsideMaintenanceWindow` naming the next opening."""
    window = MaintenanceWindow.parse(params["window_days"], params["window_start"], params["window_end"],
                                     params["window_tz"])
    check_window(window, now)
    return {"window": window.describe(), "checked_at": now.isoformat(timespec="seconds")}
