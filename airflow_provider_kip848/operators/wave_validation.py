"""``KafkaWaveValidationOperator``: validate a wave of groups in one Spark application, where Spark runs.

The wave job (:mod:`airflow_provider_kip848.spark.wave`) judges every group of
a wave in one application; this operator is the Airflow layer around it, in
three modes:

* ``local``: a local SparkSession inside the task (``local[2]``), as the
  single-group operator does: nothing to set up, the worker's cores only.
* ``client``: ``spark-submit --deploy-mode client`` through the Spark
  provider's ``SparkSubmitHook`` and its ``spark`` connection: the driver is
  the task's child process, the executors run on the cluster. The package is
  zipped and shipped with ``--py-files``, the Kafka connector with
  ``--packages``. The worker slot is held while the job runs (the driver is
  there).
* ``cluster``: the driver runs on a Spark standalone worker, submitted
  through the master's REST submission API
  (:mod:`~airflow_provider_kip848.spark.standalone`); the task then defers to
  :class:`~airflow_provider_kip848.triggers.spark.SparkStandaloneDriverTrigger`
  and holds no worker slot until the driver ends. The job's files go under
  ``output_dir``, which must be a path the Spark workers see as well (a
  shared mount).

Whatever the mode, the verdicts come from the report the job wrote, read
strictly (:func:`~airflow_provider_kip848.spark.wave.outcome`): no report, an
unreadable one, or a group it does not judge is ``unknown``, never a pass.
The result (XCom ``return_value`` and ``wave_verdicts``, pushed before a
failure too) is ``{verdict, passed, summary, groups: {group_id: {verdict,
failed_checks, detail}}, files, application_id, master, mode}``.

The spec may hold the Kafka connection's secrets (SASL password, key
password): it is written to a 0600 file and named on the command line by
path only, and deleted once the job has ended.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook, Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol import storage
from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.operators.base import KafkaAdminBaseOperator, check_choice_arg, is_template
from airflow_provider_kip848.spark import wave
from airflow_provider_kip848.spark.session import connector_coordinates
from airflow_provider_kip848.spark.standalone import PythonSubmission, RestSubmissionClient, StandaloneMaster
from airflow_provider_kip848.spark.submit import (
    StagedWave,
    connector_conf,
    runner_jar,
    spark_submit_executable,
    stage_wave,
)
from airflow_provider_kip848.triggers.spark import SparkDriverEvent, SparkStandaloneDriverTrigger

if TYPE_CHECKING:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

MODES = ("local", "client", "cluster")
XCOM_KEY = "wave_verdicts"
#: Spark properties every mode sets (no UI on a shared worker, UTC like the single-group job)
BASE_CONF = {"spark.ui.showConsoleProgress": "false", "spark.sql.session.timeZone": "UTC"}


class KafkaWaveValidationOperator(KafkaAdminBaseOperator[dict[str, object]]):
    """Validate ``groups`` (a wave) in one Spark application and return each group's verdict and the wave's.

    :param groups: the wave's groups, as the wave spec lists them (templated): ``[{group_id, app?,
        offsets_preserved?, lag?, continuity?, counts?}]`` (see :mod:`airflow_provider_kip848.spark.wave`).
        Snapshot paths are read here (local paths or object-storage URLs) and shipped inside the spec, so the
        driver needs no access to the artifact storage.
    :param output_dir: where each run's ``run-<id>/report/validation.{json,html}`` go; in cluster mode a path
        the Spark workers share with the Airflow workers.
    :param mode: ``local``, ``client`` or ``cluster`` (templated; see the module docstring).
    :param spark_conn_id: the Spark provider's connection (client and cluster modes): master
        ``spark://host:port`` (or YARN, Kubernetes in client mode); extra ``rest-port`` for cluster mode.
    :param reader: ``connector`` (Spark's Kafka source) or ``python`` (the Python data source).
    :param conf: extra Spark properties (templated), e.g. ``spark.driver.host`` for client mode,
        ``spark.executor.memory``; they override the defaults (and the connector's ivy settings).
    :param env_vars: environment of the ``spark-submit`` process (client) or of the driver (cluster).
        ``PYSPARK_PYTHON`` defaults to this worker's Python: set it when the cluster's Python lives elsewhere.
    :param runner_jar: cluster mode: Spark's ``spark-core`` jar as the Spark workers see it (default: this
        installation's pyspark jar, right when the workers run the same installation path).
    :param poll_interval: seconds between two status requests of the deferred wait (cluster mode).
    :param timeout_minutes: the job must end within this; a cluster-mode driver still running then is killed.
    :param fail_on_failure: fail the task when the wave's verdict is not ``pass`` (the verdicts are pushed
        first). The fleet DAG sets it to False and lets its judge count failed groups.
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "groups", "output_dir", "mode", "spark_conn_id",
                       "reader", "title", "conf", "env_vars")
    ui_color = "#fce8e6"
    supported_backends = ("native",)

    def __init__(self, *, groups: list[dict[str, object]] | str, output_dir: str, mode: str = "local",
                 spark_conn_id: str = "spark_default",
                 reader: str = "connector", title: str = "Kafka wave validation", conf: dict[str, str] | None = None,
                 env_vars: dict[str, str] | None = None, runner_jar: str | None = None, poll_interval: float = 5.0,
                 timeout_minutes: float = 60.0, fail_on_failure: bool = True,
                 **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        check_choice_arg(mode, "mode", MODES)
        check_choice_arg(reader, "reader", wave.READERS)
        if not is_template(output_dir) and (not isinstance(output_dir, str) or not output_dir.strip()):
            raise InvalidArgument(f"output_dir must be a path, not {output_dir!r}.")
        if poll_interval <= 0 or timeout_minutes <= 0:
            raise InvalidArgument("poll_interval and timeout_minutes must be positive.")
        self.groups, self.output_dir, self.mode, self.spark_conn_id = groups, output_dir, mode, spark_conn_id
        self.reader, self.title, self.conf, self.env_vars = reader, title, conf or {}, env_vars or {}
        self.runner_jar, self.poll_interval, self.timeout_minutes = runner_jar, poll_interval, timeout_minutes
        self.fail_on_failure = fail_on_failure
        self._hook: SparkSubmitHook | None = None
        self._submission: tuple[str, str] | None = None  # (rest url, submission id) while this process waits

    # -- inputs ---------------------------------------------------------------------------------------

    def build_spec(self) -> wave.WaveSpec:
        """The wave spec: the connection's cluster and security, the groups with their snapshots inlined.
        Bad input (a malformed group, a snapshot that cannot be read) is refused here, before Spark starts."""
        if not isinstance(self.groups, list) or not self.groups:
            raise InvalidArgument(f"groups must be a non-empty list of groups with their checks, not {self.groups!r}.")
        settings = self.native_hook.settings
        security = {k: getattr(settings, k) for k in settings.__dataclass_fields__ if k != "bootstrap_servers"}
        spec = wave.WaveSpec.from_dict({"title": self.title, "bootstrap_servers": settings.bootstrap_servers,
                                        "security": {k: v for k, v in security.items() if v is not None},
                                        "reader": self.reader, "groups": self.groups})
        return wave.inline_snapshots(spec, storage.read_text)

    def _spark_conf(self, spec: wave.WaveSpec) -> dict[str, str]:
        needs_connector = spec.needs_records and spec.reader == "connector"
        return {**BASE_CONF, **(connector_conf() if needs_connector else {}),
                **{str(k): str(v) for k, v in (self.conf or {}).items()}}

    def _env(self) -> dict[str, str]:
        return {"PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON") or sys.executable,
                **{str(k): str(v) for k, v in (self.env_vars or {}).items()}}

    # -- run ------------------------------------------------------------------------------------------

    def run(self, context: Context) -> dict[str, object]:
        check_choice_arg(self.mode, "mode", MODES)
        spec = self.build_spec()
        group_ids = [g.group_id for g in spec.groups]
        self.log.info("Validating %d group(s) in one Spark application (mode %s): %s", len(group_ids), self.mode,
                      ", ".join(group_ids))
        if self.mode == "local":
            # the layout of the other modes' runs (stage_wave): <output_dir>/run-<id>/report/validation.json
            output = Path(self.output_dir).expanduser() / f"run-{uuid.uuid4().hex[:12]}" / "report"
            report = wave.run(wave.WaveSpec(spec.groups, spec.title, spec.bootstrap_servers, spec.security,
                                            spec.reader, str(output)))
            return self._finish(context, wave.outcome(group_ids, report))
        if self.mode == "client":
            return self._run_client(context, spec, group_ids)
        return self._submit_cluster(spec, group_ids)

    def _run_client(self, context: Context, spec: wave.WaveSpec, group_ids: list[str]) -> dict[str, Any]:
        staged = stage_wave(spec.to_dict(), self.output_dir)
        env = self._env()
        if shutil.which("spark-submit", path=env.get("PATH") or os.environ.get("PATH")) is None:
            # the Spark provider runs "spark-submit" from PATH: the one pyspark ships, when none is installed
            env["PATH"] = f"{Path(spark_submit_executable()).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        needs_connector = spec.needs_records and spec.reader == "connector"
        conf = {k: v for k, v in self._spark_conf(spec).items() if k != "spark.jars.packages"}
        # optional dependency: apache-airflow-providers-apache-spark (the [spark-submit] extra), client mode only
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook  # noqa: PLC0415

        self._hook = SparkSubmitHook(
            conf=conf, conn_id=self.spark_conn_id, py_files=str(staged.py_files),
            packages=connector_coordinates() if needs_connector else None, name=f"kip848-wave-{self.task_id}",
            application_args=["--spec", str(staged.spec)], env_vars=env, deploy_mode="client")
        try:
            self._hook.submit(application=str(staged.main_py))
        except Exception as exc:  # noqa: BLE001 - the job did not judge the wave: unknown, with the reason
            reason = f"spark-submit failed: {exc}"
            self._push(context, wave.outcome(group_ids, None, reason=reason))
            raise AirflowFailException(f"Wave validation: {reason}; every group's verdict is unknown.") from exc
        finally:
            staged.remove_spec()
        return self._read(context, staged, group_ids)

    def _submit_cluster(self, spec: wave.WaveSpec, group_ids: list[str]) -> dict[str, Any]:
        conn = BaseHook.get_connection(self.spark_conn_id)
        master = StandaloneMaster.from_connection(conn.host, conn.port, conn.extra_dejson)
        staged = stage_wave(spec.to_dict(), self.output_dir)
        submission = PythonSubmission(
            main_py=str(staged.main_py), py_files=[str(staged.py_files)], app_args=["--spec", str(staged.spec)],
            app_name=f"kip848-wave-{self.task_id}", spark_properties=self._spark_conf(spec), environment=self._env())
        import pyspark  # noqa: PLC0415 - optional dependency pyspark ([spark] extra): the client's Spark version

        request = submission.request(master, spark_version=pyspark.__version__,
                                     runner_jar=self.runner_jar or runner_jar())
        try:
            submission_id = RestSubmissionClient(master.rest_url).create(request)
        except Exception:
            staged.remove_spec()
            raise
        self._submission = (master.rest_url, submission_id)
        self.log.info("Submitted the wave's driver %s to %s (REST %s); waiting deferred.", submission_id,
                      master.master_url, master.rest_url)
        self.defer(
            trigger=SparkStandaloneDriverTrigger(
                rest_url=master.rest_url, submission_id=submission_id, poll_interval=self.poll_interval,
                timeout_at=time.time() + self.timeout_minutes * 60,
                carry={"staged": staged.to_dict(), "group_ids": group_ids, "rest_url": master.rest_url}),
            method_name="execute_complete",
            timeout=timedelta(minutes=self.timeout_minutes + 5),
        )
        raise AssertionError("unreachable: defer() raises")  # pragma: no cover

    def execute_complete(self, context: Context, event: SparkDriverEvent) -> dict[str, object]:
        """The driver ended (or the wait did): read its report on FINISHED, else unknown with the state."""
        carry = event["carry"]
        staged = StagedWave.from_dict(carry["staged"])
        group_ids = list(carry["group_ids"])
        sid, status, state = event["submission_id"], event["status"], event["driver_state"]
        staged.remove_spec()
        if status == "finished":
            self.log.info("Driver %s FINISHED after %s poll(s).", sid, event["polls"])
            return self._read(context, staged, group_ids)
        if status == "timeout":
            try:
                RestSubmissionClient(carry["rest_url"], timeout=10).kill(str(sid))
            except Exception as exc:  # noqa: BLE001 - the kill is best effort; the failure is reported anyway
                self.log.warning("Could not kill driver %s: %s", sid, exc)
        reason = (f"driver {sid} ended {state}" if status == "failed"
                  else f"driver {sid}: {status} ({event.get('message') or state or 'no state'})")
        self._push(context, wave.outcome(group_ids, None, reason=reason))
        raise AirflowFailException(f"Wave validation: {reason}; every group's verdict is unknown. "
                                   f"Driver logs: the Spark worker's work dir for {sid}.")

    def on_kill(self) -> None:
        """A killed task takes its Spark job with it: the spark-submit child (client), the driver (cluster)."""
        if self._hook is not None:
            self._hook.on_kill()
        if self._submission is not None:
            rest_url, sid = self._submission
            accepted = RestSubmissionClient(rest_url, timeout=10).kill(sid)
            self.log.info("Kill of driver %s %s.", sid, "accepted" if accepted else "refused")

    # -- the result -----------------------------------------------------------------------------------

    def _read(self, context: Context, staged: StagedWave, group_ids: list[str]) -> dict[str, Any]:
        report, reason = wave.read_report(staged.report)
        if report is not None:
            report = {**report, "files": {"json": str(staged.report),
                                          "html": str(staged.output_dir / "validation.html")}}
        return self._finish(context, wave.outcome(group_ids, report, reason=reason))

    def _push(self, context: Context, result: dict[str, Any]) -> dict[str, Any]:
        result = {**result, "mode": self.mode}
        context["ti"].xcom_push(key=XCOM_KEY, value=result)
        return result

    def _finish(self, context: Context, result: dict[str, Any]) -> dict[str, Any]:
        result = self._push(context, result)
        for group_id, g in result["groups"].items():
            self.log.info("[%s] %s %s", g["verdict"].upper(), group_id, g.get("detail") or "")
        self.log.info("Wave: %s (%s)", result["verdict"], result["summary"])
        if self.fail_on_failure and not result["passed"]:
            raise AirflowFailException(f"Wave validation {result['verdict']}: {result['summary']}. Report: "
                                       f"{result['files'].get('html', 'none')}")
        return result
