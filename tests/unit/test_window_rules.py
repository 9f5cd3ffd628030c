"""Maintenance windows that cannot be what was meant are refused, or expanded and shown as read (issue 31, class 5).

A window opens a downtime: one read otherwise than it was meant opens it at an hour nobody agreed to. Each case
below was accepted before (or crashed the guard with a raw TypeError: a time with an offset): a day cut to its
first three letters (MONKEY was Monday; "SAT SUN" was Saturday only), a time with a UTC offset, start equal to end
(a window that never opens), a swapped start and end (05:00-02:00, 21 hours across midnight). Now each is the
provider's InvalidMaintenanceWindow (bad input: not retriable) saying why and what to give instead; a day range
is expanded and the expansion printed; the guard logs the window as understood and the approval shows it.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from airflow.sdk.exceptions import AirflowFailException
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_kip848.changecontrol.window import (
    DAYS,
    DEFAULT_MAX_WINDOW_HOURS,
    MaintenanceWindow,
    guard_window,
    max_window_hours,
    window_note,
)
from airflow_provider_kip848.kafka.errors import InvalidMaintenanceWindow
from airflow_provider_kip848.operators.window import KafkaMaintenanceWindowGuardOperator
from kip848_harness.windows import open_window


def window(days: str = "SAT", start: str = "02:00", end: str = "05:00", tz: str = "UTC") -> dict[str, str]:
    return {"window_days": days, "window_start": start, "window_end": end, "window_tz": tz}


# (case id, window, fragments of the refusal: the reason, and the remedy)
REFUSED = [
    ("day-not-a-day", window(days="MONKEY"), ["'MONKEY' is not a day", "comma-separated"]),
    ("days-blank-separated", window(days="SAT SUN"), ["'SAT SUN' is not a day", "SAT,SUN"]),
    ("days-empty-entry", window(days="SAT,,SUN"), ["empty entry", "Remove the extra comma"]),
    ("days-none", window(days=" "), ["no day given"]),
    ("range-to-nothing", window(days="THU-"), ["'THU-' is not a day"]),
    ("range-of-non-days", window(days="THU-FRYDAY"), ["'FRYDAY' is not a day"]),
    ("start-with-offset", window(start="02:00+02:00", tz="Europe/Berlin"),
     ["window_start '02:00+02:00' carries a UTC offset", "it is 00:00 UTC", "in Europe/Berlin today",
      "without an offset, on the clock of window_tz"]),
    ("end-zulu", window(end="05:00Z"), ["window_end '05:00Z' carries a UTC offset", "it is 05:00 UTC"]),
    ("start-with-utc-suffix", window(start="02:00 UTC"), ["carries a UTC offset"]),
    ("start-negative-offset", window(start="22:00-0500", end="23:00"),
     ["carries a UTC offset", "it is 03:00 UTC"]),
    ("start-twelve-hour-clock", window(start="2 PM", end="16:00"), ["must be a time HH:MM", "24-hour clock"]),
    ("start-without-colon", window(start="0200"), ["must be a time HH:MM, not '0200'"]),
    ("start-24", window(start="22:00", end="24:00"), ["'24:00' is not a time of day", "Write 00:00"]),
    ("start-minute-60", window(start="02:60"), ["not a time of day"]),
    ("start-not-text", window(start=2), ["must be a time HH:MM, not 2"]),  # type: ignore[arg-type]
    ("start-equals-end", window(start="02:00", end="02:00"),
     ["both 02:00", "no window at all, or a whole day", "Give the closing time"]),
    ("swapped", window(start="05:00", end="02:00"),
     ["lasts 21 h (across midnight)", "maximum of 12 h ([kip848] max_window_hours)",
      "Swapped start and end? 02:00-05:00 would be 3 h"]),
    ("too-long-same-day", window(start="02:00", end="16:00"), ["lasts 14 h", "maximum of 12 h"]),
    ("posix-gmt-zone", window(tz="Etc/GMT+2"), ["Etc/GMT+N is UTC-N", "region's zone"]),
    ("fixed-est", window(tz="EST"), ["never follow daylight saving time"]),
    ("offset-as-zone", window(tz="+02:00"), ["unknown time zone '+02:00'", "an offset like +02:00 is not a zone"]),
    ("empty-zone", window(tz=""), ["window_tz is empty"]),
]


@pytest.mark.parametrize("given_window, fragments", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_window_that_cannot_be_what_was_meant_is_refused_saying_why(given_window, fragments):
    with pytest.raises(InvalidMaintenanceWindow) as err:
        guard_window(given_window, datetime(2026, 11, 28, 3, 0, tzinfo=UTC))
    assert not err.value.retriable and err.value.remedy
    for fragment in fragments:
        assert fragment in str(err.value), (fragment, str(err.value))
    # the guard task: the same words, failed without retry (a retry would only repeat them)
    with pytest.raises(AirflowFailException) as failed:
        KafkaMaintenanceWindowGuardOperator(task_id="window_guard", **given_window).execute({})
    assert isinstance(failed.value.__cause__, InvalidMaintenanceWindow)
    assert str(err.value).split(";")[0] in str(failed.value)


# (case id, days given, days read, the expansion printed)
EXPANDED = [
    ("thu-fri", "THU-FRI", ("THU", "FRI"), "THU-FRI read as THU,FRI"),
    ("across-the-weekend", "FRI-MON", ("MON", "FRI", "SAT", "SUN"), "FRI-MON read as FRI,SAT,SUN,MON (across the weekend)"),
    ("the-forms-own-words", "MON..SUN", DAYS, "MON..SUN read as MON,TUE,WED,THU,FRI,SAT,SUN"),
    ("full-names-any-case", "thursday - Saturday", ("THU", "FRI", "SAT"), "thursday - Saturday read as THU,FRI,SAT"),
    ("en-dash", "SAT–SUN", ("SAT", "SUN"), "SAT–SUN read as SAT,SUN"),
    ("list-and-range", "MON, WED-THU", ("MON", "WED", "THU"), "WED-THU read as WED,THU"),
]


@pytest.mark.parametrize("days, read, printed", [c[1:] for c in EXPANDED], ids=[c[0] for c in EXPANDED])
def test_a_day_range_is_expanded_and_the_expansion_printed(days, read, printed):
    parsed = MaintenanceWindow.parse(days, "02:00", "05:00", "Europe/Berlin")
    assert parsed.days == read
    assert printed in parsed.understood()
    assert window_note(window(days, tz="Europe/Berlin")) == f"maintenance window: {parsed.understood()}"


def test_the_window_as_understood_names_days_times_zone_length_and_midnight():
    text = MaintenanceWindow.parse("SAT", "22:00", "02:00", "Europe/Berlin").understood()
    assert text == ("SAT 22:00-02:00 Europe/Berlin: 4 h, opening SAT at 22:00 and closing at 02:00 the next day "
                    "(Europe/Berlin clock); a window across midnight belongs to the day it opens")
    same_day = MaintenanceWindow.parse("SAT,SUN", "1:30", "04:00").to_dict()
    assert same_day == {"days": ["SAT", "SUN"], "start": "01:30", "end": "04:00", "tz": "UTC", "hours": 2.5,
                        "across_midnight": False, "expanded": [],
                        "understood": "SAT,SUN 01:30-04:00 UTC: 2.5 h, opening SAT,SUN at 01:30 and closing at "
                                      "04:00 the same day (UTC clock)"}


def test_the_longest_window_is_the_deployments_setting_read_strictly(monkeypatch):
    """``[kip848] max_window_hours``: a longer window is refused naming it; a value that does not read fails every
    guard instead of falling back to the default (a guard never fails open)."""
    assert max_window_hours(None) == max_window_hours("") == DEFAULT_MAX_WINDOW_HOURS == 12
    ten_hours = open_window(hours=10)
    guard = KafkaMaintenanceWindowGuardOperator(task_id="window_guard", **ten_hours)
    assert guard.execute({})["understood"]["hours"] == 10  # the default allows it
    monkeypatch.setenv("AIRFLOW__KIP848__MAX_WINDOW_HOURS", "8")
    with pytest.raises(AirflowFailException, match=r"lasts 10 h( \(across midnight\))?, longer than this deployment's maximum of 8 h"):
        guard.execute({})
    for bad in ("eight", "0", "-3", "25", "nan", "8h"):
        monkeypatch.setenv("AIRFLOW__KIP848__MAX_WINDOW_HOURS", bad)
        with pytest.raises(AirflowFailException, match=r"\[kip848\] max_window_hours must be a number of hours") as err:
            guard.execute({})
        assert isinstance(err.value.__cause__, InvalidMaintenanceWindow), bad
    monkeypatch.setenv("AIRFLOW__KIP848__MAX_WINDOW_HOURS", "24")
    # what the guard returns for the report (its log line is checked in a DAG run: tests/e2e/test_locked_runs.py)
    result = KafkaMaintenanceWindowGuardOperator(task_id="window_guard", **open_window(hours=20)).execute({})
    assert result["max_hours"] == 24 and result["understood"]["hours"] == 20


def test_a_time_with_an_offset_no_longer_crashes_the_guard_with_a_raw_type_error():
    """It used to parse (``time.fromisoformat`` keeps the offset) and then fail comparing an aware time with the
    naive local time: a TypeError, retried by Airflow. Now it never gets that far."""
    with pytest.raises(InvalidMaintenanceWindow):
        MaintenanceWindow.parse("MON,TUE,WED,THU,FRI,SAT,SUN", "00:00+00:00", "06:00")


# -- generated: any window is refused with the provider's error, or read as something that can be what was meant ---

_DAY_WORDS = st.sampled_from([*DAYS, "monday", "Thursday", "THURS", "TUES", "MONKEY", "SA", "", " ", "X", "DAILY",
                              "SAT SUN", "MON..", "1"])
_SEPARATORS = st.sampled_from([",", ", ", "-", "..", "–", " - ", ";", " ", ",,"])
_DAYS = st.lists(st.tuples(_DAY_WORDS, _SEPARATORS), min_size=1, max_size=4).map(
    lambda parts: "".join(w + s for w, s in parts)[:-1] or parts[0][0])
_TIMES = st.one_of(
    st.builds(lambda h, m: f"{h:02d}:{m:02d}", st.integers(0, 25), st.integers(0, 61)),
    st.builds(lambda h, m: f"{h}:{m:02d}", st.integers(0, 9), st.integers(0, 59)),
    st.builds(lambda h, o: f"{h:02d}:00{o}", st.integers(0, 23),
              st.sampled_from(["Z", "+02:00", "-05:00", "+0530", "+02", " UTC", " GMT+1", "z"])),
    st.sampled_from(["", "2 PM", "0200", "02", "T02:00", "02:00:00", "24:00", "noon", "02.00"]))
_ZONES = st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Etc/GMT+2", "Etc/GMT-14",
                          "EST", "CET", "+02:00", "", "utc", "Mars/Olympus"])


@settings(max_examples=400, deadline=None, derandomize=True)
@given(days=_DAYS, start=_TIMES, end=_TIMES, tz=_ZONES, max_hours=st.sampled_from([12.0, 4.0, 24.0]))
def test_generated_windows_are_refused_or_read_as_meant(days, start, end, tz, max_hours):
    try:
        parsed = MaintenanceWindow.parse(days, start, end, tz, max_hours=max_hours)
    except InvalidMaintenanceWindow as exc:  # the provider's own error, never a raw one
        assert not exc.retriable and exc.remedy and str(exc)
        return
    # accepted: nothing that cannot be what was meant
    assert parsed.days and set(parsed.days) <= set(DAYS) and list(parsed.days) == sorted(parsed.days, key=DAYS.index)
    assert parsed.start != parsed.end and 0 < parsed.hours <= max_hours
    assert parsed.start.tzinfo is None and parsed.end.tzinfo is None, "no time carries an offset"
    for given_time, read in ((start, parsed.start), (end, parsed.end)):
        hour, minute = given_time.split(":")
        assert read == time(int(hour), int(minute)), (given_time, read)
    assert tz.strip() == parsed.tz and not parsed.tz.startswith(("Etc/GMT", "+", "-"))
    for part in days.split(","):  # every range is printed with what it was read as
        if any(sep in part for sep in ("-", "..", "–")):
            assert f"{part.strip()} read as " in parsed.understood(), (days, parsed.understood())
        else:
            word = part.strip().upper()
            assert any(full.startswith(word) for full in ("MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY",
                                                          "SATURDAY", "SUNDAY")) and len(word) >= 3, (days, part)
    # the guard's reading of now never fails on an accepted window
    moment = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)  # the night Europe/Berlin moves its clock
    for step in range(0, 48):
        parsed.contains(moment + timedelta(minutes=37 * step))
    assert parsed.next_opening(moment) > moment
