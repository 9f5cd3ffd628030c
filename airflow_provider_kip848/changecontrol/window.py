"""Maintenance windows: when a change with downtime may run.

No DAG has a timetable unless the deployment gives it one
(``[kip848] <dag_id>_schedule``, :mod:`.schedule`); every run, scheduled or
triggered, is checked by :func:`check_window`, which fails fast, with the
next opening, instead of starting a downtime at the wrong hour.

A window is read strictly, because a window that is not what was meant opens a
downtime at an hour nobody agreed to: a day range (``THU-FRI``) is expanded
and the expansion printed; a day that does not read (``MONKEY``, ``SAT SUN``)
is refused instead of cut to its first three letters; ``HH:MM`` only, on the
clock of the window's time zone (a time with a UTC offset, ``02:00+02:00`` or
``02:00Z``, is refused, its conversion named: the zone has its own offset and
daylight saving time); start equal to end is refused (no window, or a whole
day?); a window longer than the deployment's maximum is refused naming the
swap that would make it short (``05:00-02:00`` is 21 hours across midnight).
:meth:`MaintenanceWindow.understood` is the window as read, which the guard
logs and the approval shows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any, TypedDict
from zoneinfo import ZoneInfo

from airflow_provider_kip848.kafka.errors import InvalidMaintenanceWindow, Kip848Error

DAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
_FULL_DAYS = ("MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY", "SUNDAY")
#: the longest window a deployment allows unless ``[kip848] max_window_hours`` says otherwise: a maintenance
#: window is hours, and a start and end given the wrong way round reads as most of a day
DEFAULT_MAX_WINDOW_HOURS = 12.0
_RANGE = re.compile(r"^\s*([^-–.]+?)\s*(?:-|–|\.\.)\s*([^-–.]+?)\s*$")
_TIME = re.compile(r"^(\d{1,2}):(\d{2})$")
#: what a time with a UTC offset ends with: Z, +02:00, -0530, +02, " UTC", " GMT+1"
_OFFSET = re.compile(r"^(?P<time>\d{1,2}:\d{2}(?::\d{2})?)\s*(?P<offset>Z|[+-]\d{1,2}(?::?\d{2})?|"
                     r"(?:UTC|GMT)(?:\s*[+-]\s*\d{1,2}(?::?\d{2})?)?)$", re.IGNORECASE)
#: zone names whose offset is not what they seem to say: POSIX Etc/GMT+2 is UTC-02:00, and EST/MST/HST never
#: follow the daylight saving time of the places called that
_MISLEADING_ZONE = re.compile(r"^(?:Etc/)?GMT[+-]\d{1,2}$|^(?:EST|MST|HST)$")


class OutsideMaintenanceWindow(Kip848Error):
    """Now is not inside the run's maintenance window (the message names the next opening)."""

    remedy = "Trigger the run inside the window (or let the schedule start it)."


def _day(token: str, given: object) -> int:
    """The index of one day name: MON or MONDAY (any case; a longer prefix of the full name, THURS, too)."""
    word = token.strip().upper()
    for i, full in enumerate(_FULL_DAYS):
        if len(word) >= 3 and full.startswith(word):
            return i
    raise InvalidMaintenanceWindow(
        f"window days must be among {', '.join(DAYS)}, got {given!r}: {token.strip()!r} is not a day",
        remedy="Give the days comma-separated (SAT,SUN) or as a range (THU-FRI, FRI-MON across the weekend).")


