"""Validation checks: figures in, a :class:`Verdict` out.

* ``offsets_preserved``: committed offsets after vs before (equal, or only
  advanced when consumers ran), per partition (:func:`offsets_rows`, :func:`offsets_verdict`).
* ``lag``: lag per partition and in total against a threshold (:func:`lag_rows`, :func:`lag_verdict`).
* ``record_continuity``: ids read from an output topic between two
  snapshots: duplicates (beyond what the application's guarantee allows) and
  gaps (ids missing from the expected range) (:func:`continuity_verdict`).
* ``partition_counts``: records per partition between two offsets vs
  ``end - start``; fewer records are explained only by compaction or
  transaction markers, if the caller says the topic has them (:func:`counts_verdict`).
* ``output_timing``: the longest interval between consecutive output records
  per partition, and the output rate (:func:`timing_verdict`).

The builders here are pure (no Spark). The offsets and lag checks read two
snapshots of a few rows per group and are judged in the driver; the record
checks' figures come from one Spark pass over the records of every group of a
wave (:func:`airflow_provider_kip848.spark.wave.record_figures`); the
single-group job is a wave of one, so a group's verdicts mean the same alone
and in a wave.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_kip848.kafka.rules.lag import LagMargin

MAX_LISTED = 50
OFFSET_STATUSES = ("equal", "advanced", "regressed", "missing", "new")
EXPLANATIONS = (None, "compaction", "transactions")


@dataclass(frozen=True)
class Verdict:
    check: str
    passed: bool
    summary: str
    counts: dict[str, int] = field(default_factory=dict)
    offending: list[Any] = field(default_factory=list)  # Any: JSON of several shapes
    data: dict[str, Any] = field(default_factory=dict)  # Any: JSON of several shapes

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:  # Any: JSON read back (XCom, a file, a response)
        return cls(str(data["check"]), bool(data["passed"]), str(data["summary"]), dict(data.get("counts") or {}),
                   list(data.get("offending") or []), dict(data.get("data") or {}))


# -- committed offsets -----------------------------------------------------------------------------

def offsets_rows(before, after) -> list[dict[str, Any]]:  # Any: JSON of several shapes (XCom, reports)
    """Each partition of either snapshot (``GroupOffsets`` or ``OffsetSnapshot``), sorted by topic and
    partition: ``topic, partition, before, after`` (the committed offsets, None where none) and ``status``
    (OFFSET_STATUSES, or ``none`` when neither has a commit)."""
    was = {(p.topic, p.partition): p.committed for p in before.partitions}
    now = {(p.topic, p.partition): p.committed for p in after.partitions}
    rows = []
    for topic, partition in sorted(set(was) | set(now)):
        b, a = was.get((topic, partition)), now.get((topic, partition))
        status = ("new" if b is None and a is not None else "none" if b is None else "missing" if a is None
                  else "equal" if a == b else "advanced" if a > b else "regressed")
        rows.append({"topic": topic, "partition": partition, "before": b, "after": a, "status": status})
    return rows


def offsets_verdict(  # Any: JSON of several shapes (XCom, reports)
        rows: Iterable[Mapping[str, Any]], *, allow_advanced: bool = True) -> Verdict:
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

def lag_rows(offsets) -> list[dict[str, Any]]:  # Any: JSON of several shapes (XCom, reports)
    """``topic, partition, lag`` of a snapshot's partitions, sorted: log end - committed (never below 0); a
    partition without a commit lags by its whole log; without a log end, 0 (None without either)."""
    rows = []
    for p in sorted(offsets.partitions, key=lambda p: (p.topic, p.partition)):
        if p.committed is None:
            lag = None if p.log_end is None else p.log_end - (p.log_start or 0)
        else:
            lag = 0 if p.log_end is None else max(p.log_end - p.committed, 0)
        rows.append({"topic": p.topic, "partition": p.partition, "lag": lag})
    return rows


def lag_verdict(rows: Iterable[Mapping[str, Any]], *, max_total_lag: int, max_partition_lag: int | None = None,
                label: str = "after") -> Verdict:  # Any: JSON of several shapes (XCom, reports)
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


def lag_verdict_against_before(after_rows: Iterable[Mapping[str, Any]], before_rows: Iterable[Mapping[str, Any]], *,
                               # Any: JSON of several shapes (XCom, reports)
                               margin: LagMargin, max_partition_lag: int | None = None) -> Verdict:
    """The lag after against the lag before the change (the lag wait's baseline rule, kafka/rules/lag.py): the
    total and each partition at most their lag before plus ``margin``; a live application's lag is never 0, so
    this is the check when no absolute ``max_total_lag`` is given."""
    after_rows, before_rows = list(after_rows), list(before_rows)
    before = {(r["topic"], r["partition"]): int(r["lag"] or 0) for r in before_rows}
    total_before = sum(before.values())
    allowed_total = margin.allowance(total_before)
    total = sum(r["lag"] or 0 for r in after_rows)
    worst = max((r["lag"] or 0 for r in after_rows), default=0)
    offending = [{"topic": r["topic"], "partition": r["partition"], "lag": r["lag"],
                  "allowed": margin.allowance(before.get((r["topic"], r["partition"]), 0))} for r in after_rows
                 if (r["lag"] or 0) > margin.allowance(before.get((r["topic"], r["partition"]), 0))
                 or (max_partition_lag is not None and (r["lag"] or 0) > max_partition_lag)][:MAX_LISTED]
    passed = total <= allowed_total and not offending
    return Verdict("lag", passed, f"total lag {total} (max allowed {allowed_total}: the lag before the change "
                                  f"{total_before} + {margin.describe()}), worst partition {worst}",
                   {"total_lag": total, "max_partition_lag": worst, "partitions": len(after_rows),
                    "total_lag_before": total_before, "allowed_total": allowed_total}, offending,
                   {"lag_after": {f"{r['topic']}:{r['partition']}": int(r["lag"] or 0) for r in after_rows},
                    "lag_before": {f"{t}:{p}": v for (t, p), v in before.items()}})


def with_lag_before(after: Verdict, before: Verdict) -> Verdict:
    """The lag verdict after, its summary and chart data completed with the lag measured before."""
    return Verdict(after.check, after.passed, after.summary + f" (before: {before.counts['total_lag']})",
                   after.counts, after.offending, {**before.data, **after.data})


# -- record continuity -------------------------------------------------------------------------------

def id_column(  # Any: pyspark's objects (an optional extra, untyped here)
        id_source: str = "key", id_type: str = "long") -> Any:
    """The id of a record (Spark's Kafka schema) from ``key``, ``value`` or ``json:<field>`` of the value."""
    from pyspark.sql import functions as sql_functions  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    check_id_source(id_source)
    if id_source in ("key", "value"):
        col = sql_functions.col(id_source).cast("string")
    else:
        col = sql_functions.get_json_object(sql_functions.col("value").cast("string"), f"$.{id_source[5:]}")
    return col.cast(id_type)


def check_id_source(id_source: object) -> str:
    if not isinstance(id_source, str) or not (id_source in ("key", "value") or
                                              (id_source.startswith("json:") and len(id_source) > 5)):
        raise ValueError(f"id_source must be key, value or json:<field>, not {id_source!r}")
    return id_source


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


def timing_verdict(partitions: list[dict[str, Any]], rate: Sequence[tuple[float, float]], *, records: int,
                   timestamp_types: Mapping[str, int] | None = None, max_gap_seconds: float | None = None,
                   ) -> Verdict:  # Any: JSON of several shapes (XCom, reports)
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
