"""The wave validation job: many groups, one Spark application, one verdict per group and one for the wave.

A fleet wave moves dozens of groups at once; validating each with its own
SparkSession costs a JVM start per group. This job takes the whole wave and
reads every group's records in one pass: the union of the ranges is read once
(one Spark task per Kafka partition, on as many executors as the cluster
has), each record is tagged with the groups and checks whose range holds it,
and every check is computed for all groups at once (a ``group_id`` column).
Each group's figures then go through the same verdict builders as the
single-group job (:mod:`airflow_provider_kip848.spark.checks`), so a group's
verdicts mean exactly what they mean there.

Spec (JSON; ``groups`` required, every group has at least one check)::

    {
      "format": "kip848-wave-validation", "version": 1,
      "title": "fleet wave 2",
      "bootstrap_servers": "b1:9092", "security": {...ClientSettings fields...},
      "reader": "connector" | "python",
      "output_dir": "/reports/run-1/wave-2",
      "groups": [
        {"group_id": "orders-consumer", "app": "orders",
         "offsets_preserved": {"before": <snapshot>, "after": <snapshot>, "allow_advanced": true},
         "lag": {"after": <snapshot>, "before": <snapshot> | null, "max_total_lag": 0, "max_partition_lag": null,
                 "margin_fraction": 0.5, "margin_records": 100},   # max_total_lag null: after <= before + margin
         "continuity": {"ranges": {"topic:partition": [start, end]} | "between": [capture1, capture2],
                        "id_source": "key" | "value" | "json:<field>", "id_type": "long",
                        "expected_min": null, "expected_max": null, "allowed_duplicates": 0},
         "counts": {"ranges" | "between": ..., "explained_by": null | "compaction" | "transactions"}},
        ...
      ]
    }

The check sections are those of the single-group spec (:mod:`~airflow_provider_kip848.spark.job`). A
``<snapshot>`` is a path the driver can read, or the snapshot's JSON object itself:
:func:`inline_snapshots` replaces paths by contents, so that a driver on a cluster node needs no
access to the deployment's artifact storage. The spec may hold the connection's secrets: it is
passed as a file (mode 0600), never on a command line: ``spark-submit ... wave.py --spec <path>``.

The job writes ``validation.json`` (``overall`` and ``groups``) and ``validation.html`` to
``output_dir`` and prints a one-line summary. Its exit code is 0 when it judged the wave (passed or
not: the caller reads the verdicts) and 1 when it could not; ``--fail-on-failed-checks`` exits 3
when a group failed.

Why over 500 lines: this is the wave job's one contract with its callers: the spec it is given
(:class:`WaveSpec`, parsed strictly), the pass over the records, the verdicts and the outcome the operator acts
on (:func:`outcome`), and the ``spark-submit`` entry point (:func:`main`); the operator, the single-group job
(:mod:`.job`), the bench and the tests use them as ``wave.<name>``. The pure checks are in :mod:`.checks`,
the readers in :mod:`.reader`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_kip848.kafka.arguments import parse_flag, parse_number, require_choice, require_group_id
from airflow_provider_kip848.kafka.errors import InvalidArgument, Kip848Error
from airflow_provider_kip848.kafka.model import OffsetSnapshot, TopicPartition
from airflow_provider_kip848.kafka.rules.lag import MARGIN_FRACTION, MARGIN_RECORDS, LagMargin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.spark import checks
from airflow_provider_kip848.spark.checks import MAX_LISTED, Verdict
from airflow_provider_kip848.spark.report import wave_report_dict, write_report
from airflow_provider_kip848.spark.session import job_session, spark_versions

WAVE_FORMAT = "kip848-wave-validation"
WAVE_VERSION = 1
CHECKS = ("offsets_preserved", "lag", "continuity", "counts", "output_timing")
READERS = ("connector", "python")
ID_TYPES = ("long", "bigint", "int", "integer", "short", "smallint")
CONTINUITY, COUNTS, TIMING = "continuity", "counts", "output_timing"
#: a record check's range on one partition of one group: (group index, topic, partition, partition index,
#: continuity [start, end), counts [start, end), output_timing [start, end), id source index); None: not asked
TAG_SCHEMA = ("gk int, t_topic string, t_partition int, pk int, c_start long, c_end long, n_start long, n_end long, "
              "t_start long, t_end long, id_key int")

Ranges = dict[TopicPartition, tuple[int, int]]
SnapshotRef = str | OffsetSnapshot


# -- the spec ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetsCheck:
    before: SnapshotRef
    after: SnapshotRef
    allow_advanced: bool = True


@dataclass(frozen=True)
class LagCheck:
    after: SnapshotRef
    before: SnapshotRef | None = None
    #: None: the lag after against the lag before plus ``margin`` (a live application's lag is never 0)
    max_total_lag: int | None = 0
    max_partition_lag: int | None = None
    margin: LagMargin = field(default_factory=LagMargin)


@dataclass(frozen=True)
class ContinuityCheck:
    ranges: Ranges
    id_source: str = "key"
    id_type: str = "long"
    expected_min: int | None = None
    expected_max: int | None = None
    allowed_duplicates: int = 0


@dataclass(frozen=True)
class CountsCheck:
    ranges: Ranges
    explained_by: str | None = None


@dataclass(frozen=True)
class TimingCheck:
    ranges: Ranges
    max_gap_seconds: float | None = None


@dataclass(frozen=True)
class GroupSpec:
    """One group of the wave and its checks (at least one)."""

    group_id: str
    app: str | None = None
    offsets_preserved: OffsetsCheck | None = None
    lag: LagCheck | None = None
    continuity: ContinuityCheck | None = None
    counts: CountsCheck | None = None
    output_timing: TimingCheck | None = None

    @property
    def checks(self) -> tuple[str, ...]:
        return tuple(c for c in CHECKS if getattr(self, c) is not None)

    @classmethod
    def from_dict(cls, data: object, where: str = "group") -> GroupSpec:
        if not isinstance(data, Mapping):
            raise InvalidArgument(f"{where} must be an object with a group_id and its checks, not {data!r}.")
        unknown = sorted(set(data) - {"group_id", "app", *CHECKS})
        if unknown:
            raise InvalidArgument(f"{where} has unknown keys {unknown}; a group has group_id, app and the checks "
                                  f"{', '.join(CHECKS)}.")
        group_id = require_group_id(data.get("group_id"))
        where = f"group {group_id!r}"
        app = data.get("app")
        if app is not None and not isinstance(app, str):
            raise InvalidArgument(f"{where}: app must be text, not {app!r}.")
        spec = cls(
            group_id, app,
            offsets_preserved=_offsets(data["offsets_preserved"], where) if "offsets_preserved" in data else None,
            lag=_lag(data["lag"], where) if "lag" in data else None,
            continuity=_continuity(data[CONTINUITY], where) if CONTINUITY in data else None,
            counts=_counts(data[COUNTS], where) if COUNTS in data else None,
            output_timing=_timing(data[TIMING], where) if TIMING in data else None,
        )
        if not spec.checks:
            raise InvalidArgument(f"{where} asks for no check; give at least one of {', '.join(CHECKS)}.")
        return spec

    def to_dict(self) -> dict[str, object]:
        out: dict[str, Any] = {"group_id": self.group_id}
        if self.app is not None:
            out["app"] = self.app
        if self.offsets_preserved:
            o = self.offsets_preserved
            out["offsets_preserved"] = {"before": _ref_out(o.before), "after": _ref_out(o.after),
                                        "allow_advanced": o.allow_advanced}
        if self.lag:
            lag = self.lag
            out["lag"] = {"after": _ref_out(lag.after), "before": None if lag.before is None else _ref_out(lag.before),
                          "max_total_lag": lag.max_total_lag, "max_partition_lag": lag.max_partition_lag,
                          "margin_fraction": lag.margin.fraction, "margin_records": lag.margin.records}
        if self.continuity:
            c = self.continuity
            out[CONTINUITY] = {"ranges": _ranges_out(c.ranges), "id_source": c.id_source, "id_type": c.id_type,
                               "expected_min": c.expected_min, "expected_max": c.expected_max,
                               "allowed_duplicates": c.allowed_duplicates}
        if self.counts:
            out[COUNTS] = {"ranges": _ranges_out(self.counts.ranges), "explained_by": self.counts.explained_by}
        if self.output_timing:
            out[TIMING] = {"ranges": _ranges_out(self.output_timing.ranges),
                           "max_gap_seconds": self.output_timing.max_gap_seconds}
        return out


@dataclass(frozen=True)
class WaveSpec:
    groups: tuple[GroupSpec, ...]
    title: str = "Kafka migration validation"
    bootstrap_servers: str | None = None
    security: dict[str, Any] = field(default_factory=dict)  # Any: JSON of several shapes
    reader: str = "connector"
    output_dir: str | None = None

    @property
    def needs_records(self) -> bool:
        return any(g.continuity or g.counts or g.output_timing for g in self.groups)

    def settings(self) -> ClientSettings:
        if not self.bootstrap_servers:
            raise InvalidArgument("the wave reads records (continuity, counts or output_timing) but names no "
                                  "bootstrap_servers.")
        return ClientSettings(**{"bootstrap_servers": self.bootstrap_servers, **self.security})

    @classmethod
    def from_dict(cls, data: object) -> WaveSpec:
        if not isinstance(data, Mapping):
            raise InvalidArgument(f"a wave spec must be a JSON object, not {type(data).__name__}.")
        if data.get("format", WAVE_FORMAT) != WAVE_FORMAT:
            raise InvalidArgument(f"not a wave validation spec (format {data.get('format')!r}, expected "
                                  f"{WAVE_FORMAT!r}).")
        if data.get("version", WAVE_VERSION) != WAVE_VERSION:
            raise InvalidArgument(f"wave spec version {data.get('version')!r}; this job reads version {WAVE_VERSION}.")
        raw = data.get("groups")
        if not isinstance(raw, list) or not raw:
            raise InvalidArgument("a wave spec needs 'groups': a non-empty list of groups with their checks.")
        groups = tuple(GroupSpec.from_dict(g, f"groups[{i}]") for i, g in enumerate(raw))
        twice = sorted(g for g, n in Counter(g.group_id for g in groups).items() if n > 1)
        if twice:
            raise InvalidArgument(f"groups listed twice in the wave: {twice}; give each group once, with all its "
                                  "checks.")
        security = data.get("security") or {}
        if not isinstance(security, Mapping):
            raise InvalidArgument("security must be an object of ClientSettings fields.")
        bootstrap = data.get("bootstrap_servers")
        if bootstrap is not None and (not isinstance(bootstrap, str) or not bootstrap.strip()):
            raise InvalidArgument(f"bootstrap_servers must be host:port text, not {bootstrap!r}.")
        output_dir = data.get("output_dir")
        if output_dir is not None and not isinstance(output_dir, str):
            raise InvalidArgument(f"output_dir must be a path, not {output_dir!r}.")
        spec = cls(groups, title=str(data.get("title") or cls.title), bootstrap_servers=bootstrap,
                   security=dict(security), reader=require_choice(data.get("reader", "connector"), "reader", READERS),
                   output_dir=output_dir or None)
        if spec.needs_records:
            spec.settings()  # refuse a spec that reads records without a cluster to read them from
        return spec

    def to_dict(self) -> dict[str, object]:
        return {"format": WAVE_FORMAT, "version": WAVE_VERSION, "title": self.title,
                "bootstrap_servers": self.bootstrap_servers, "security": dict(self.security), "reader": self.reader,
                "output_dir": self.output_dir, "groups": [g.to_dict() for g in self.groups]}


def _section(value: object, where: str, name: str, allowed: Iterable[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"{where}: {name} must be an object, not {value!r}.")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise InvalidArgument(f"{where}: {name} has unknown keys {unknown} (known: {', '.join(allowed)}).")
    return value


def _snapshot_ref(value: object, what: str) -> SnapshotRef:
    if isinstance(value, OffsetSnapshot):
        return value
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, Mapping):
        return OffsetSnapshot.from_json(json.dumps(value), source=what)
    raise InvalidArgument(f"{what} must be a snapshot path or a snapshot object, not {value!r}.")


def _int(value: object, name: str, *, minimum: float = 0, optional: bool = False) -> int | None:
    number = parse_number(value, name, minimum=minimum, integer=True, optional=optional)
    return None if number is None else int(number)


def _offsets(value: object, where: str) -> OffsetsCheck:
    cfg = _section(value, where, "offsets_preserved", ("before", "after", "allow_advanced"))
    return OffsetsCheck(_snapshot_ref(cfg.get("before"), f"{where}: offsets_preserved.before"),
                        _snapshot_ref(cfg.get("after"), f"{where}: offsets_preserved.after"),
                        parse_flag(cfg.get("allow_advanced", True), f"{where}: allow_advanced"))


def _lag(value: object, where: str) -> LagCheck:
    cfg = _section(value, where, "lag", ("before", "after", "max_total_lag", "max_partition_lag", "margin_fraction",
                                         "margin_records"))
    before = cfg.get("before")
    max_total = _int(cfg.get("max_total_lag", 0), f"{where}: max_total_lag", optional=True)
    if max_total is None and before in (None, ""):
        raise InvalidArgument(f"{where}: lag without max_total_lag is judged against the lag before the change: "
                              "give lag.before (the snapshot before) or a max_total_lag")
    fraction = parse_number(cfg.get("margin_fraction", MARGIN_FRACTION), f"{where}: lag.margin_fraction")
    records = _int(cfg.get("margin_records", MARGIN_RECORDS), f"{where}: lag.margin_records")
    return LagCheck(_snapshot_ref(cfg.get("after"), f"{where}: lag.after"),
                    None if before in (None, "") else _snapshot_ref(before, f"{where}: lag.before"),
                    max_total,
                    _int(cfg.get("max_partition_lag"), f"{where}: max_partition_lag", optional=True),
                    LagMargin(float(fraction or 0.0), int(records or 0)))


def parse_ranges(cfg: Mapping[str, Any]) -> Ranges:  # Any: JSON of several shapes (XCom, reports)
    """``ranges`` ({"topic:partition": [start, end]}) or ``between`` (two topic-offsets captures: from the
    first capture's log end to the second's, i.e. exactly what was written in between)."""
    out = {}
    if "ranges" in cfg:
        for key, (start, end) in cfg["ranges"].items():
            out[_tp(key)] = (int(start), int(end))
    elif "between" in cfg:
        first, second = cfg["between"]
        for key, later in second.items():
            start = first.get(key, {}).get("log_end", later.get("log_start", 0))
            out[_tp(key)] = (int(start), int(later["log_end"]))
    else:
        raise ValueError("a continuity, counts or output_timing check needs 'ranges' or 'between'")
    return out


def _tp(key: str) -> TopicPartition:
    topic, _, partition = key.rpartition(":")
    return TopicPartition(topic, int(partition))


def _ranges(cfg: Mapping[str, Any], where: str) -> Ranges:
    try:
        ranges = parse_ranges(dict(cfg))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InvalidArgument(f"{where}: bad ranges ({exc}); give 'ranges' {{'topic:partition': [start, end]}} "
                              "or 'between' [capture, capture].") from exc
    for tp, (start, end) in ranges.items():
        if start < 0 or end < start:
            raise InvalidArgument(f"{where}: the range of {tp} is [{start}, {end}); it needs 0 <= start <= end.")
    return ranges


def _continuity(value: object, where: str) -> ContinuityCheck:
    cfg = _section(value, f"{where}", CONTINUITY, ("ranges", "between", "id_source", "id_type", "expected_min",
                                                   "expected_max", "allowed_duplicates"))
    try:
        id_source = checks.check_id_source(cfg.get("id_source", "key"))
    except ValueError as exc:
        raise InvalidArgument(f"{where}: {exc}") from exc
    return ContinuityCheck(
        _ranges(cfg, f"{where}: continuity"), id_source,
        require_choice(cfg.get("id_type", "long"), f"{where}: id_type", ID_TYPES),
        _int(cfg.get("expected_min"), f"{where}: expected_min", minimum=-math.inf, optional=True),
        _int(cfg.get("expected_max"), f"{where}: expected_max", minimum=-math.inf, optional=True),
        _int(cfg.get("allowed_duplicates", 0), f"{where}: allowed_duplicates") or 0,
    )


def _counts(value: object, where: str) -> CountsCheck:
    cfg = _section(value, where, COUNTS, ("ranges", "between", "explained_by"))
    explained = cfg.get("explained_by")
    try:
        checks.check_explained_by(explained)
    except ValueError as exc:
        raise InvalidArgument(f"{where}: {exc}") from exc
    return CountsCheck(_ranges(cfg, f"{where}: counts"), None if explained is None else str(explained))


def _timing(value: object, where: str) -> TimingCheck:
    cfg = _section(value, where, TIMING, ("ranges", "between", "max_gap_seconds"))
    return TimingCheck(_ranges(cfg, f"{where}: output_timing"),
                       parse_number(cfg.get("max_gap_seconds"), f"{where}: max_gap_seconds", optional=True))


def _ref_out(ref: SnapshotRef) -> Any:
    return ref.to_dict() if isinstance(ref, OffsetSnapshot) else ref


def _ranges_out(ranges: Ranges) -> dict[str, list[int]]:
    return {str(tp): [start, end] for tp, (start, end) in sorted(ranges.items())}


def load_snapshot(ref: SnapshotRef, read_text: Callable[[str], str] | None = None) -> OffsetSnapshot:
    """The snapshot itself, or the one at a path (read with ``read_text``: a local file by default)."""
    if isinstance(ref, OffsetSnapshot):
        return ref
    text = read_text(ref) if read_text else Path(ref).read_text()
    return OffsetSnapshot.from_json(text, source=ref)


def inline_snapshots(spec: WaveSpec, read_text: Callable[[str], str] | None = None) -> WaveSpec:
    """The same spec with every snapshot path replaced by the snapshot (read where the spec is built, e.g.
    from the deployment's artifact storage), so the driver reads nothing but the spec."""
    def inline(group: GroupSpec) -> GroupSpec:
        o, lag = group.offsets_preserved, group.lag
        return GroupSpec(
            group.group_id, group.app,
            offsets_preserved=None if o is None else OffsetsCheck(load_snapshot(o.before, read_text),
                                                                  load_snapshot(o.after, read_text), o.allow_advanced),
            lag=None if lag is None else LagCheck(
                load_snapshot(lag.after, read_text),
                None if lag.before is None else load_snapshot(lag.before, read_text),
                lag.max_total_lag, lag.max_partition_lag, lag.margin),
            continuity=group.continuity, counts=group.counts, output_timing=group.output_timing)

    return WaveSpec(tuple(inline(g) for g in spec.groups), spec.title, spec.bootstrap_servers, dict(spec.security),
                    spec.reader, spec.output_dir)


# -- what to read (pure) -----------------------------------------------------------------------------

def id_sources(spec: WaveSpec) -> list[tuple[str, str]]:
    """The distinct ``(id_source, id_type)`` of the wave's continuity checks; a tag's ``id_key`` indexes it."""
    return list(dict.fromkeys((g.continuity.id_source, g.continuity.id_type) for g in spec.groups if g.continuity))


def read_partitions(spec: WaveSpec) -> list[TopicPartition]:
    """Every partition a record check of the wave reads (a non-empty range), sorted; a tag's ``pk`` indexes it."""
    return sorted({tp for g in spec.groups for check in (g.continuity, g.counts, g.output_timing) if check
                   for tp, (start, end) in check.ranges.items() if end > start})


def range_tags(spec: WaveSpec) -> list[tuple[Any, ...]]:  # Any: pyspark's objects (an optional extra, untyped here)
    """One row per group and partition it reads (:data:`TAG_SCHEMA`): ``(gk, topic, partition, pk, c_start,
    c_end, n_start, n_end, t_start, t_end, id_key)``, ``gk`` the group's index in the wave, ``pk`` the
    partition's in :func:`read_partitions`, one ``[start, end)`` per record check (continuity, counts,
    output_timing; None when the group does not ask for it there). A record at ``topic:partition@offset``
    counts for every check of every row whose range holds it."""
    keys = {source: i for i, source in enumerate(id_sources(spec))}
    index = {tp: i for i, tp in enumerate(read_partitions(spec))}
    tags: list[tuple[Any, ...]] = []
    for gk, g in enumerate(spec.groups):
        id_key = keys[(g.continuity.id_source, g.continuity.id_type)] if g.continuity else None
        per_check = [{tp: r for tp, r in check.ranges.items() if r[1] > r[0]} if check else {}
                     for check in (g.continuity, g.counts, g.output_timing)]
        for tp in sorted(set().union(*per_check)):
            bounds = [b for ranges in per_check for b in ranges.get(tp, (None, None))]
            tags.append((gk, tp.topic, tp.partition, index[tp], *bounds, id_key))
    return tags


def read_ranges(spec: WaveSpec) -> Ranges:
    """Per partition, the smallest range holding every group's range on it: the wave reads each record once."""
    hull: Ranges = {}
    for tag in range_tags(spec):
        tp = TopicPartition(tag[1], tag[2])
        for start, end in zip(tag[4:10:2], tag[5:10:2], strict=True):
            if start is not None:
                lo, hi = hull.get(tp, (start, end))
                hull[tp] = (min(lo, start), max(hi, end))
    return hull


# -- verdicts per group, and the wave's --------------------------------------------------------------

@dataclass(frozen=True)
class GroupVerdicts:
    group_id: str
    verdicts: tuple[Verdict, ...]
    app: str | None = None

    @property
    def passed(self) -> bool:
        return bool(self.verdicts) and all(v.passed for v in self.verdicts)

    @property
    def failed_checks(self) -> list[str]:
        return [v.check for v in self.verdicts if not v.passed]

    def to_dict(self) -> dict[str, object]:
        return {"group_id": self.group_id, "app": self.app, "passed": self.passed,
                "verdicts": [v.to_dict() for v in self.verdicts]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GroupVerdicts:  # Any: JSON read back (XCom, a file, a response)
        return cls(str(data["group_id"]), tuple(Verdict.from_dict(v) for v in data.get("verdicts") or ()),
                   data.get("app"))


def overall_verdict(groups: Sequence[GroupVerdicts]) -> Verdict:
    """The wave passes when it judged at least one group and every group passed every one of its checks."""
    failed = [g for g in groups if not g.passed]
    total = len(groups)
    checks_run = sum(len(g.verdicts) for g in groups)
    checks_failed = sum(len(g.failed_checks) for g in groups)
    passed = total > 0 and not failed
    if not total:
        summary = "no group was judged"
    elif passed:
        summary = f"all {total} group(s) passed ({checks_run} check(s))"
    else:
        names = ", ".join(f"{g.group_id} ({', '.join(g.failed_checks) or 'no check'})" for g in failed[:10])
        more = f" and {len(failed) - 10} more" if len(failed) > 10 else ""
        summary = f"{len(failed)} of {total} group(s) failed: {names}{more}"
    return Verdict("wave", passed, summary,
                   {"groups": total, "passed": total - len(failed), "failed": len(failed), "checks": checks_run,
                    "failed_checks": checks_failed},
                   [{"group_id": g.group_id, "app": g.app, "failed_checks": g.failed_checks}
                    for g in failed][:MAX_LISTED])


# -- the verdicts a caller acts on (strict) -----------------------------------------------------------

PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"


def outcome(  # Any: JSON of several shapes (XCom, reports)
        group_ids: Sequence[str], report: Mapping[str, Any] | None, *, reason: str = "") -> dict[str, Any]:
    """Each group's verdict (``pass``, ``fail`` or ``unknown``) and the wave's, small enough for an XCom.

    Strict on purpose: a caller rolls back on anything but ``pass``, so no report (``report`` None), a group
    the report does not judge, or a report that contradicts itself is ``unknown``, never a pass. The wave is
    ``fail`` when a group failed, else ``unknown`` when a group is unknown, else ``pass``."""
    judged: dict[str, Mapping[str, Any]] = {}
    if report is not None:
        for g in report.get("groups") or []:
            if isinstance(g, Mapping) and isinstance(g.get("group_id"), str):
                judged[g["group_id"]] = g
    groups: dict[str, dict[str, Any]] = {}
    for group_id in group_ids:
        g = judged.get(group_id)
        if g is None or not isinstance(g.get("passed"), bool):
            why = reason or ("no report" if report is None else "the report does not judge this group")
            groups[group_id] = {"verdict": UNKNOWN, "failed_checks": [], "detail": why}
            continue
        verdicts = [v for v in g.get("verdicts") or [] if isinstance(v, Mapping)]
        failed = [str(v.get("check")) for v in verdicts if v.get("passed") is not True]
        ok = g["passed"] and bool(verdicts) and not failed
        groups[group_id] = {"verdict": PASS if ok else FAIL, "failed_checks": failed,
                            "detail": "; ".join(f"{v.get('check')}: {v.get('summary')}" for v in verdicts
                                                if v.get("passed") is not True)[:500]}
        if g.get("app") is not None:
            groups[group_id]["app"] = g["app"]
    states = [g["verdict"] for g in groups.values()]
    overall = FAIL if FAIL in states else UNKNOWN if UNKNOWN in states or not states else PASS
    if overall == PASS and (report is None or report.get("passed") is not True):
        overall = UNKNOWN  # every group passed but the report's own overall says otherwise
    if overall == PASS:
        summary = f"all {len(states)} group(s) passed"
    else:
        bad = [f"{gid} ({g['verdict']})" for gid, g in groups.items() if g["verdict"] != PASS]
        summary = f"{len(bad)} of {len(states)} group(s) not passed: {', '.join(bad[:10])}" + (
            f" and {len(bad) - 10} more" if len(bad) > 10 else "") + (f"; {reason}" if reason else "")
    context = (report or {}).get("context") or {}
    return {"verdict": overall, "passed": overall == PASS, "summary": summary, "groups": groups,
            "files": dict((report or {}).get("files") or {}),
            "application_id": context.get("application_id"), "master": context.get("master")}


def read_report(path: str | Path) -> tuple[dict[str, Any] | None, str]:  # Any: JSON of several shapes (XCom, reports)
    """The wave report at ``path``, or None with the reason it cannot be used (missing, unreadable, not a wave
    report)."""
    try:
        report = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None, f"the job wrote no report at {path}"
    except (OSError, ValueError) as exc:
        return None, f"the report {path} is unreadable: {exc}"
    if not isinstance(report, dict) or not isinstance(report.get("groups"), list) or "overall" not in report:
        return None, f"{path} is not a wave validation report"
    return report, ""


# -- the Spark part ----------------------------------------------------------------------------------

def run_wave(spark, spec: WaveSpec, read_text: Callable[[str], str] | None = None) -> list[GroupVerdicts]:
    """Every group's verdicts (in the wave's order; per group in the order offsets_preserved, lag,
    record_continuity, partition_counts, output_timing). The single-group job is a wave of one.

    The snapshot checks need no Spark (a few rows per group, judged in the driver); every record check of
    every group comes from one Spark job over the wave's records (:func:`record_figures`)."""
    figures = record_figures(spark, spec) if spec.needs_records else {}
    out = []
    for gk, g in enumerate(spec.groups):
        verdicts: list[Verdict] = []
        if g.offsets_preserved:
            o = g.offsets_preserved
            verdicts.append(checks.offsets_verdict(checks.offsets_rows(load_snapshot(o.before, read_text),
                                                                       load_snapshot(o.after, read_text)),
                                                   allow_advanced=o.allow_advanced))
        if g.lag:
            lag = g.lag
            if lag.max_total_lag is None and lag.before is not None:  # against the lag before (parse: before given)
                verdict = checks.lag_verdict_against_before(
                    checks.lag_rows(load_snapshot(lag.after, read_text)),
                    checks.lag_rows(load_snapshot(lag.before, read_text)), margin=lag.margin,
                    max_partition_lag=lag.max_partition_lag)
            else:
                verdict = checks.lag_verdict(checks.lag_rows(load_snapshot(lag.after, read_text)),
                                             max_total_lag=lag.max_total_lag or 0,
                                             max_partition_lag=lag.max_partition_lag)
            if lag.before is not None and lag.max_total_lag is not None:
                verdict = checks.with_lag_before(verdict, checks.lag_verdict(
                    checks.lag_rows(load_snapshot(lag.before, read_text)), max_total_lag=sys.maxsize, label="before"))
            verdicts.append(verdict)
        found = figures.get(gk) or RecordFigures()
        if g.continuity:
            verdicts.append(found.continuity_verdict(g.continuity))
        if g.counts:
            verdicts.append(checks.counts_verdict(found.counted, g.counts.ranges, explained_by=g.counts.explained_by))
        if g.output_timing:
            verdicts.append(found.timing_verdict(g.output_timing.max_gap_seconds))
        out.append(GroupVerdicts(g.group_id, tuple(verdicts), g.app))
    return out


@dataclass
class RecordFigures:
    """What the pass over the wave's records found for one group: the inputs of its record verdicts."""

    #: partition_counts: records per (topic, partition) inside the group's counts range
    counted: dict[tuple[str, int], int] = field(default_factory=dict)
    #: record_continuity: records with an id, without one, the ids' bounds, extra copies over how many ids,
    #: distinct ids inside the expected bounds, the first duplicated ids and the first gaps (first, last)
    ids: int = 0
    unparsable: int = 0
    lo: int | None = None
    hi: int | None = None
    duplicates: int = 0
    duplicated_ids: int = 0
    inside: int = 0
    listed_duplicates: list[int] = field(default_factory=list)
    gaps: list[tuple[int, int]] = field(default_factory=list)
    #: output_timing: records, per (topic, partition) the longest gap and where it starts (ms), the records'
    #: first and last timestamps (ms), records per timestamp type and per rate bucket (of ``width_ms``)
    timed: int = 0
    longest: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    first_ms: int | None = None
    last_ms: int | None = None
    timestamp_types: Counter[str] = field(default_factory=Counter)
    buckets: dict[int, int] = field(default_factory=dict)
    width_ms: int = 1000

    def add(  # Any: pyspark's objects (an optional extra, untyped here)
            self, r: Any, partitions: Sequence[TopicPartition]) -> None:
        """Add one row of :func:`record_figures`' result (a group's partition, its ids, a listed id or gap,
        or a rate bucket)."""
        if r.role == 1:  # an output-rate bucket
            self.buckets[int(r.bucket)] = int(r.nt)
            self.width_ms = int(r.width)
        elif r.g_kind == 0:  # a partition's counted and timed records
            tp = partitions[r.g_pk]
            at = (tp.topic, tp.partition)
            self.counted[at] = self.counted.get(at, 0) + int(r.n or 0)
            if r.nt:
                self.timed += int(r.nt)
                for kind, count in ((0, r.t0), (1, r.t1), (-1, r.nt - r.t0 - r.t1)):
                    if count:
                        self.timestamp_types[checks.TIMESTAMP_TYPES.get(kind, str(kind))] += int(count)
                self.first_ms = r.first if self.first_ms is None else min(self.first_ms, r.first)
                self.last_ms = r.last if self.last_ms is None else max(self.last_ms, r.last)
            if r.max_gap is not None and r.gap_at is not None:
                self.longest[at] = (int(r.max_gap), int(r.gap_at))
        else:  # a group's ids (one row, and one per listed duplicated id or gap)
            self.ids += int(r.ids or 0)
            self.unparsable += int(r.unparsable or 0)
            self.duplicates += int(r.duplicates or 0)
            self.duplicated_ids += int(r.duplicated_ids or 0)
            self.inside += int(r.inside or 0)
            if r.lo is not None:
                self.lo = r.lo if self.lo is None else min(self.lo, r.lo)
                self.hi = r.hi if self.hi is None else max(self.hi, r.hi)
            if r.listed_dup:
                self.listed_duplicates.append(int(r.item))
            if r.listed_gap:
                self.gaps.append((int(r.gap_prev) + 1, int(r.item) - 1))

    def continuity_verdict(self, check: ContinuityCheck) -> Verdict:
        lo = check.expected_min if check.expected_min is not None else self.lo
        hi = check.expected_max if check.expected_max is not None else self.hi
        missing = 0 if lo is None or hi is None else max(0, hi - lo + 1 - self.inside)
        return checks.continuity_verdict(
            records=self.ids, unparsable=self.unparsable, duplicates=self.duplicates,
            duplicated_ids=self.duplicated_ids, listed_duplicates=sorted(self.listed_duplicates)[:MAX_LISTED],
            lo=lo, hi=hi, missing_ids=missing,
            listed_missing=checks.missing_from_gaps(sorted(self.gaps)) if missing else [],
            allowed_duplicates=check.allowed_duplicates)

    def timing_verdict(self, max_gap_seconds: float | None) -> Verdict:
        partitions = [{"partition": f"{topic}:{partition}", "seconds": gap / 1000, "started_at": start / 1000,
                       "ended_at": (start + gap) / 1000}
                      for (topic, partition), (gap, start) in sorted(self.longest.items())]
        rate: list[tuple[float, float]] = []
        if self.timed and self.first_ms is not None:
            # every bucket from the first record to the last, 0 where none was written (the gap is in the line)
            rate = [((self.first_ms + b * self.width_ms) / 1000, self.buckets.get(b, 0) / (self.width_ms / 1000))
                    for b in range(max(self.buckets, default=-1) + 1)]
        return checks.timing_verdict(partitions, rate, records=self.timed, timestamp_types=dict(self.timestamp_types),
                                     max_gap_seconds=max_gap_seconds)


#: the rows the pass aggregates (see :func:`record_figures`); ``tN`` counts timed records of timestamp type N
_ROW_SCHEMA = "gk int, kind int, pk int, v long, n long, nt long, t0 long, t1 long, nc long"


def record_figures(spark, spec: WaveSpec) -> dict[int, RecordFigures]:
    """Every record check of every group of the wave in one Spark job: each partition's range is read once
    (one task per Kafka partition), and one collect brings back a few rows per group and partition.

    How: each record is tagged with the groups whose ranges hold it (a broadcast join on topic and
    partition) and becomes at most two rows, grouped by built-in aggregations (no Python per record):

    * kind 0, per ``(group, partition, timestamp)``: records in the counts range (``n``) and in the
      output-timing range (``nt``, keyed by their timestamp, counted per timestamp type; a counts-only
      record has no timestamp key);
    * kind 1, per ``(group, id)``: records of the continuity range with that id (``nc``; the null id
      counts the records without one), plus a sentinel row without records (``nc`` 0) at
      ``expected_min - 1`` and one at ``expected_max + 1`` when the group gives them.

    Those rows are shuffled once, by group, and sorted by ``(group, kind, partition, value)``; window
    functions over that one order find the gaps between consecutive timestamps of a partition and between
    consecutive ids of a group, and rank the duplicated ids and the id gaps; a final aggregation gives per
    group and partition the counts, the longest gap and where it starts, per group the id figures (the
    first MAX_LISTED duplicated ids and gaps as rows of their own) and the output rate per bucket.
    """
    from pyspark.sql import Window  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)
    from pyspark.sql.functions import (  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)
        array,
        broadcast,
        coalesce,
        col,
        count,
        explode,
        floor,
        lag,
        lit,
        struct,
        unix_millis,
        when,
    )
    from pyspark.sql.functions import max as max_of  # noqa: PLC0415 - three names of builtins, hence the aliases
    from pyspark.sql.functions import min as min_of  # noqa: PLC0415
    from pyspark.sql.functions import sum as sum_of  # noqa: PLC0415

    # optional dependency: the reader module defines a pyspark data source at import (the [spark] extra)
    from airflow_provider_kip848.spark.reader import read_kafka  # noqa: PLC0415

    partitions = read_partitions(spec)
    records = read_kafka(spark, spec.settings(), read_ranges(spec), backend=spec.reader, headers=False)
    tags = broadcast(spark.createDataFrame(range_tags(spec), TAG_SCHEMA))
    tagged = records.join(tags, (records["topic"] == tags["t_topic"]) & (records["partition"] == tags["t_partition"]))

    def within(check: str) -> Any:
        return coalesce((col("offset") >= col(f"{check}_start")) & (col("offset") < col(f"{check}_end")), lit(False))

    ident = lit(None).cast("long")
    for key, (source, id_type) in enumerate(id_sources(spec)):
        ident = when(col("id_key") == key, checks.id_column(source, id_type).cast("long")).otherwise(ident)
    c, n, t = within("c"), within("n"), within("t")
    zero, one = lit(0).cast("long"), lit(1).cast("long")
    as_counts = when(n | t, struct(
        lit(0).alias("kind"), col("pk"), when(t, unix_millis(col("timestamp"))).alias("v"),
        n.cast("long").alias("n"), t.cast("long").alias("nt"),
        (t & (col("timestampType") == 0)).cast("long").alias("t0"),
        (t & (col("timestampType") == 1)).cast("long").alias("t1"), zero.alias("nc")))
    as_id = when(c, struct(lit(1).alias("kind"), lit(None).cast("int").alias("pk"), ident.alias("v"),
                           zero.alias("n"), zero.alias("nt"), zero.alias("t0"), zero.alias("t1"), one.alias("nc")))
    rows = (tagged.select("gk", explode(array(as_counts, as_id)).alias("r")).where(col("r").isNotNull())
            .select("gk", "r.*"))

    groups = len(spec.groups)
    bounds = {gk: (g.continuity.expected_min, g.continuity.expected_max)
              for gk, g in enumerate(spec.groups) if g.continuity}
    sentinels = [(gk, 1, None, v, 0, 0, 0, 0, 0) for gk, (lo, hi) in bounds.items()
                 for v in (None if lo is None else lo - 1, None if hi is None else hi + 1) if v is not None]
    if sentinels:
        rows = rows.unionByName(spark.createDataFrame(sentinels, _ROW_SCHEMA))

    def per_group(values: Sequence[int | None]) -> Any:  # a group's constant, by its index (no join)
        if all(v is None for v in values):
            return lit(None).cast("long")
        return array(*[lit(v).cast("long") for v in values])[col("gk")]

    lo_b = per_group([bounds.get(gk, (None, None))[0] for gk in range(groups)])
    hi_b = per_group([bounds.get(gk, (None, None))[1] for gk in range(groups)])

    # one shuffle: every row of a group in one task; aggregated there by key (records with the same id or
    # timestamp become one row), then one sort serves every window below
    keyed = rows.repartition("gk").groupBy("gk", "kind", "pk", "v").agg(
        *[sum_of(k).alias(k) for k in ("n", "nt", "t0", "t1", "nc")])
    v, prev = col("v"), col("prev")
    ordered = Window.partitionBy("gk", "kind", "pk").orderBy("v")
    running = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    whole_partition = ordered.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    whole_group = Window.partitionBy("gk", "kind").orderBy("pk", "v").rowsBetween(
        Window.unboundedPreceding, Window.unboundedFollowing)
    timing = (col("kind") == 0) & v.isNotNull()
    ids = (col("kind") == 1) & (col("nc") > 0)  # not a sentinel's row
    dup = ids & v.isNotNull() & (col("nc") > 1)
    gap = ((col("kind") == 1) & prev.isNotNull() & (v - prev > 1) & (lo_b.isNull() | (prev >= lo_b - 1))
           & (hi_b.isNull() | (v <= hi_b + 1)))
    stepped = keyed.select("*", lag("v").over(ordered).alias("prev"),
                           min_of(when(timing, v)).over(whole_group).alias("first"),
                           max_of(when(timing, v)).over(whole_group).alias("last"))
    # a partition's gaps between consecutive timestamps; two records of one millisecond: a gap of 0
    walked = stepped.select(
        "*", sum_of(dup.cast("int")).over(running).alias("dup_rank"),
        sum_of(gap.cast("int")).over(running).alias("gap_rank"),
        when(timing & prev.isNotNull(), v - prev).when(timing & (col("nt") > 1), 0).alias("cand_gap"),
        when(timing & prev.isNotNull(), prev).when(timing & (col("nt") > 1), v).alias("cand_at"))
    walked = walked.select("*", max_of("cand_gap").over(whole_partition).alias("max_gap"))
    width = lit(1000) * (floor((col("last") - col("first")) / 1000 / checks.MAX_RATE_BUCKETS) + 1)
    listed_dup = dup & (col("dup_rank") <= MAX_LISTED)
    listed_gap = gap & (col("gap_rank") <= MAX_LISTED)
    # each row once as itself (role 0); a timed record's row once more for its rate bucket (role 1)
    roles = walked.select("*", explode(when(timing, array(lit(0), lit(1))).otherwise(array(lit(0))))
                          .alias("role"))
    mine = col("role") == 0
    figures = roles.groupBy(
        "gk", "role", when(mine, col("kind")).alias("g_kind"), when(mine, col("pk")).alias("g_pk"),
        when(mine & (listed_dup | listed_gap), v).alias("item"),
        when(~mine, floor((v - col("first")) / width)).alias("bucket"),
    ).agg(
        sum_of("n").alias("n"), sum_of("nt").alias("nt"), sum_of("t0").alias("t0"), sum_of("t1").alias("t1"),
        min_of(when(timing, v)).alias("first"), max_of(when(timing, v)).alias("last"),
        max_of("cand_gap").alias("max_gap"),
        min_of(when(col("cand_gap") == col("max_gap"), col("cand_at"))).alias("gap_at"),
        sum_of(when(ids & v.isNotNull(), col("nc"))).alias("ids"),
        sum_of(when(ids & v.isNull(), col("nc"))).alias("unparsable"),
        min_of(when(ids, v)).alias("lo"), max_of(when(ids, v)).alias("hi"),
        sum_of(when(dup, col("nc") - 1)).alias("duplicates"), count(when(dup, 1)).alias("duplicated_ids"),
        count(when(ids & v.isNotNull() & (lo_b.isNull() | (v >= lo_b)) & (hi_b.isNull() | (v <= hi_b)), 1))
        .alias("inside"),
        max_of(listed_dup.cast("int")).alias("listed_dup"), max_of(listed_gap.cast("int")).alias("listed_gap"),
        max_of(when(listed_gap, prev)).alias("gap_prev"), max_of(width).alias("width"))
    found: dict[int, RecordFigures] = {}
    for r in figures.collect():
        found.setdefault(r.gk, RecordFigures()).add(r, partitions)
    return found