def parse_days(days: str | list[str] | tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The window's days in week order, and how each range was expanded (``THU-FRI read as THU,FRI``)."""
    items = days.split(",") if isinstance(days, str) else list(days) if isinstance(days, (list, tuple)) else None
    if items is None or not all(isinstance(i, str) for i in items):
        raise InvalidMaintenanceWindow(f"window days must be text like 'SAT,SUN' or a list of days, not {days!r}")
    chosen: set[int] = set()
    expanded: list[str] = []
    for item in items:
        if not item.strip():
            if isinstance(days, str) and days.strip():
                raise InvalidMaintenanceWindow(f"window days {days!r} has an empty entry between commas",
                                               remedy="Remove the extra comma (SAT,SUN).")
            continue
        ranged = _RANGE.match(item)
        if ranged:
            first, last = _day(ranged.group(1), days), _day(ranged.group(2), days)
            span = [(first + k) % 7 for k in range((last - first) % 7 + 1)]
            chosen.update(span)
            across = " (across the weekend)" if last < first else ""
            expanded.append(f"{item.strip()} read as {','.join(DAYS[d] for d in span)}{across}")
        else:
            chosen.add(_day(item, days))
    if not chosen:
        raise InvalidMaintenanceWindow(f"window days must be among {', '.join(DAYS)}, got {days!r}: no day given")
    return tuple(DAYS[d] for d in sorted(chosen)), tuple(expanded)


def parse_time(value: object, name: str, tz: str) -> time:
    """``HH:MM`` on the clock of ``tz``; a time with a UTC offset is refused, its conversion named."""
    text = str(value).strip() if isinstance(value, str) else None
    if text is None:
        raise InvalidMaintenanceWindow(f"{name} must be a time HH:MM, not {value!r}")
    offset = _OFFSET.match(text)
    if offset:
        raise InvalidMaintenanceWindow(
            f"{name} {text!r} carries a UTC offset: the window's times are wall-clock times of window_tz "
            f"({tz}), whose offset is its own (and follows its daylight saving time){_converted(offset, tz)}",
            remedy=f"Give {name} as HH:MM without an offset, on the clock of window_tz, or set window_tz to "
                   "the zone whose clock you meant (e.g. Europe/Berlin rather than +02:00).")
    match = _TIME.match(text)
    if not match:
        remedy = ("Use the 24-hour clock: 14:00, not 2 PM." if re.search(r"[ap]\.?m\.?$", text, re.IGNORECASE)
                  else "Give the time as HH:MM (02:00).")
        raise InvalidMaintenanceWindow(f"{name} must be a time HH:MM, not {value!r}", remedy=remedy)
    hour, minute = int(match.group(1)), int(match.group(2))
    if hour == 24 and minute == 0:
        raise InvalidMaintenanceWindow(f"{name} '24:00' is not a time of day",
                                       remedy="Write 00:00: a window ending at midnight ends at 00:00.")
    if hour > 23 or minute > 59:
        raise InvalidMaintenanceWindow(f"{name} {text!r} is not a time of day (00:00 to 23:59)")
    return time(hour, minute)


def _converted(offset: re.Match[str], tz: str) -> str:
    """What an offset time is in UTC and, today, on the clock of ``tz`` (named, never applied)."""
    raw = offset.group("offset").upper().replace(" ", "")
    sign_part = re.search(r"([+-])(\d{1,2})(?::?(\d{2}))?$", raw)
    minutes = 0
    if sign_part:
        minutes = (int(sign_part.group(2)) * 60 + int(sign_part.group(3) or 0)) * (1 if sign_part.group(1) == "+"
                                                                                      else -1)
    try:
        clock = time.fromisoformat(offset.group("time"))
    except ValueError:
        return ""
    today = datetime.now(UTC).date()
    at_utc = datetime.combine(today, clock, UTC) - timedelta(minutes=minutes)
    try:
        local = at_utc.astimezone(ZoneInfo(tz)).strftime("%H:%M")
    except Exception:  # noqa: BLE001 - the zone is refused on its own
        return f"; it is {at_utc:%H:%M} UTC"
    return f"; it is {at_utc:%H:%M} UTC, {local} in {tz} today"


def check_zone(tz: object) -> str:
    """An IANA zone the window's times are read in; a name whose offset is not what it says is refused."""
    if not isinstance(tz, str) or not tz.strip():
        raise InvalidMaintenanceWindow(f"unknown time zone {tz!r}: window_tz is empty",
                                       remedy="Give an IANA time zone (UTC, Europe/Berlin, America/New_York).")
    name = tz.strip()
    if _MISLEADING_ZONE.match(name):
        raise InvalidMaintenanceWindow(
            f"time zone {name!r} is not what its name seems to say: Etc/GMT+N is UTC-N (POSIX inverts the sign), "
            "and EST, MST and HST are fixed offsets that never follow daylight saving time",
            remedy="Give the region's zone (Europe/Berlin, America/New_York), or UTC with the times in UTC.")
    try:
        ZoneInfo(name)
    except Exception as exc:  # noqa: BLE001
        raise InvalidMaintenanceWindow(
            f"unknown time zone {tz!r}",
            remedy="Give an IANA time zone (UTC, Europe/Berlin, America/New_York); an offset like +02:00 is not "
                   "a zone.") from exc
    return name


def max_window_hours(value: object) -> float:
    """The deployment's longest window (``[kip848] max_window_hours``; None or empty: the default), strictly:
    a value that is not a number of hours in (0, 24] is an error, never the default."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return DEFAULT_MAX_WINDOW_HOURS
    try:
        hours = float(str(value).strip())
    except ValueError:
        hours = float("nan")
    if not 0 < hours <= 24:  # nan fails too
        raise InvalidMaintenanceWindow(
            f"[kip848] max_window_hours must be a number of hours above 0 and at most 24, not {value!r}",
            remedy=f"Fix the deployment's setting (unset: {DEFAULT_MAX_WINDOW_HOURS:g} h).")
    return hours


class WindowFacts(TypedDict):
    """A window as the plan, the guard's XCom and the report show it (:meth:`MaintenanceWindow.to_dict`)."""

    days: list[str]
    start: str
    end: str
    tz: str
    hours: float
    across_midnight: bool
    expanded: list[str]
    understood: str


@dataclass(frozen=True)
class MaintenanceWindow:
    days: tuple[str, ...]
    start: time
    end: time
    tz: str = "UTC"
    #: how the days were read, when not given one by one (``THU-FRI read as THU,FRI``)
    expanded: tuple[str, ...] = ()

    @classmethod
    def parse(cls, days: str | list[str], start: str, end: str, tz: str = "UTC", *,
              max_hours: float | None = DEFAULT_MAX_WINDOW_HOURS) -> MaintenanceWindow:
        """The window the four Params describe, or :class:`InvalidMaintenanceWindow` saying why it cannot be
        what was meant. ``max_hours`` None: no longest window (the plan's rendering of a window already
        checked)."""
        zone = check_zone(tz)
        day_list, expanded = parse_days(days)
        opens, closes = parse_time(start, "window_start", zone), parse_time(end, "window_end", zone)
        if opens == closes:
            raise InvalidMaintenanceWindow(
                f"window_start and window_end are both {opens:%H:%M}: that is no window at all, or a whole day",
                remedy="Give the closing time (window_end) at which the downtime must be over.")
        window = cls(day_list, opens, closes, zone, expanded)
        if max_hours is not None and window.hours > max_hours:
            swapped = 24 - window.hours
            hint = (f" Swapped start and end? {closes:%H:%M}-{opens:%H:%M} would be {swapped:g} h."
                    if window.across_midnight and swapped <= max_hours else "")
            raise InvalidMaintenanceWindow(
                f"the window {opens:%H:%M}-{closes:%H:%M} ({zone}) lasts {window.hours:g} h"
                f"{' (across midnight)' if window.across_midnight else ''}, longer than this deployment's maximum "
                f"of {max_hours:g} h ([kip848] max_window_hours).{hint}",
                remedy="Give the window you meant, or raise [kip848] max_window_hours if a window this long is "
                       "intended.")
        return window

    @property
    def across_midnight(self) -> bool:
        return self.end < self.start

    @property
    def hours(self) -> float:
        """The window's length on its zone's clock (a day changing its clock for daylight saving time is an
        hour longer or shorter)."""
        minutes = (self.end.hour * 60 + self.end.minute) - (self.start.hour * 60 + self.start.minute)
        return round((minutes % (24 * 60)) / 60, 2)

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

    def understood(self) -> str:
        """The window as read, in words: days, start-end, zone, length, and what a range or midnight means."""
        closes = "the next day" if self.across_midnight else "the same day"
        text = (f"{self.describe()}: {self.hours:g} h, opening {','.join(self.days)} at {self.start:%H:%M} and "
                f"closing at {self.end:%H:%M} {closes} ({self.tz} clock)")
        if self.across_midnight:
            text += "; a window across midnight belongs to the day it opens"
        if self.expanded:
            text += "; " + "; ".join(self.expanded)
        return text

    def to_dict(self) -> WindowFacts:
        return {"days": list(self.days), "start": f"{self.start:%H:%M}", "end": f"{self.end:%H:%M}", "tz": self.tz,
                "hours": self.hours, "across_midnight": self.across_midnight, "expanded": list(self.expanded),
                "understood": self.understood()}


def check_window(window: MaintenanceWindow, moment: datetime) -> None:
    if not window.contains(moment):
        raise OutsideMaintenanceWindow(
            f"{moment.isoformat(timespec='minutes')} is outside the maintenance window {window.describe()}; "
            f"the next one opens {window.next_opening(moment).isoformat(timespec='minutes')}.")


def window_from_params(params: Mapping[str, Any],  # Any: DAG Params (their schemas allow several types)
                       *, max_hours: float | None = DEFAULT_MAX_WINDOW_HOURS) -> MaintenanceWindow:
    """The window the DAG Params ``window_days``, ``window_start``, ``window_end``, ``window_tz`` describe."""
    return MaintenanceWindow.parse(params["window_days"], params["window_start"], params["window_end"],
                                   params["window_tz"], max_hours=max_hours)


def guard_window(params: Mapping[str, Any],  # Any: DAG Params (their schemas allow several types)
                 now: datetime, *, max_hours: float = DEFAULT_MAX_WINDOW_HOURS
                 ) -> dict[str, Any]:  # Any: the guard task's XCom (JSON), as its operator returns it
    """The migration DAGs' first task: the window their Params describe (``window_days``,
    ``window_start``, ``window_end``, ``window_tz``) must contain ``now``; raises
    :class:`OutsideMaintenanceWindow` naming the next opening, :class:`InvalidMaintenanceWindow` for a window
    that cannot be what was meant."""
    window = window_from_params(params, max_hours=max_hours)
    check_window(window, now)
    return {"window": window.describe(), "understood": window.to_dict(), "max_hours": max_hours,
            "checked_at": now.isoformat(timespec="seconds")}


def window_note(params: Mapping[str, Any]) -> str:  # Any: DAG Params (their schemas allow several types)
    """The approval's line about the window the run is held to (the guard checked it before the plan)."""
    return f"maintenance window: {window_from_params(params, max_hours=None).understood()}"
