"""Validation checks as pure DataFrame functions: data in, a :class:`Verdict` out.

* :func:`offsets_preserved`: committed offsets after vs before (equal, or only
  advanced when consumers ran), per partition.
* :func:`lag_within`: lag per partition and in total against a threshold.
* :func:`record_continuity`: ids read from an output topic between two
  snapshots: duplicates (beyond what the application's guarantee allows) and
  gaps (ids missing from the expected range).
* :func:`partition_counts`: records per partition between two offsets vs
  ``end - start``; fewer records are explained only by compaction or
  transaction markers, if the caller says the topic has them.

Each check is a Spark part (the frames, one ``collect`` of small rows) and a
pure verdict builder (``*_verdict``: rows or counts in, :class:`Verdict` out,
no Spark). The wave job (:mod:`airflow_provider_kip848.spark.wave`) computes
the same rows for many groups at once (a ``group_id`` column, one pass) and
hands each group's rows to the same builders, so a group's verdict means the
same in a wave as alone.

Offsets are tiny; they are DataFrames anyway so that every check composes
the same way and runs unchanged on a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

OFFSET_SCHEMA = "topic string, partition int, committed long, log_start long, log_end long"
GROUP_OFFSET_SCHEMA = "group_id string, " + OFFSET_SCHEMA
MAX_LISTED = 50
OFFSET_STATUSES = ("equal", "advanced", "regressed", "missing", "new")
EXPLANATIONS = (None, "compaction", "transactions")


@dataclass(frozen=True)
class Verdict:
    check: str
    passed: bool
    summary: str
    counts: dict[str, int] = field(default_factory=dict)
    offending: list[Any] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(str(data["check"]), bool(data["passed"]), str(data["summary"]), dict(data.get("counts") or {}),
                   list(data.get("offending") or []), dict(data.get("data") or {}))


# -- committed offsets -----------------------------------------------------------------------------

def offsets_frame(spark, offsets, group_id: str | None = None) -> Any:
    """A DataFrame of a ``GroupOffsets`` or ``OffsetSnapshot``'s partitions (OFFSET_SCHEMA); with
    ``group_id``, a first column ``group_id`` (GROUP_OFFSET_SCHEMA)."""
    rows = [(p.topic, p.partition, p.committed, p.log_start, p.log_end) for p in offsets.partitions]
    if group_id is None:
        return spark.createDataFrame(rows, OFFSET_SCHEMA)
    return spark.createDataFrame([(group_id, *r) for r in rows], GROUP_OFFSET_SCHEMA)


def offsets_joined(before, after, keys: Sequence[str] = ()) -> Any:
    """before and after joined on ``(*keys, topic, partition)`` with a ``status`` column (OFFSET_STATUSES)."""
    from pyspark.sql import functions as F  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    on = [*keys, "topic", "partition"]
    return (
        before.select(*on, F.col("committed").alias("before"))
        .join(after.select(*on, F.col("committed").alias("after")), on, "full")
        .withColumn(
            "status",
            F.when(F.col("before").isNull() & F.col("after").isNotNull(), "new")
            .when(F.col("before").isNull(), "none")
            .when(F.col("after").isNull(), "missing")
            .when(F.col("after") == F.col("before"), "equal")
            .when(F.col("after") > F.col("before"), "advanced")
            .otherwise("regressed"),
        )
    )


def offsets_preserved(before, after, *, allow_advanced: bool = True) -> Verdict:
    """Per partition: equal / advanced / regressed / missing (committed before, not after) / new."""
    rows = offsets_joined(before, after).orderBy("topic", "partition").collect()
    return offsets_verdict([r.asDict() for r in rows], allow_advanced=allow_advanced)


def offsets_verdict(rows: Iterable[Mapping[str, Any]], *, allow_advanced: bool = True) -> Verdict:
    """The verdict on joined rows (``topic, partition, before, after, status``, sorted by topic and partition)."""
    rows = list(rows)
    counts = {s: sum(r["status"] == s for r in rows) for s in OFFSET_STATUSES}
    bad = {"regressed", "missing"} | (set() if allow_advanced else {"advanced"})
    offending = [{k: r[k] for k in ("topic", "partition", "before", "after", "status")}
                 for r in rows if r["status"] in bad][:MAX_LISTED]
    passed = not any(counts[s] for s in bad)
    summary = ("committed offsets preserved" if passed else f"{len(offending)} partition(s) lost or moved progress") + \
        f" ({', '.join(f'{k} {v}' for k, v in counts.items() if v)})"
    return Verdict("offsets_preserved", passed, summary, counts, offending)


# -- lag ---------------------------------------------------------------------------------------------

def lag_frame(offsets) -> Any:
    """``offsets`` with a ``lag`` column: log end - committed; a partition without a commit lags by its whole log."""
    from pyspark.sql import functions as F  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    return offsets.withColumn(
        "lag",
        F.when(F.col("committed").isNull(), F.col("log_end") - F.coalesce(F.col("log_start"), F.lit(0)))
        .otherwise(F.greatest(F.col("log_end") - F.col("committed"), F.lit(0))),
    )


def lag_within(offsets, *, max_total_lag: int, max_partition_lag: int | None = None, label: str = "after") -> Verdict:
    """Lag (log end - committed) per partition; a partition without a commit lags by its whole log."""
    rows = lag_frame(offsets).orderBy("topic", "partition").collect()
    return lag_verdict([r.asDict() for r in rows], max_total_lag=max_total_lag, max_partition_lag=max_partition_lag,
                       label=label)


def lag_verdict(rows: Iterable[Mapping[str, Any]], *, max_total_lag: int, max_partition_lag: int | None = None,
                label: str = "after") -> Verdict:
    """The verdict on ``topic, partition, lag`` rows (sorted by topic and partition)."""
    rows = list(rows)
    total = sum(r["lag"] or 0 for r in rows)
    worst = max((r["lag"] or 0 for r in rows), default=0)
    offending = [{"topic": r["topic"], "partition": r["partition"], "lag": r["lag"]} for r in rows
                 if max_partition_lag is not None and (r["lag"] or 0) > max_partition_lag][:MAX_LISTED]
    passed = total <= max_total_lag and not offending
    per_partition = {f"{r['topic']}:{r['partition']}": int(r["lag"] or 0) for r in rows}
    return Verdict("lag", passed, f"total lag {total} (max allowed {max_total_lag}), worst partition {worst}",
                   {"total_lag": total, "max_partition_lag": worst, "partitions": len(rows)}, offending,
                   {f"lag_{label}": per_partition})


def with_lag_before(after: Verdict, before: Verdict) -> Verdict:
    """The lag verdict after, its summary and chart data completed with the lag measured before."""
    return Verdict(after.check, after.passed, after.summary + f" (before: {before.counts['total_lag']})",
                   after.counts, after.offending, {**before.data, **after.data})


# -- record continuity -------------------------------------------------------------------------------

def id_column(id_source: str = "key", id_type: str = "long") -> Any:
    """The id of a record (Spark's Kafka schema) from ``key``, ``value`` or ``json:<field>`` of the value."""
    from pyspark.sql import functions as F  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    check_id_source(id_source)
    if id_source in ("key", "value"):
        col = F.col(id_source).cast("string")
    else:
        col = F.get_json_object(F.col("value").cast("string"), f"$.{id_source[5:]}")
    return col.cast(id_type)


def check_id_source(id_source: object) -> str:
    if not isinstance(id_source, str) or not (id_source in ("key", "value") or
                                              (id_source.startswith("json:") and len(id_source) > 5)):
        raise ValueError(f"id_source must be key, value or json:<field>, not {id_source!r}")
    return id_source


def extract_ids(records, id_source: str = "key", id_type: str = "long"):
    """A one-column DataFrame ``id`` from ``key``, ``value`` or ``json:<field>`` of the value."""
    return records.select(id_column(id_source, id_type).alias("id"), "topic", "partition", "offset")


def record_continuity(ids, *, expected_min: int | None = None, expected_max: int | None = None,
                      allowed_duplicates: int = 0) -> Verdict:
    """Duplicated ids and ids missing from ``[expected_min, expected_max]`` (default: the ids' own min..max)."""
    from pyspark.sql import functions as F  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    spark = ids.sparkSession
    present = ids.where(F.col("id").isNotNull())
    unparsable = ids.where(F.col("id").isNull()).count()
    dup = present.groupBy("id").agg(F.count("*").alias("n")).where(F.col("n") > 1)
    extra = dup.agg(F.sum(F.col("n") - 1)).first()[0] or 0
    dup_ids = [r.id for r in dup.orderBy("id").limit(MAX_LISTED).collect()]
    bounds = present.agg(F.min("id"), F.max("id")).first()
    lo = expected_min if expected_min is not None else bounds[0]
    hi = expected_max if expected_max is not None else bounds[1]
    if lo is None or hi is None:
        missing_count, missing = 0, []
    else:
        expected = spark.range(int(lo), int(hi) + 1).withColumnRenamed("id", "id")
        gaps = expected.join(present.select("id").distinct(), "id", "left_anti")
        missing_count = gaps.count()
        missing = [r.id for r in gaps.orderBy("id").limit(MAX_LISTED).collect()]
    return continuity_verdict(records=present.count(), unparsable=unparsable, duplicates=extra,
                              duplicated_ids=dup.count(), listed_duplicates=dup_ids, lo=lo, hi=hi,
                              missing_ids=missing_count, listed_missing=missing,
                              allowed_duplicates=allowed_duplicates)


def continuity_verdict(*, records: int, unparsable: int, duplicates: int, duplicated_ids: int,
                       listed_duplicates: Sequence[int], lo: int | None, hi: int | None, missing_ids: int,
                       listed_missing: Sequence[int], allowed_duplicates: int = 0) -> Verdict:
    """The verdict on an id stream's figures: ``records`` with an id, ``unparsable`` without, ``duplicates``
    (extra copies) over ``duplicated_ids`` ids, ids ``lo..hi`` expected of which ``missing_ids`` are missing;
    the ``listed_*`` ids (first MAX_LISTED, ascending) are what the report names."""
    passed = duplicates <= allowed_duplicates and missing_ids == 0 and unparsable == 0
    summary = (f"{records} records, ids {lo}..{hi}: {duplicates} duplicate(s) over "
               f"{len(listed_duplicates) if duplicates else 0} id(s), {missing_ids} missing id(s)"
               + (f", {unparsable} record(s) without an id" if unparsable else ""))
    return Verdict("record_continuity", passed, summary,
                   {"records": int(records), "duplicates": int(duplicates), "duplicated_ids": int(duplicated_ids),
                    "missing_ids": int(missing_ids), "unparsable": int(unparsable)},
                   [{"duplicated_id": i} for i in listed_duplicates[:MAX_LISTED]]
                   + [{"missing_id": i} for i in listed_missing[:MAX_LISTED]])


def record_continuity_by_group(ids, expected: Mapping[str, tuple[int | None, int | None]],
                               allowed_duplicates: Mapping[str, int]) -> dict[str, Verdict]:
    """:func:`record_continuity` for many groups in one pass: ``ids`` has ``group_id, id`` columns;
    ``expected`` gives each group's ``(expected_min, expected_max)`` (None: the ids' own bound). Every group
    of ``expected`` gets a verdict, one without any record too.

    Missing ids are counted as ``hi - lo + 1`` minus the distinct ids inside ``[lo, hi]`` (no range is
    materialised); only for a group with missing ids are the gaps between its sorted ids listed, to
    name the first MAX_LISTED, as the single-group check does.
    """
    from pyspark.sql import Window  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)
    from pyspark.sql import functions as F  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    spark = ids.sparkSession
    stats = {r.group_id: r for r in ids.groupBy("group_id").agg(
        F.count("id").alias("records"), F.sum(F.when(F.col("id").isNull(), 1).otherwise(0)).alias("unparsable"),
        F.min("id").alias("lo"), F.max("id").alias("hi")).collect()}
    present = ids.where(F.col("id").isNotNull()).select("group_id", "id")
    dup = present.groupBy("group_id", "id").agg(F.count("*").alias("n")).where(F.col("n") > 1)
    dup_stats = {r.group_id: (int(r.extra), int(r.ids)) for r in dup.groupBy("group_id").agg(
        F.sum(F.col("n") - 1).alias("extra"), F.count("*").alias("ids")).collect()}
    listed_dups: dict[str, list[int]] = {}
    if dup_stats:
        first = Window.partitionBy("group_id").orderBy("id")
        for r in (dup.withColumn("rank", F.row_number().over(first)).where(F.col("rank") <= MAX_LISTED)
                  .orderBy("group_id", "id").collect()):
            listed_dups.setdefault(r.group_id, []).append(r.id)
    bounds: dict[str, tuple[int, int]] = {}
    for group_id, (exp_min, exp_max) in expected.items():
        seen = stats.get(group_id)
        lo = exp_min if exp_min is not None else (seen.lo if seen else None)
        hi = exp_max if exp_max is not None else (seen.hi if seen else None)
        if lo is not None and hi is not None:
            bounds[group_id] = (int(lo), int(hi))
    missing: dict[str, int] = {}
    listed_missing: dict[str, list[int]] = {}
    if bounds:
        frame = F.broadcast(spark.createDataFrame([(g, lo, hi) for g, (lo, hi) in bounds.items()],
                                                  "group_id string, lo long, hi long"))
        inside = (present.distinct().join(frame, "group_id")
                  .where((F.col("id") >= F.col("lo")) & (F.col("id") <= F.col("hi"))).select("group_id", "id"))
        found = {r.group_id: r.n for r in inside.groupBy("group_id").agg(F.count("*").alias("n")).collect()}
        missing = {g: max(0, hi - lo + 1 - int(found.get(g, 0))) for g, (lo, hi) in bounds.items()}
        short = [g for g, n in missing.items() if n]
        if short:  # the first gaps of each group short of ids: its sorted ids between two sentinels lo-1, hi+1
            ends = spark.createDataFrame([(g, b) for g in short for b in (bounds[g][0] - 1, bounds[g][1] + 1)],
                                         "group_id string, id long")
            seq = inside.where(F.col("group_id").isin(short)).unionByName(ends)
            prev = F.lag("id").over(Window.partitionBy("group_id").orderBy("id"))
            gaps = (seq.withColumn("prev", prev).where(F.col("id") - F.col("prev") > 1)
                    .select("group_id", (F.col("prev") + 1).alias("first"), (F.col("id") - 1).alias("last")))
            ranked = gaps.withColumn("rank", F.row_number().over(Window.partitionBy("group_id").orderBy("first")))
            spans: dict[str, list[tuple[int, int]]] = {}
            for r in ranked.where(F.col("rank") <= MAX_LISTED).orderBy("group_id", "first").collect():
                spans.setdefault(r.group_id, []).append((r.first, r.last))
            listed_missing = {g: missing_from_gaps(s) for g, s in spans.items()}
    out = {}
    for group_id, (exp_min, exp_max) in expected.items():
        seen = stats.get(group_id)
        extra, dup_ids = dup_stats.get(group_id, (0, 0))
        lo = exp_min if exp_min is not None else (seen.lo if seen else None)  # as given, printed as alone
        hi = exp_max if exp_max is not None else (seen.hi if seen else None)
        out[group_id] = continuity_verdict(
            records=int(seen.records) if seen else 0, unparsable=int(seen.unparsable or 0) if seen else 0,
            duplicates=extra, duplicated_ids=dup_ids, listed_duplicates=listed_dups.get(group_id, []), lo=lo, hi=hi,
            missing_ids=missing.get(group_id, 0), listed_missing=listed_missing.get(group_id, []),
            allowed_duplicates=int(allowed_duplicates.get(group_id, 0)))
    return out


