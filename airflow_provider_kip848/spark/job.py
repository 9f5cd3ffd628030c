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

A capture is what :class:`~airflow_provider_kip848.operators.validation.KafkaTopicOffsetsOperator`
returns: ``{"topic:partition": {"log_start": n, "log_end": n}}``.
    }

The job is a wave of one (:mod:`airflow_provider_kip848.spark.wave`): the check sections are read as a
wave group's (strictly: an unknown key or a bad range is refused with the reason) and judged by the same
code, so a group's verdicts are the same alone and in a wave.

The spec may hold the connection's secrets, so it is passed as a file (mode
0600), never on a command line: ``spark-submit ... job.py --spec /path``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from airflow_provider_kip848.spark.checks import Verdict
from airflow_provider_kip848.spark.report import report_dict, write_report
from airflow_provider_kip848.spark.session import job_session, spark_versions
from airflow_provider_kip848.spark.wave import CHECKS, WaveSpec, parse_ranges, run_wave

__all__ = ["group_spec", "parse_ranges", "run", "run_spec"]

#: the group id the single-group job gives its one group (the report of a single-group job names none)
GROUP = "validation"


def group_spec(spec: dict[str, Any]) -> WaveSpec:  # Any: JSON of several shapes (XCom, reports)
    """The single-group spec as a wave of one group: its check sections, its cluster and reader."""
    sections = {k: spec[k] for k in CHECKS if k in spec}
    return WaveSpec.from_dict({"title": spec.get("title") or "Kafka migration validation",
                               "bootstrap_servers": spec.get("bootstrap_servers"),
                               "security": spec.get("security") or {},
                               "reader": spec.get("reader", "connector"),
                               "groups": [{"group_id": GROUP, **sections}]})


def run_spec(spark, spec: dict[str, Any]) -> list[Verdict]:  # Any: JSON of several shapes (XCom, reports)
    """The spec's verdicts, in the order offsets_preserved, lag, record_continuity, partition_counts,
    output_timing."""
    (group,) = run_wave(spark, group_spec(spec))
    return list(group.verdicts)


def run(spec: dict[str, Any], spark=None) -> dict[str, Any]:  # Any: pyspark's objects (an optional extra, untyped here)
    """Run the spec's checks, write the report (when ``output_dir`` is set) and return it."""
    wave = group_spec(spec)  # a bad spec is refused before a session starts
    if spark is None:
        with job_session("kip848-validation", kafka_connector=wave.needs_records and wave.reader == "connector") as own:
            return run(spec, own)
    verdicts = run_spec(spark, spec)
    context = {"reader": wave.reader, **spark_versions(spark)}
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
