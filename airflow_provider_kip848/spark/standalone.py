"""A Spark standalone master's REST submission API: submit a Python driver in cluster mode, follow it, kill it.

Why not ``spark-submit --deploy-mode cluster``: Spark refuses Python applications in
standalone cluster mode ("Cluster deploy mode is currently not supported for python
applications on standalone clusters"), and the Spark provider's hook, when it does
submit in cluster mode, then polls the driver with a blocking loop in the worker.
The master's REST server (``spark.master.rest.enabled=true``, port
``spark.master.rest.port``, 6066 by default) takes the same request ``spark-submit``
would send, and answers a status request per driver: a submission is one POST, and
following it is a cheap GET that a deferred trigger can make without holding a
worker slot.

A Python driver runs as Spark runs every Python application:
``org.apache.spark.deploy.PythonRunner`` (in ``spark-core``), whose arguments are
the main ``.py`` file, the comma-separated ``--py-files``, then the application's
own arguments. The worker starts it through ``DriverWrapper``, which also resolves
``spark.jars.packages`` (the Kafka connector) on that node.

Nothing here imports Airflow: the operator and the trigger wrap it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kip848.kafka.errors import InvalidArgument, Kip848Error

#: the states a driver ends in (org.apache.spark.deploy.master.DriverState)
TERMINAL_STATES = ("FINISHED", "FAILED", "KILLED", "ERROR")
#: the terminal states that are a failure (FINISHED: the driver's process exited 0)
FAILED_STATES = ("FAILED", "KILLED", "ERROR")
PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"
DEFAULT_REST_PORT = 6066


class SparkRestError(Kip848Error):
    """The master's REST server refused a request or could not be reached."""

    remedy = ("Check that the master runs with spark.master.rest.enabled=true and that the Spark connection's "
              "extra rest-port (default 6066) is the master's spark.master.rest.port.")


class SparkRestUnavailable(SparkRestError):
    """The REST server did not answer (connection refused, timeout): trying again later may work."""

    retriable = True


@dataclass(frozen=True)
class StandaloneMaster:
    """Where a standalone master listens: ``spark://host:port`` for applications, ``http(s)://host:rest_port``
    for the REST submission server."""

    master_url: str
    rest_url: str

    @classmethod
    def from_connection(  # Any: JSON read back (XCom, a file, a response)
            cls, host: str | None, port: int | None, extra: Mapping[str, Any] | None) -> StandaloneMaster:
        """The master of an Airflow ``spark`` connection, read as the Spark provider reads it: ``host``
        ``spark://h`` with ``port``, or ``spark://h:p`` in ``host``; extras ``rest-port`` and ``rest-scheme``.
        Anything that is not a single standalone master is refused (YARN, Kubernetes, local and HA lists
        have no such REST server)."""
        extra = dict(extra or {})
        raw = (host or "").strip()
        if not raw.startswith("spark://"):
            raise InvalidArgument(f"cluster mode needs a Spark standalone master (spark://host:port); the Spark "
                                  f"connection's host is {raw or 'empty'!r}.",
                                  remedy="Use mode client for YARN, Kubernetes or local masters.")
        hostport = raw[len("spark://"):].rstrip("/")
        if "," in hostport:
            raise InvalidArgument(f"cluster mode submits to one master; {raw!r} lists several (HA).",
                                  remedy="Point the connection at the active master.")
        name, _, in_host = hostport.partition(":")
        if not name:
            raise InvalidArgument(f"the Spark connection's host {raw!r} names no host.")
        master_port = port or (int(in_host) if in_host.isdigit() else None)
        if not master_port:
            raise InvalidArgument(f"the Spark connection {raw!r} has no port (the master's, 7077 by default).")
        rest_port = extra.get("rest-port", DEFAULT_REST_PORT)
        scheme = str(extra.get("rest-scheme", "http"))
        try:
            rest_port = int(rest_port)
        except (TypeError, ValueError):
            raise InvalidArgument(f"the Spark connection's extra rest-port must be a port number, not "
                                  f"{rest_port!r}.") from None
        if not 0 < rest_port < 65536 or scheme not in ("http", "https"):
            raise InvalidArgument(f"the Spark connection's REST endpoint {scheme}://{name}:{rest_port} is not valid "
                                  "(rest-port 1-65535, rest-scheme http or https).")
        return cls(f"spark://{name}:{master_port}", f"{scheme}://{name}:{rest_port}")