def missing_from_gaps(gaps: Iterable[tuple[int, int]], limit: int = MAX_LISTED) -> list[int]:
    """The first ``limit`` ids of inclusive ``(first, last)`` gaps, ascending (gaps sorted and disjoint)."""
    out: list[int] = []
    for first, last in gaps:
        for i in range(int(first), int(last) + 1):
            if len(out) >= limit:
                return out
            out.append(i)
    return out


# -- records per partition ---------------------------------------------------------------------------

def partition_counts(records, ranges, *, explained_by: str | None = None) -> Verdict:
    """Records per partition vs ``end - start`` of its range.

    ``explained_by`` (``compaction`` or ``transactions``) declares that the
    topic may legitimately have offsets without records (compacted away, or
    transaction markers); only then are fewer records a pass. More records
    than offsets is always a failure.
    """
    from pyspark.sql import functions as F  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    check_explained_by(explained_by)
    counted = {(r.topic, r.partition): r.n for r in
               records.groupBy("topic", "partition").agg(F.count("*").alias("n")).collect()}
    return counts_verdict(counted, ranges, explained_by=explained_by)


def check_explained_by(explained_by: object) -> str | None:
    if explained_by not in EXPLANATIONS:
        raise ValueError("explained_by must be None, 'compaction' or 'transactions'")
    return None if explained_by is None else str(explained_by)