def run(spec: WaveSpec | Mapping[str, Any], spark=None, *, read_text: Callable[[str], str] | None = None
        ) -> dict[str, Any]:  # Any: pyspark's objects (an optional extra, untyped here)
    """Judge the wave, write the report (when ``output_dir`` is set) and return it."""
    wave = spec if isinstance(spec, WaveSpec) else WaveSpec.from_dict(spec)
    if spark is None:
        with job_session("kip848-wave-validation",
                         kafka_connector=wave.needs_records and wave.reader == "connector") as own:
            return run(wave, own, read_text=read_text)
    groups = run_wave(spark, wave, read_text)
    context = {"reader": wave.reader, "groups": len(groups), "master": spark.sparkContext.master,
               "application_id": spark.sparkContext.applicationId, **spark_versions(spark)}
    report = wave_report_dict(wave.title, overall_verdict(groups), [g.to_dict() for g in groups], context)
    if wave.output_dir:
        report["files"] = write_report(wave.output_dir, report)
    return report


def summary_line(report: Mapping[str, Any]) -> str:  # Any: JSON of several shapes (XCom, reports)
    """The one line the job prints for its caller: the overall verdict and each group's."""
    return json.dumps({"passed": report["passed"], "files": report.get("files", {}),
                       "overall": report["overall"]["summary"],
                       "groups": {g["group_id"]: g["passed"] for g in report["groups"]}})


