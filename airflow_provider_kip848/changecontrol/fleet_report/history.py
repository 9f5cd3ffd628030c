"""The fleet history: one JSON line per run (:func:`append_history`), read back strictly (:func:`load_history`: a
bad line is an error naming it, never skipped)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_kip848.changecontrol.fleet_report.building import epoch_or_none, type_counts
from airflow_provider_kip848.kafka.errors import InvalidArgument

#: the format version of a history line (its ``v``)
HISTORY_VERSION = 1


class FleetHistoryInvalid(InvalidArgument):
    """A line of the fleet history that is not one run's record."""

    remedy = ("Each line of the fleet history is one run's JSON object, written by append_history; fix or delete "
              "the line named (a crash while appending can cut the last line short).")



_HISTORY_KEYS = frozenset({"v", "run_id", "dag_id", "ended_at", "outcome", "plan_hash", "migration", "types_before",
                           "types_after", "apps_migrated", "apps_failed", "apps_rolled_back", "longest_gap"})


@dataclass(frozen=True)
class HistoryEntry:
    """One fleet run in the history: when it ended, its plan, groups by type before and after (None: not
    taken), applications migrated, failed and rolled back, and its longest processing gap (None: none
    measured)."""

    run_id: str
    dag_id: str
    ended_at: float
    outcome: str
    plan_hash: str | None
    migration: str | None
    types_before: Mapping[str, int] | None
    types_after: Mapping[str, int] | None
    apps_migrated: int
    apps_failed: int
    apps_rolled_back: int
    longest_gap_app: str | None = None
    longest_gap_s: float | None = None

    @classmethod
    def from_report(cls, report: Mapping[str, Any]) -> HistoryEntry:  # Any: JSON read back (XCom, a file, a response)
        s, types, gap = report["summary"], report["types"], report["summary"]["longest_gap"]
        return cls(run_id=report["run_id"], dag_id=report["dag_id"], ended_at=report["ended_at"],
                   outcome=report["outcome"], plan_hash=report.get("plan_hash"), migration=report.get("migration"),
                   types_before=types["before"], types_after=types["after"], apps_migrated=s["applications_migrated"],
                   apps_failed=s["applications_failed"], apps_rolled_back=s["applications_rolled_back"],
                   longest_gap_app=gap["app"] if gap else None, longest_gap_s=gap["gap_s"] if gap else None)

    def to_dict(self) -> dict[str, object]:
        return {"v": HISTORY_VERSION, "run_id": self.run_id, "dag_id": self.dag_id, "ended_at": self.ended_at,
                "outcome": self.outcome, "plan_hash": self.plan_hash, "migration": self.migration,
                "types_before": None if self.types_before is None else dict(self.types_before),
                "types_after": None if self.types_after is None else dict(self.types_after),
                "apps_migrated": self.apps_migrated, "apps_failed": self.apps_failed,
                "apps_rolled_back": self.apps_rolled_back,
                "longest_gap": None if self.longest_gap_app is None else {"app": self.longest_gap_app,
                                                                           "gap_s": self.longest_gap_s}}

    @classmethod
    def from_dict(cls, data: object) -> HistoryEntry:
        """Strict: every key of :meth:`to_dict`, no other, each of its type (InvalidArgument otherwise)."""
        if not isinstance(data, Mapping):
            raise InvalidArgument(f"not a JSON object: {data!r}")
        if set(data) != _HISTORY_KEYS:
            raise InvalidArgument(f"keys missing {sorted(_HISTORY_KEYS - set(data))}, unknown "
                                  f"{sorted(set(data) - _HISTORY_KEYS)}")
        if data["v"] != HISTORY_VERSION or isinstance(data["v"], bool):
            raise InvalidArgument(f"format version {data['v']!r}, this reader knows {HISTORY_VERSION}")
        for key in ("run_id", "dag_id", "outcome"):
            _check(isinstance(data[key], str) and data[key], key, "a non-empty string", data[key])
        for key in ("plan_hash", "migration"):
            _check(data[key] is None or isinstance(data[key], str), key, "a string or null", data[key])
        for key in ("apps_migrated", "apps_failed", "apps_rolled_back"):
            _check(isinstance(data[key], int) and not isinstance(data[key], bool) and data[key] >= 0, key,
                   "a whole number >= 0", data[key])
        ended_at = epoch_or_none(data["ended_at"], "ended_at")
        _check(ended_at is not None, "ended_at", "epoch seconds", data["ended_at"])
        gap = data["longest_gap"]
        _check(gap is None or (isinstance(gap, Mapping) and set(gap) == {"app", "gap_s"}
                               and isinstance(gap["app"], str) and epoch_or_none(gap["gap_s"], "gap_s") is not None),
               "longest_gap", 'null or {"app": name, "gap_s": seconds}', gap)
        return cls(run_id=data["run_id"], dag_id=data["dag_id"], ended_at=float(data["ended_at"]),
                   outcome=data["outcome"], plan_hash=data["plan_hash"], migration=data["migration"],
                   types_before=type_counts(data["types_before"], "types_before"),
                   types_after=type_counts(data["types_after"], "types_after"), apps_migrated=data["apps_migrated"],
                   apps_failed=data["apps_failed"], apps_rolled_back=data["apps_rolled_back"],
                   longest_gap_app=gap["app"] if gap else None, longest_gap_s=float(gap["gap_s"]) if gap else None)


def _check(ok: Any, key: str, expected: str, got: Any) -> None:
    if not ok:
        raise InvalidArgument(f"{key!r} must be {expected}, got {got!r}")


def history_line(entry: HistoryEntry) -> str:
    """The entry as one compact JSON line (sorted keys: the same run gives the same line)."""
    return json.dumps(entry.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)


def parse_history(text: str, *, source: str = "<history>") -> list[HistoryEntry]:
    """Every run of a history's text, in file order. Strict: an empty line, a line that is not JSON or not a
    run's record is a :class:`FleetHistoryInvalid` naming ``source`` and the line number, never skipped."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    entries = []
    for number, line in enumerate(lines, 1):
        try:
            if not line.strip():
                raise InvalidArgument("the line is empty")
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise InvalidArgument(f"not JSON ({exc})") from exc
            entries.append(HistoryEntry.from_dict(data))
        except InvalidArgument as exc:
            raise FleetHistoryInvalid(f"{source} line {number}: {exc.what}") from exc
    return entries


def load_history(location: str) -> list[HistoryEntry]:
    """The runs in the history at ``location`` (a local path or an ObjectStoragePath URL), in file order; [] when
    there is no history yet. Strict: see :func:`parse_history`."""
    # optional dependency: storage imports Airflow (ObjectStoragePath); building and rendering a report load none
    from airflow_provider_kip848.changecontrol import storage  # noqa: PLC0415

    if not storage.exists(location):
        return []
    return parse_history(storage.read_text(location), source=location)


def append_history(location: str, report: Mapping[str, Any]) -> bool:  # Any: JSON of several shapes (XCom, reports)
    """Add the run of ``report`` to the history at ``location``, one line. False (and nothing written) when the
    history already has this DAG run: a retried report task does not count its run twice. The history is read
    first, strictly, so a run is never appended after a line that cannot be read."""
    # optional dependency: storage imports Airflow (ObjectStoragePath); building and rendering a report load none
    from airflow_provider_kip848.changecontrol import storage  # noqa: PLC0415

    entry = HistoryEntry.from_report(report)
    if any(e.run_id == entry.run_id and e.dag_id == entry.dag_id for e in load_history(location)):
        return False
    storage.append_line(location, history_line(entry))
    return True