def counts_verdict(counted: Mapping[tuple[str, int], int], ranges, *, explained_by: str | None = None) -> Verdict:
    """The verdict on records counted per ``(topic, partition)`` against each partition's ``[start, end)`` range
    (``ranges``: TopicPartition -> (start, end))."""
    check_explained_by(explained_by)
    rows, offending = [], []
    for tp, (start, end) in sorted(ranges.items()):
        n = int(counted.get((tp.topic, tp.partition), 0))
        expected = end - start
        gap = expected - n
        rows.append({"topic": tp.topic, "partition": tp.partition, "start": start, "end": end, "records": n,
                     "missing_offsets": gap})
        if gap < 0 or (gap > 0 and explained_by is None):
            offending.append(rows[-1])
    expected_total = sum(r["end"] - r["start"] for r in rows)
    got = sum(r["records"] for r in rows)
    passed = not offending
    why = f" (explained by {explained_by})" if explained_by and got < expected_total else ""
    return Verdict("partition_counts", passed,
                   f"{got} records for {expected_total} offsets in {len(rows)} partition(s){why}",
                   {"records": got, "offsets": expected_total, "missing_offsets": expected_total - got},
                   offending[:MAX_LISTED], {"partitions": rows})


# -- output timing: the processing gap -------------------------------------------------------------

