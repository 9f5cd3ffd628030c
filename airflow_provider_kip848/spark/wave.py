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
         "lag": {"after": <snapshot>, "before": <snapshot> | null, "max_total_lag": 0, "max_partition_lag": null},
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
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.spark import checks
from airflow_provider_kip848.spark.checks import GROUP_OFFSET_SCHEMA, MAX_LISTED, Verdict
from airflow_provider_kip848.spark.job import parse_ranges
from airflow_provider_kip848.spark.report import wave_report_dict, write_report
from airflow_provider_kip848.spark.session import job_session, spark_versions

WAVE_FORMAT = "kip848-wave-validation"
WAVE_VERSION = 1
CHECKS = ("offsets_preserved", "lag", "continuity", "counts")
READERS = ("connector", "python")
ID_TYPES = ("long", "bigint", "int", "integer", "short", "smallint")
CONTINUITY, COUNTS = "continuity", "counts"
TAG_SCHEMA = "group_id string, kind string, t_topic string, t_partition int, t_start long, t_end long, id_key int"
LAG_SCHEMA = "label string, " + GROUP_OFFSET_SCHEMA

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
    max_total_lag: int = 0
    max_partition_lag: int | None = None


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
class GroupSpec:
    """One group of the wave and its checks (at least one)."""

    group_id: str
    app: str | None = None
    offsets_preserved: OffsetsCheck | None = None
    lag: LagCheck | None = None
    continuity: ContinuityCheck | None = None
    counts: CountsCheck | None = None

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
        )
        if not spec.checks:
            raise InvalidArgument(f"{where} asks for no check; give at least one of {', '.join(CHECKS)}.")
        return spec

    def to_dict(self) -> dict[str, Any]:
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
                          "max_total_lag": lag.max_total_lag, "max_partition_lag": lag.max_partition_lag}
        if self.continuity:
            c = self.continuity
            out[CONTINUITY] = {"ranges": _ranges_out(c.ranges), "id_source": c.id_source, "id_type": c.id_type,
                               "expected_min": c.expected_min, "expected_max": c.expected_max,
                               "allowed_duplicates": c.allowed_duplicates}
        if self.counts:
            out[COUNTS] = {"ranges": _ranges_out(self.counts.ranges), "explained_by": self.counts.explained_by}
        return out


@dataclass(frozen=True)
class WaveSpec:
    groups: tuple[GroupSpec, ...]
    title: str = "Kafka migration validation"
    bootstrap_servers: str | None = None
    security: dict[str, Any] = field(default_factory=dict)
    reader: str = "connector"
    output_dir: str | None = None

    @property
    def needs_records(self) -> bool:
        return any(g.continuity or g.counts for g in self.groups)

    def settings(self) -> ClientSettings:
        if not self.bootstrap_servers:
            raise InvalidArgument("the wave reads records (continuity or counts) but names no bootstrap_servers.")
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

    def to_dict(self) -> dict[str, Any]:
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
    cfg = _section(value, where, "lag", ("before", "after", "max_total_lag", "max_partition_lag"))
    before = cfg.get("before")
    return LagCheck(_snapshot_ref(cfg.get("after"), f"{where}: lag.after"),
                    None if before in (None, "") else _snapshot_ref(before, f"{where}: lag.before"),
                    _int(cfg.get("max_total_lag", 0), f"{where}: max_total_lag") or 0,
                    _int(cfg.get("max_partition_lag"), f"{where}: max_partition_lag", optional=True))


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
                lag.max_total_lag, lag.max_partition_lag),
            continuity=group.continuity, counts=group.counts)

    return WaveSpec(tuple(inline(g) for g in spec.groups), spec.title, spec.bootstrap_servers, dict(spec.security),
                    spec.reader, spec.output_dir)


# -- what to read (pure) -----------------------------------------------------------------------------

