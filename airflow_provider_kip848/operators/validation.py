"""PySpark validation from a DAG: in-process (local Spark) or with spark-submit on a cluster.

``KafkaTopicOffsetsOperator`` captures a topic's log start/end offsets (the fixed
ranges a later validation reads); ``KafkaValidationOperator`` runs the checks
of :mod:`airflow_provider_kip848.spark.job` and fails the task when a check
fails. :func:`validation_spark_submit_operator` builds the Spark provider's
``SparkSubmitOperator`` for the same job, for teams whose Spark runs on a
cluster.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.kafka.documents import load_strict
from airflow_provider_kip848.kafka.rules.lag import MARGIN_FRACTION, MARGIN_RECORDS
from airflow_provider_kip848.operators.base import KafkaAdminBaseOperator
from airflow_provider_kip848.spark import job
from airflow_provider_kip848.spark.jvm_output import line_level
from airflow_provider_kip848.spark.session import connector_coordinates
from airflow_provider_kip848.spark.submit import package_zip, submit_command

RUN_MODES = ("local", "spark-submit")


def consumer_migration_checks(before_snapshot: str, after_snapshot: str,
                              output_before: dict[str, Any], output_after: dict[str, Any],  # Any: captures, JSON
                              *, max_lag: int | None, output_topic: str | None,
                              id_source: str = "key", allowed_duplicates: int = 0,
                              margin_fraction: float = MARGIN_FRACTION,
                              margin_records: int = MARGIN_RECORDS) -> dict[str, Any]:
    """The validation spec of a consumer group's migration (offline or rolling): its committed offsets never
    went back and its lag drained (the two snapshots); with an output topic, every id between the two
    captures of it once (up to ``allowed_duplicates`` extra copies) and the output records' timing (the
    report's processing gap). One definition for the DAGs that move a consumer group."""
    spec: dict[str, Any] = {
        "offsets_preserved": {"before": before_snapshot, "after": after_snapshot, "allow_advanced": True},
        # max_lag None: the lag after against the lag before plus the margin (the lag wait's baseline rule)
        "lag": {"before": before_snapshot, "after": after_snapshot, "max_total_lag": max_lag,
                "margin_fraction": margin_fraction, "margin_records": margin_records},
    }
    if output_topic:
        between = [output_before, output_after]
        spec["continuity"] = {"between": between, "id_source": id_source, "allowed_duplicates": allowed_duplicates}
        spec["output_timing"] = {"between": between}
    return spec