#: at most this many rate buckets in the output-timing verdict (the bucket widens for a long window)
MAX_RATE_BUCKETS = 300
#: Kafka's record timestamp types (the Spark source's ``timestampType`` column)
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def output_timing(records, *, max_gap_seconds: float | None = None) -> Verdict:
    """The application's processing gap as its output shows it: per partition, the longest interval between
    two consecutive output records (by timestamp) and when it started and ended; the overall longest; and
    output records per second over the window. Computed on the executors (one window per partition); only
    one row per partition and the rate buckets come back to the driver.

    A gap is only as real as the input: a partition whose input paused also shows a gap. And only as real as
    the timestamps: with ``LogAppendTime`` on the output topic they are the broker's append times; with
    ``CreateTime`` they are what the application set, which is its processing time for a producer that stamps
    records as it writes them, but the *input's* time for one that carries it over (Kafka Streams does):
    the verdict counts records by timestamp type so the report can say which. With ``max_gap_seconds`` the
    verdict fails when the longest gap is longer; without it the verdict is a measurement and passes."""
    from pyspark.sql import Window  # noqa: PLC0415 - pyspark is the [spark] extra, imported where it runs
    from pyspark.sql import functions as F  # noqa: PLC0415

    # Kafka timestamps are milliseconds: gaps in whole milliseconds compare exactly (no float ties broken by
    # rounding); the earliest of equal gaps is the one reported
    ts = records.select("topic", "partition", "offset", "timestampType",
                        F.unix_millis(F.col("timestamp")).alias("ms"))
    by_time = Window.partitionBy("topic", "partition").orderBy("ms", "offset")
    gaps = (ts.withColumn("prev", F.lag("ms").over(by_time)).where(F.col("prev").isNotNull())
            .withColumn("gap", F.col("ms") - F.col("prev")))
    longest = (gaps.withColumn("rank", F.row_number().over(
        Window.partitionBy("topic", "partition").orderBy(F.desc("gap"), "prev")))
        .where(F.col("rank") == 1).select("topic", "partition", "gap", "prev", "ms"))
    span = ts.agg(F.min("ms").alias("first"), F.max("ms").alias("last"), F.count("*").alias("n")).collect()[0]
    kinds = {TIMESTAMP_TYPES.get(int(r.timestampType), str(r.timestampType)): int(r["count"])
             for r in ts.groupBy("timestampType").count().collect()}
    rows = [{"partition": f"{r.topic}:{r.partition}", "seconds": int(r.gap) / 1000,
             "started_at": int(r.prev) / 1000, "ended_at": int(r.ms) / 1000} for r in longest.collect()]
    rate: list[tuple[float, float]] = []
    if span.n:
        width_ms = 1000 * (int((span.last - span.first) / 1000 / MAX_RATE_BUCKETS) + 1)
        counted = {int(b.b): int(b["count"]) for b in
                   ts.groupBy(F.floor((F.col("ms") - F.lit(span.first)) / F.lit(width_ms)).alias("b")).count()
                   .collect()}
        # every bucket from the first record to the last, 0 where none was written (the gap is in the line)
        rate = [((span.first + b * width_ms) / 1000, counted.get(b, 0) / (width_ms / 1000))
                for b in range(max(counted) + 1)]
    return timing_verdict(rows, rate, records=int(span.n), timestamp_types=kinds, max_gap_seconds=max_gap_seconds)