def id_sources(spec: WaveSpec) -> list[tuple[str, str]]:
    """The distinct ``(id_source, id_type)`` of the wave's continuity checks; a tag's ``id_key`` indexes it."""
    return list(dict.fromkeys((g.continuity.id_source, g.continuity.id_type) for g in spec.groups if g.continuity))


def range_tags(spec: WaveSpec) -> list[tuple[str, str, str, int, int, int, int | None]]:
    """One row per group, check and non-empty partition range: ``(group_id, kind, topic, partition, start,
    end, id_key)``; a record at ``topic:partition@offset`` counts for every row whose range holds it."""
    keys = {source: i for i, source in enumerate(id_sources(spec))}
    tags: list[tuple[str, str, str, int, int, int, int | None]] = []
    for g in spec.groups:
        for kind, check in ((CONTINUITY, g.continuity), (COUNTS, g.counts)):
            if check is None:
                continue
            key = keys[(g.continuity.id_source, g.continuity.id_type)] if kind == CONTINUITY and g.continuity else None
            tags += [(g.group_id, kind, tp.topic, tp.partition, start, end, key)
                     for tp, (start, end) in sorted(check.ranges.items()) if end > start]
    return tags


def read_ranges(spec: WaveSpec) -> Ranges:
    """Per partition, the smallest range holding every group's range on it: the wave reads each record once."""
    hull: Ranges = {}
    for _, _, topic, partition, start, end, _ in range_tags(spec):
        tp = TopicPartition(topic, partition)
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

    def to_dict(self) -> dict[str, Any]:
        return {"group_id": self.group_id, "app": self.app, "passed": self.passed,
                "verdicts": [v.to_dict() for v in self.verdicts]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GroupVerdicts:
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


def outcome(group_ids: Sequence[str], report: Mapping[str, Any] | None, *, reason: str = "") -> dict[str, Any]:
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


def read_report(path: str | Path) -> tuple[dict[str, Any] | None, str]:
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
    record_continuity, partition_counts, as the single-group job)."""
    found: dict[str, list[Verdict]] = {g.group_id: [] for g in spec.groups}
    for group_id, verdict in _offsets_verdicts(spark, spec, read_text):
        found[group_id].append(verdict)
    for group_id, verdict in _lag_verdicts(spark, spec, read_text):
        found[group_id].append(verdict)
    for group_id, verdict in _record_verdicts(spark, spec):
        found[group_id].append(verdict)
    return [GroupVerdicts(g.group_id, tuple(found[g.group_id]), g.app) for g in spec.groups]


def _offset_rows(group_id: str, snapshot: OffsetSnapshot, *label: str) -> list[tuple[Any, ...]]:
    return [(*label, group_id, p.topic, p.partition, p.committed, p.log_start, p.log_end) for p in snapshot.partitions]


def _by_group(rows: Iterable[Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        d = r.asDict()
        out.setdefault(d["group_id"], []).append(d)
    return out


def _offsets_verdicts(spark, spec: WaveSpec, read_text) -> list[tuple[str, Verdict]]:
    groups = [(g.group_id, g.offsets_preserved) for g in spec.groups if g.offsets_preserved]
    if not groups:
        return []
    before, after = [], []
    for group_id, o in groups:
        before += _offset_rows(group_id, load_snapshot(o.before, read_text))
        after += _offset_rows(group_id, load_snapshot(o.after, read_text))
    joined = checks.offsets_joined(spark.createDataFrame(before, GROUP_OFFSET_SCHEMA),
                                   spark.createDataFrame(after, GROUP_OFFSET_SCHEMA), keys=["group_id"])
    rows = _by_group(joined.orderBy("group_id", "topic", "partition").collect())
    return [(group_id, checks.offsets_verdict(rows.get(group_id, []), allow_advanced=o.allow_advanced))
            for group_id, o in groups]


def _lag_verdicts(spark, spec: WaveSpec, read_text) -> list[tuple[str, Verdict]]:
    groups = [(g.group_id, g.lag) for g in spec.groups if g.lag]
    if not groups:
        return []
    rows: list[tuple[Any, ...]] = []
    for group_id, lag in groups:
        rows += _offset_rows(group_id, load_snapshot(lag.after, read_text), "after")
        if lag.before is not None:
            rows += _offset_rows(group_id, load_snapshot(lag.before, read_text), "before")
    collected = checks.lag_frame(spark.createDataFrame(rows, LAG_SCHEMA)).orderBy(
        "group_id", "label", "topic", "partition").collect()
    after_rows = _by_group(r for r in collected if r.label == "after")
    before_rows = _by_group(r for r in collected if r.label == "before")
    out = []
    for group_id, lag in groups:
        verdict = checks.lag_verdict(after_rows.get(group_id, []), max_total_lag=lag.max_total_lag,
                                     max_partition_lag=lag.max_partition_lag)
        if lag.before is not None:
            verdict = checks.with_lag_before(verdict, checks.lag_verdict(
                before_rows.get(group_id, []), max_total_lag=sys.maxsize, label="before"))
        out.append((group_id, verdict))
    return out


def tagged_records(spark, spec: WaveSpec):
    """``group_id, kind, topic, partition, offset, id``: every record of the wave's ranges, once per group and
    check whose range holds it (``id`` from the group's id source for continuity, null for counts)."""
    from pyspark.sql import functions as F  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    # optional dependency: the reader module defines a pyspark data source at import (the [spark] extra)
    from airflow_provider_kip848.spark.reader import read_kafka  # noqa: PLC0415

    records = read_kafka(spark, spec.settings(), read_ranges(spec), backend=spec.reader)
    tags = F.broadcast(spark.createDataFrame(range_tags(spec), TAG_SCHEMA))
    joined = records.join(tags, (records["topic"] == tags["t_topic"]) & (records["partition"] == tags["t_partition"])
                          & (records["offset"] >= tags["t_start"]) & (records["offset"] < tags["t_end"]))
    ident = F.lit(None).cast("long")
    for key, (source, id_type) in enumerate(id_sources(spec)):
        ident = F.when(F.col("id_key") == key, checks.id_column(source, id_type).cast("long")).otherwise(ident)
    return joined.select("group_id", "kind", "topic", "partition", "offset", ident.alias("id"))


def _record_verdicts(spark, spec: WaveSpec) -> list[tuple[str, Verdict]]:
    from pyspark.sql import functions as F  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    if not spec.needs_records:
        return []
    tagged = tagged_records(spark, spec).cache()
    try:
        continuity = {g.group_id: g.continuity for g in spec.groups if g.continuity}
        judged: dict[str, Verdict] = {}
        if continuity:
            judged = checks.record_continuity_by_group(
                tagged.where(F.col("kind") == CONTINUITY).select("group_id", "id"),
                {g: (c.expected_min, c.expected_max) for g, c in continuity.items()},
                {g: c.allowed_duplicates for g, c in continuity.items()})
        counted: dict[str, dict[tuple[str, int], int]] = {}
        if any(g.counts for g in spec.groups):
            for r in (tagged.where(F.col("kind") == COUNTS).groupBy("group_id", "topic", "partition")
                      .agg(F.count("*").alias("n")).collect()):
                counted.setdefault(r.group_id, {})[(r.topic, r.partition)] = r.n
        out = []
        for g in spec.groups:
            if g.continuity:
                out.append((g.group_id, judged[g.group_id]))
            if g.counts:
                out.append((g.group_id, checks.counts_verdict(counted.get(g.group_id, {}), g.counts.ranges,
                                                              explained_by=g.counts.explained_by)))
        return out
    finally:
        tagged.unpersist()


def run(spec: WaveSpec | Mapping[str, Any], spark=None, *, read_text: Callable[[str], str] | None = None
        ) -> dict[str, Any]:
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


def summary_line(report: Mapping[str, Any]) -> str:
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
