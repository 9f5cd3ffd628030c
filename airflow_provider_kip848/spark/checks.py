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

Offsets are tiny; they are DataFrames anyway so that every check composes
the same way and runs unchanged on a cluster.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

OFFSET_SCHEMA = "topic string, partition int, committed long, log_start long, log_end long"
MAX_LISTED = 50


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


def offsets_frame(spark, offsets) -> Any:
    """A DataFrame of a ``GroupOffsets`` or ``OffsetSnapshot``'s partitions (OFFSET_SCHEMA)."""
    rows = [(p.topic, p.partition, p.committed, p.log_start, p.log_end) for p in offsets.partitions]
    return spark.createDataFrame(rows, OFFSET_SCHEMA)


def offsets_preserved(before, after, *, allow_advanced: bool = True) -> Verdict:
    """Per partition: equal / advanced / regressed / missing (committed before, not after) / new."""
    from pyspark.sql import functions as F  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    joined = (
        before.select("topic", "partition", F.col("committed").alias("before"))
        .join(after.select("topic", "partition", F.col("committed").alias("after")), ["topic", "partition"], "full")
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
    rows = joined.orderBy("topic", "partition").collect()
    counts = {s: sum(r.status == s for r in rows) for s in ("equal", "advanced", "regressed", "missing", "new")}
    bad = {"regressed", "missing"} | (set() if allow_advanced else {"advanced"})
    offending = [{"topic": r.topic, "partition": r.partition, "before": r.before, "after": r.after, "status": r.status}
                 for r in rows if r.status in bad][:MAX_LISTED]
    passed = not any(counts[s] for s in bad)
    summary = ("committed offsets preserved" if passed else f"{len(offending)} partition(s) lost or moved progress") + \
        f" ({', '.join(f'{k} {v}' for k, v in counts.items() if v)})"
    return Verdict("offsets_preserved", passed, summary, counts, offending)


def lag_within(offsets, *, max_total_lag: int, max_partition_lag: int | None = None, label: str = "after") -> Verdict:
    """Lag (log end - committed) per partition; a partition without a commit lags by its whole log."""
    from pyspark.sql import functions as F  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    lag = offsets.withColumn(
        "lag",
        F.when(F.col("committed").isNull(), F.col("log_end") - F.coalesce(F.col("log_start"), F.lit(0)))
        .otherwise(F.greatest(F.col("log_end") - F.col("committed"), F.lit(0))),
    )
    rows = lag.orderBy("topic", "partition").collect()
    total = sum(r.lag or 0 for r in rows)
    worst = max((r.lag or 0 for r in rows), default=0)
    offending = [{"topic": r.topic, "partition": r.partition, "lag": r.lag} for r in rows
                 if max_partition_lag is not None and (r.lag or 0) > max_partition_lag][:MAX_LISTED]
    passed = total <= max_total_lag and not offending
    per_partition = {f"{r.topic}:{r.partition}": int(r.lag or 0) for r in rows}
    return Verdict("lag", passed, f"total lag {total} (max allowed {max_total_lag}), worst partition {worst}",
                   {"total_lag": total, "max_partition_lag": worst, "partitions": len(rows)}, offending,
                   {f"lag_{label}": per_partition})


def extract_ids(records, id_source: str = "key", id_type: str = "long"):
    """A one-column DataFrame ``id`` from ``key``, ``value`` or ``json:<field>`` of the value."""
    from pyspark.sql import functions as F  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    if id_source in ("key", "value"):
        col = F.col(id_source).cast("string")
    elif id_source.startswith("json:"):
        col = F.get_json_object(F.col("value").cast("string"), f"$.{id_source[5:]}")
    else:
        raise ValueError(f"id_source must be key, value or json:<field>, not {id_source!r}")
    return records.select(col.cast(id_type).alias("id"), "topic", "partition", "offset")


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
    total = present.count()
    passed = extra <= allowed_duplicates and missing_count == 0 and unparsable == 0
    summary = (f"{total} records, ids {lo}..{hi}: {extra} duplicate(s) over {len(dup_ids) if extra else 0} id(s), "
               f"{missing_count} missing id(s)" + (f", {unparsable} record(s) without an id" if unparsable else ""))
    return Verdict("record_continuity", passed, summary,
                   {"records": total, "duplicates": int(extra), "duplicated_ids": dup.count(),
                    "missing_ids": int(missing_count), "unparsable": int(unparsable)},
                   [{"duplicated_id": i} for i in dup_ids] + [{"missing_id": i} for i in missing])


def partition_counts(records, ranges, *, explained_by: str | None = None) -> Verdict:
    """Records per partition vs ``end - start`` of its range.

    ``explained_by`` (``compaction`` or ``transactions``) declares that the
    topic may legitimately have offsets without records (compacted away, or
    transaction markers); only then are fewer records a pass. More records
    than offsets is always a failure.
    """
    from pyspark.sql import functions as F  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    if explained_by not in (None, "compaction", "transactions"):
        raise ValueError("explained_by must be None, 'compaction' or 'transactions'")
    counted = {(r.topic, r.partition): (r.n, r.lo, r.hi) for r in
               records.groupBy("topic", "partition").agg(F.count("*").alias("n"), F.min("offset").alias("lo"),
                                                         F.max("offset").alias("hi")).collect()}
    rows, offending = [], []
    for tp, (start, end) in sorted(ranges.items()):
        n, lo, hi = counted.get((tp.topic, tp.partition), (0, None, None))
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