@dataclass(frozen=True)
class DriverStatus:
    """A driver's state as the REST server reports it (``None``: the master does not know the driver)."""

    submission_id: str
    state: str | None
    worker: str | None = None
    message: str = ""

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def failed(self) -> bool:
        return self.state in FAILED_STATES

    @classmethod
    def from_response(  # Any: JSON read back (XCom, a file, a response)
            cls, submission_id: str, body: Mapping[str, Any]) -> DriverStatus:
        state = body.get("driverState") if body.get("success") else None
        message = str(body.get("message") or "")
        if body.get("driverState") and not body.get("success"):
            message = message or str(body.get("driverState"))
        return cls(submission_id, str(state) if state else None, body.get("workerHostPort"), message)


@dataclass(frozen=True)
class PythonSubmission:
    """A Python application for cluster mode: every path must be readable on the worker that runs the driver
    (a shared file system, or a URL the worker can fetch for ``py_files``)."""

    main_py: str
    py_files: Sequence[str] = ()
    app_args: Sequence[str] = ()
    app_name: str = "kip848"
    spark_properties: Mapping[str, str] = field(default_factory=dict)
    environment: Mapping[str, str] = field(default_factory=dict)

    def request(  # Any: JSON of several shapes (XCom, reports)
            self, master: StandaloneMaster, *, spark_version: str, runner_jar: str) -> dict[str, Any]:
        """The body of ``POST /v1/submissions/create``: ``runner_jar`` is Spark's ``spark-core`` jar (it holds
        PythonRunner) as the worker sees it. Secrets never go here: the request is logged by the master."""
        py_files = ",".join(self.py_files)
        props = {"spark.master": master.master_url, "spark.submit.deployMode": "cluster",
                 "spark.app.name": self.app_name, "spark.jars": _uri(runner_jar), "spark.driver.supervise": "false",
                 **({"spark.submit.pyFiles": py_files} if py_files else {}), **dict(self.spark_properties)}
        return {"action": "CreateSubmissionRequest", "appResource": _uri(runner_jar), "mainClass": PYTHON_RUNNER,
                "appArgs": [self.main_py, py_files, *self.app_args], "clientSparkVersion": spark_version,
                "environmentVariables": dict(self.environment), "sparkProperties": props}


def _uri(path: str) -> str:
    return path if "://" in path or path.startswith("file:") else f"file:{path}"


class RestSubmissionClient:
    """Blocking calls to one master's REST server (the trigger runs them in a thread)."""

    def __init__(self, rest_url: str, *, timeout: float = 30.0) -> None:
        if not rest_url.startswith(("http://", "https://")):
            raise InvalidArgument(f"a REST submission URL is http(s)://host:port, not {rest_url!r}.")
        self.rest_url = rest_url.rstrip("/")
        self.timeout = timeout

    def create(self, request: Mapping[str, Any]) -> str:  # Any: JSON of several shapes (XCom, reports)
        """Submit; the driver's submission id (``driver-...``)."""
        body = self._call("POST", "create", json.dumps(request).encode())
        sid = body.get("submissionId")
        if not body.get("success") or not sid:
            raise SparkRestError(f"the master refused the submission: {body.get('message') or body}")
        return str(sid)

    def status(self, submission_id: str) -> DriverStatus:
        return DriverStatus.from_response(submission_id, self._call("GET", f"status/{_id(submission_id)}"))

    def kill(self, submission_id: str) -> bool:
        """Ask the master to kill the driver; True when it accepted the request."""
        return bool(self._call("POST", f"kill/{_id(submission_id)}", b"").get("success"))

    def _call(self, method: str, path: str, data: bytes | None = None) -> dict[str, Any]:
        url = f"{self.rest_url}/v1/submissions/{path}"
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Content-Type": "application/json;charset=UTF-8"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:  # the server answered with an error status: its JSON says why
            text = exc.read()
            try:
                return _json_object(text, url)
            except SparkRestError:
                raise SparkRestError(f"{method} {url} answered HTTP {exc.code}") from exc
        except (OSError, TimeoutError) as exc:
            raise SparkRestUnavailable(f"{method} {url}: {exc}") from exc
        return _json_object(text, url)


def _id(submission_id: str) -> str:
    if not submission_id or "/" in submission_id:
        raise InvalidArgument(f"not a driver submission id: {submission_id!r}")
    return urllib.parse.quote(submission_id)


def _json_object(text: bytes, url: str) -> dict[str, Any]:
    try:
        body = json.loads(text)
    except ValueError:
        raise SparkRestError(f"{url} answered something that is not JSON: {text[:200]!r}") from None
    if not isinstance(body, dict):
        raise SparkRestError(f"{url} answered {body!r}, not a JSON object")
    return body
