"""The validation job: a JSON spec in, verdicts and a report out. Same code in-process and under spark-submit.

Spec (all sections optional but one)::

    {
      "title": "kip1071 migration of wordcount",
      "bootstrap_servers": "b1:9092", "security": {...ClientSettings fields...},
      "reader": "connector" | "python",
      "output_dir": "/reports/run-1",
      "offsets_preserved": {"before": "<snapshot path>", "after": "<snapshot path>", "allow_advanced": true},
      "lag": {"before": "<snapshot path>", "after": "<snapshot path>", "max_total_lag": 0,
              "max_partition_lag": null},
      "continuity": {"ranges": {"topic:partition": [start, end]} | "between": [capture1, capture2],
                     "id_source": "key" | "value" | "json:<field>",
                     "expected_min": 0, "expected_max": 999, "allowed_duplicates": 0},
      "counts": {"ranges" | "between": ..., "explained_by": null | "compaction" | "transactions"},
      "output_timing": {"ranges" | "between": ..., "max_gap_seconds": null}

A capture is what :class:`~airflow_provider_kip848.operators.validation.TopicOffsetsOperator`
returns: ``{"topic:partition": {"log_start": n, "log_end": n}}``.
    }

The spec may hold the connection's secrets, so it is passed as a file (mode
0600), never on a command line: ``spark-submit ... job.py --spec /path``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from airflow_provider_kip848.kafka.model import OffsetSnapshot, TopicPartition
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.spark import checks
from airflow_provider_kip848.spark.checks import Verdict
from airflow_provider_kip848.spark.report import report_dict, write_report
from airflow_provider_kip848.spark.session import job_session, spark_versions


def parse_ranges(cfg: dict[str, Any]) -> dict[TopicPartition, tuple[int, int]]:
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
        raise ValueError("a continuity/counts check needs 'ranges' or 'between'")
    return out


def _tp(key: str) -> TopicPartition:
    topic, _, partition = key.rpartition(":")
    return TopicPartition(topic, int(partition))


def _snapshot(path: str) -> OffsetSnapshot:
    return OffsetSnapshot.from_json(Path(path).read_text(), source=path)


def run_spec(spark, spec: dict[str, Any]) -> list[Verdict]:
    # optional dependency: the reader module defines a pyspark data source at import (the [spark] extra)
    from airflow_provider_kip848.spark.reader import read_kafka  # noqa: PLC0415

    verdicts: list[Verdict] = []
    if "offsets_preserved" in spec:
        cfg = spec["offsets_preserved"]
        before = checks.offsets_frame(spark, _snapshot(cfg["before"]))
        after = checks.offsets_frame(spark, _snapshot(cfg["after"]))
        verdicts.append(checks.offsets_preserved(before, after, allow_advanced=cfg.get("allow_advanced", True)))
    if "lag" in spec:
        cfg = spec["lag"]
        after = checks.lag_within(checks.offsets_frame(spark, _snapshot(cfg["after"])),
                                  max_total_lag=int(cfg.get("max_total_lag", 0)),
                                  max_partition_lag=cfg.get("max_partition_lag"))
        if cfg.get("before"):
            before = checks.lag_within(checks.offsets_frame(spark, _snapshot(cfg["before"])),
                                       max_total_lag=sys.maxsize, label="before")
            after = checks.with_lag_before(after, before)
        verdicts.append(after)
    needs_records = [k for k in ("continuity", "counts", "output_timing") if k in spec]
    if needs_records:
        settings = ClientSettings(**{"bootstrap_servers": spec["bootstrap_servers"], **spec.get("security", {})})
        backend = spec.get("reader", "connector")
        for key in needs_records:
            cfg = spec[key]
            ranges = parse_ranges(cfg)
            records = read_kafka(spark, settings, ranges, backend=backend).cache()
            if key == "continuity":
                ids = checks.extract_ids(records, cfg.get("id_source", "key"), cfg.get("id_type", "long"))
                verdicts.append(checks.record_continuity(ids, expected_min=cfg.get("expected_min"),
                                                         expected_max=cfg.get("expected_max"),
                                                         allowed_duplicates=int(cfg.get("allowed_duplicates", 0))))
            elif key == "counts":
                verdicts.append(checks.partition_counts(records, ranges, explained_by=cfg.get("explained_by")))
            else:
                limit = cfg.get("max_gap_seconds")
                verdicts.append(checks.output_timing(records, max_gap_seconds=None if limit is None else float(limit)))
            records.unpersist()
    if not verdicts:
        raise ValueError("the spec asks for no check (offsets_preserved, lag, continuity, counts, output_timing)")
    return verdicts


def run(spec: dict[str, Any], spark=None) -> dict[str, Any]:
    """Run the spec's checks, write the report (when ``output_dir`` is set) and return it."""
    if spark is None:
        with job_session("kip848-validation", kafka_connector=spec.get("reader", "connector") == "connector") as own:
            return run(spec, own)
    verdicts = run_spec(spark, spec)
    context = {"reader": spec.get("reader", "connector"), **spark_versions(spark)}
    report = report_dict(spec.get("title", "Kafka migration validation"), verdicts, context)
    if spec.get("output_dir"):
        report["files"] = write_report(spec["output_dir"], report)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a kip848 validation spec (see the module docstring).")
    parser.add_argument("--spec", required=True, help="path to the JSON spec")
    args = parser.parse_args(argv)
    spec = json.loads(Path(args.spec).read_text())
    from pyspark.sql import SparkSession  # noqa: PLC0415 - optional dependency pyspark (the [spark] extra)

    report = run(spec, SparkSession.builder.getOrCreate())  # spark-submit configured the session
    print(json.dumps({"passed": report["passed"], "files": report.get("files", {}),
                      "verdicts": [{k: v[k] for k in ("check", "passed", "summary")} for v in report["verdicts"]]}))
    return 0 if report["passed"] else 3


if __name__ == "__main__":
    sys.exit(main())