class KafkaTopicOffsetsOperator(KafkaAdminBaseOperator[dict[str, dict[str, int]]]):
    """Log start and end offsets of every partition of ``topics``: ``{"topic:partition": {log_start, log_end}}``."""

    template_fields = (*KafkaAdminBaseOperator.template_fields, "topics")
    supported_backends = ("native",)

    def __init__(self, *, topics: list[str] | str, **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        self.topics = topics

    def run(self, context: Context) -> dict[str, dict[str, int]]:
        topics = [self.topics] if isinstance(self.topics, str) else list(self.topics)
        offsets = self.native_hook.topic_offsets(topics)
        result = {str(tp): {"log_start": start, "log_end": end} for tp, (start, end) in offsets.items()}
        self.log.info("Offsets of %s: %s", ", ".join(topics), result)
        return result


class KafkaValidationOperator(KafkaAdminBaseOperator[dict[str, object]]):
    """Run validation checks on real Kafka data with PySpark and fail the task if any check fails.

    :param checks: the spec sections of :mod:`airflow_provider_kip848.spark.job` (``offsets_preserved``,
        ``lag``, ``continuity``, ``counts``, ``output_timing``); templated, so snapshot paths and captures
        can come from XCom.
    :param reader: ``connector`` (Spark's Kafka source) or ``python`` (the Python data source).
    :param run_mode: ``local`` (a SparkSession in the worker) or ``spark-submit`` (a separate
        spark-submit process with the package shipped as ``--py-files``; ``master`` says where).
    :param output_dir: where ``validation.json`` and ``validation.html`` go.
    :returns: ``{passed, files, verdicts: [{check, passed, summary, counts}]}``, plus ``output_timing`` (the
        longest output gap per partition and the output rate, for the run's downtime report) when asked
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "checks", "output_dir", "title", "reader",
                       "run_mode", "master")
    ui_color = "#fce8e6"
    supported_backends = ("native",)

    def __init__(self, *, checks: dict[str, Any] | str,  # Any: the validation spec (JSON), or its template
                 output_dir: str, reader: str = "connector",
                 run_mode: str = "local", master: str = "local[2]", title: str = "Kafka migration validation",
                 fail_on_failure: bool = True, **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        if run_mode not in RUN_MODES and "{{" not in run_mode:
            raise ValueError(f"run_mode must be one of {RUN_MODES}")
        self.checks, self.output_dir, self.reader = checks, output_dir, reader
        self.run_mode, self.master, self.title, self.fail_on_failure = run_mode, master, title, fail_on_failure

    def spec(self) -> dict[str, Any]:  # Any: the validation job's spec, JSON
        settings = self.native_hook.settings
        security = {k: getattr(settings, k) for k in settings.__dataclass_fields__ if k != "bootstrap_servers"}
        checks = self.checks if isinstance(self.checks, dict) else load_strict(
            str(self.checks), json_only=True, source="the validation's checks")
        return {"title": self.title, "bootstrap_servers": settings.bootstrap_servers, "security": security,
                "reader": self.reader, "output_dir": self.output_dir, **checks}

    def run(self, context: Context) -> dict[str, object]:
        if self.run_mode not in RUN_MODES:
            raise AirflowFailException(f"run_mode must be one of {RUN_MODES}, not {self.run_mode!r}")
        spec = self.spec()
        report = self._run_local(spec) if self.run_mode == "local" else self._run_submit(spec)
        for v in report["verdicts"]:
            self.log.info("[%s] %s: %s", "PASS" if v["passed"] else "FAIL", v["check"], v["summary"])
        result = {"passed": report["passed"], "files": report.get("files", {}),
                  "verdicts": [{k: v.get(k) for k in ("check", "passed", "summary", "counts")}
                               for v in report["verdicts"]]}
        timing = [v for v in report["verdicts"] if v["check"] == "output_timing"]
        if timing:
            result["output_timing"] = timing[0].get("data") or {}
        if self.fail_on_failure and not report["passed"]:
            failed = [v for v in report["verdicts"] if not v["passed"]]
            summary = "; ".join(f"{v['check']}: {v['summary']}" for v in failed)
            raise AirflowFailException(
                f"Validation failed: {summary}. Report: {result['files'].get('html', self.output_dir)}")
        return result

    def _run_local(self, spec: dict[str, Any]) -> dict[str, Any]:
        return job.run(spec)

    def _run_submit(self, spec: dict[str, Any]) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="kip848-spark-") as tmp:
            spec_path = Path(tmp) / "spec.json"
            fd = os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # it holds the connection's secrets
            with os.fdopen(fd, "w") as fh:
                json.dump(spec, fh)
            cmd = submit_command(spec_path, package_zip(Path(tmp) / "airflow_provider_kip848.zip"),
                                 master=self.master, connector=self.reader == "connector")
            self.log.info("Running %s", " ".join(cmd))
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        level = logging.INFO
        for line in proc.stderr.splitlines():  # spark-submit's own log, at the level each line carries
            if line.strip():
                level = line_level(line, level)
                self.log.log(level, "spark-submit: %s", line)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('{"passed"')]
        if proc.returncode not in (0, 3) or not lines:
            raise AirflowFailException(f"spark-submit exited {proc.returncode}: {proc.stderr.strip()[-1500:]}")
        summary = json.loads(lines[-1])
        return json.loads(Path(summary["files"]["json"]).read_text()) if summary.get("files") else {
            "passed": summary["passed"], "verdicts": summary["verdicts"]}


def validation_spark_submit_operator(*, task_id: str, spec_path: str, py_files: str, reader: str = "connector",
                                     conn_id: str = "spark_default", **kwargs: Any):  # Any: passed to BaseOperator
    """The Spark provider's ``SparkSubmitOperator`` for the validation job (``pip install
    airflow-provider-kip848[spark-submit]``). ``spec_path`` must be readable where the driver runs and
    ``py_files`` is a zip of this package (:func:`airflow_provider_kip848.spark.submit.package_zip`)."""
    # optional dependency: apache-airflow-providers-apache-spark (the [spark-submit] extra)
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator  # noqa: PLC0415

    return SparkSubmitOperator(
        task_id=task_id,
        conn_id=conn_id,
        application=job.__file__,
        application_args=["--spec", spec_path],
        py_files=py_files,
        packages=connector_coordinates() if reader == "connector" else None,
        conf={"spark.ui.enabled": "false", "spark.sql.session.timeZone": "UTC"},
        **kwargs,
    )