def _spec_text(path: str) -> str:
    """The spec at ``path``, else the file of that name shipped with ``--files`` (a driver on a cluster node)."""
    if Path(path).is_file():
        return Path(path).read_text()
    from pyspark import SparkFiles  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    return Path(SparkFiles.get(Path(path).name)).read_text()


def ship_driver_jars(spark) -> list[str]:
    """Cluster mode on a standalone master: hand the executors the jars the driver got from
    ``spark.jars.packages`` (the Kafka connector); returns the jars added.

    Spark's ``DriverWrapper`` resolves ``spark.jars.packages`` onto the driver's class path only (its class
    loader), not into ``spark.jars``: without this the executors' tasks fail with ClassNotFoundException on
    the connector's classes. Elsewhere (client mode, local) spark-submit already ships them: nothing to do."""
    conf = spark.sparkContext.getConf()
    if conf.get("spark.submit.deployMode", "client") != "cluster" or not conf.get("spark.jars.packages", ""):
        return []
    loader = spark._jvm.java.lang.Thread.currentThread().getContextClassLoader()
    try:
        urls = [str(u.toString()) for u in loader.getURLs()]
    except Exception:  # noqa: BLE001 - not a URL class loader: nothing was resolved onto it
        return []
    shipped = {Path(j).name for j in conf.get("spark.jars", "").split(",") if j}
    added = [u for u in urls if u.endswith(".jar") and Path(u).name not in shipped]
    for url in added:
        spark.sparkContext._jsc.addJar(url)
    return added


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Validate a wave of groups in one Spark application "
                                                 "(see the module docstring).")
    parser.add_argument("--spec", required=True, help="path to the JSON wave spec (or the name of a --files file)")
    parser.add_argument("--fail-on-failed-checks", action="store_true",
                        help="exit 3 when a group failed (default: 0 once the wave is judged)")
    args = parser.parse_args(argv)
    from pyspark.sql import SparkSession  # noqa: PLC0415 - optional dependency pyspark (the [spark] extra)

    spark = SparkSession.builder.getOrCreate()  # spark-submit configured the session
    ship_driver_jars(spark)
    try:
        report = run(json.loads(_spec_text(args.spec)), spark)
    except Kip848Error as exc:  # a bad spec or snapshot: said in one line, no stack trace
        print(f"kip848 wave validation: {exc}", file=sys.stderr)
        return 1
    print(summary_line(report))
    return 3 if args.fail_on_failed_checks and not report["passed"] else 0


if __name__ == "__main__":
    sys.exit(main())