def timing_verdict(partitions: list[dict[str, Any]], rate: Sequence[tuple[float, float]], *, records: int,
                   timestamp_types: Mapping[str, int] | None = None, max_gap_seconds: float | None = None,
                   ) -> Verdict:
    """The output-timing verdict from each partition's longest gap and the rate buckets. Partitions rank by gap,
    longest first; a tie goes to the first partition by name."""
    ranked = sorted(partitions, key=lambda p: (-p["seconds"], p["partition"]))
    longest = ranked[0] if ranked else None
    passed = longest is None or max_gap_seconds is None or longest["seconds"] <= max_gap_seconds
    if longest is None:
        summary = f"no two output records in one partition ({records} record(s)): no gap measured"
    else:
        summary = (f"longest output gap {longest['seconds']:.3f} s on {longest['partition']} "
                   f"over {records} records in {len(ranked)} partition(s)")
        if max_gap_seconds is not None:
            summary += f" ({'within' if passed else 'over'} {max_gap_seconds} s)"
    return Verdict("output_timing", passed, summary, {"records": records, "partitions": len(ranked)},
                   [] if passed or longest is None else [longest],
                   {"longest": longest, "partitions": ranked[:MAX_LISTED],
                    "rate": [[round(t, 3), round(v, 3)] for t, v in rate],
                    "timestamp_types": dict(timestamp_types or {})})
