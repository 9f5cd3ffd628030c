"""Run a Kafka CLI tool safely: an argument list, a private ``--command-config`` file, a timeout.

Three rules the runner enforces:

* never a shell string: the command is a list, so group ids and config values
  cannot be interpreted by a shell;
* secrets never on argv: client security settings (the SASL password lives in
  ``sasl.jaas.config``) go to a ``--command-config`` properties file in a
  private temporary directory (mode 0700, file 0600) deleted afterwards;
* every failure is a specific exception: the tools often exit 0 after printing
  ``Error: ...``, so the output is inspected, not just the exit code.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_kip848.kafka import errors
from airflow_provider_kip848.kafka.cli.tools import KafkaTools
from airflow_provider_kip848.kafka.settings import ClientSettings, java_properties_text, redact


@dataclass(frozen=True)
class ToolResult:
    tool: str
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return f"{self.stdout}\n{self.stderr}"


class KafkaToolRunner:
    """Runs tools against the cluster of ``settings`` and maps their failures to this provider's errors."""

    def __init__(self, settings: ClientSettings, tools: KafkaTools | None = None, timeout: float = 120.0) -> None:
        self.settings = settings
        self.tools = tools or KafkaTools()
        self.timeout = timeout

    def run(self, tool: str, args: list[str], *, files: dict[str, str] | None = None) -> ToolResult:
        """Run ``tool`` with ``--bootstrap-server`` and ``--command-config`` added; raise on any failure.

        ``files`` are extra private files (name -> content), e.g. a CSV for
        ``--from-file``; an argument that is exactly ``{name}`` becomes that file's path.
        """
        workdir = Path(tempfile.mkdtemp(prefix="kip848-cli-"))  # mode 0700
        try:
            config = workdir / "client.properties"
            _write_private(config, java_properties_text(self.settings.java_client_properties()))
            paths = {}
            for name, content in (files or {}).items():
                paths[name] = str(workdir / name)
                _write_private(workdir / name, content)
            final_args = [paths.get(a[1:-1], a) if a.startswith("{") and a.endswith("}") else a for a in args]
            cmd = self.tools.command(
                tool,
                ["--bootstrap-server", self.settings.bootstrap_servers, "--command-config", str(config), *final_args],
            )
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout,
                                      stdin=subprocess.DEVNULL, env=tool_environment(self.settings))
            except subprocess.TimeoutExpired as exc:
                raise errors.OperationTimedOut(
                    f"{tool} {' '.join(args)} did not finish within {self.timeout:.0f} s "
                    f"against {self.settings.bootstrap_servers}."
                ) from exc
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        result = ToolResult(tool, tuple(args), proc.returncode, proc.stdout, proc.stderr)
        raise_for_tool_errors(result, self.settings)
        return result


def tool_environment(settings: ClientSettings) -> dict[str, str]:
    """The worker's environment minus what the tools must not inherit: Airflow connection variables
    (``AIRFLOW_CONN_*`` hold the connection's password) and any variable holding one of the secrets."""
    secrets = [s for s in (settings.sasl_password, settings.ssl_key_password) if s]
    return {k: v for k, v in os.environ.items()
            if not k.startswith("AIRFLOW_CONN_") and not any(secret in v for secret in secrets)}


def _write_private(path: Path, content: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(content)


_CAUSE_RE = re.compile(r"(?:Caused by: |due to )(?:[\w.$]+\.)?(?P<cls>\w+(?:Exception|Error)): (?P<msg>[^\n]*)")
# "Can not <action> <feature> to <level>. ..." is kafka-features' refusal with the controller's reason
_ERROR_LINE_RE = re.compile(r"^(?:Error: |Error while executing |Could not |Can not |\* Group )(?P<msg>.*)$", re.M)


_REQUEST_DUMP_RE = re.compile(r"Request Request\(processor=.*\)\)\) ")


def tool_message(result: ToolResult) -> str:
    """The one line that says what went wrong, in the tool's own words (minus request dumps)."""
    # the request dump goes before any cut to length, or a cut inside it would keep it
    output = _REQUEST_DUMP_RE.sub("The request ", result.output)
    causes = list(_CAUSE_RE.finditer(output))
    if causes:
        last = causes[-1]
        return f"{last.group('cls')}: {last.group('msg').strip()}"
    lines = [m.group(0).strip() for m in _ERROR_LINE_RE.finditer(output)]
    if lines:
        return " ".join(lines)[:500]
    tail = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    return tail[-1][:500] if tail else f"exit code {result.returncode}"


def raise_for_tool_errors(result: ToolResult, settings: ClientSettings) -> None:
    """Raise the specific error a failed tool run means (tools often exit 0 after printing an error)."""
    out = result.output
    failed = (
        result.returncode != 0
        or re.search(r"^Error", result.stdout, re.M)
        or ("Exception" in result.stderr and "Caused by" in result.stderr)
        or re.search(r"^Could not ", out, re.M)
    )
    if not failed:
        return
    message = redact(f"{result.tool}: {tool_message(result)}", settings)
    if "SaslAuthenticationException" in out or "AuthenticationException" in out:
        raise errors.AuthenticationFailed(f"{message.rstrip('.')} (brokers at {settings.bootstrap_servers})")
    refused = re.search(r"(Cluster|Group|Topic|TransactionalId)AuthorizationException", out)
    resource_type = refused.group(1).upper() if refused else None
    permission = re.search(r"needs (\w+) permission", out)
    if permission:
        resource_type = "CLUSTER" if result.tool == "kafka-features" else resource_type
        raise errors.AuthorizationFailed(
            message, remedy=f"Grant the principal {permission.group(1)} on {resource_type or 'the resource'} "
                            "(an ACL), or use a connection with more rights.",
            resource_type=resource_type)
    if refused or "AuthorizationException" in out or "not authorized" in out.lower():
        raise errors.AuthorizationFailed(message, resource_type=resource_type)
    if re.search(r"GroupIdNotFoundException: Group .* is not a \w+ group", out):
        raise errors.WrongGroupType(message)
    if "GroupIdNotFoundException" in out or re.search(r"Consumer group '.*' does not exist", out):
        raise errors.GroupNotFound(message)
    if "GroupNotEmptyException" in out or "NonEmptyGroup" in out:
        raise errors.GroupNotEmpty(message)
    if "Unknown group config name" in out:
        raise errors.ConfigUnknown(message)
    if "InvalidConfigurationException" in out or "InvalidConfigException" in out:
        raise errors.ConfigOutOfBounds(message)
    if result.tool == "kafka-features" and re.search(r"Could not|Can not |InvalidUpdateVersion", out):
        if re.search(r"[Tt]imed out|TimeoutException", out):
            # kafka-features prints "Could not/Can not <action> <feature> ..." whatever the cause: a call that
            # timed out is the cluster not answering (retriable), not a level the controller refused
            raise _timeout_or_tool_error(out, message, settings)
        raise errors.InvalidFeatureLevel(message,  # the tool prints the controller's reason: "Can not downgrade ..."
                                         remedy="Read the controller's reason above: kafka-features describe shows the "
                                           "finalized levels and the range each broker supports; a metadata.version "
                                           "downgrade is refused where it could lose metadata.")
    if "Could not match any topic-partitions" in out or "UnknownTopicOrPartitionException" in out:
        raise errors.UnknownTopicOrPartition(message)
    if "UnsupportedVersionException" in out:
        raise errors.UnsupportedBrokerVersion(message)
    raise _timeout_or_tool_error(out, message, settings)


def _timeout_or_tool_error(out: str, message: str, settings: ClientSettings) -> errors.Kip848Error:
    if re.search(r"Timed out waiting for a node assignment|Timed out waiting to send the call", out):
        # the Java admin client never reached a broker: the same error the native backend raises
        return errors.KafkaConnectionError(f"{message.rstrip('.')} (no broker at {settings.bootstrap_servers} answered "
                                           f"within {settings.request_timeout_ms} ms).")
    if "TimeoutException" in out or re.search(r"[Tt]imed out", out):
        return errors.OperationTimedOut(message)
    return errors.KafkaToolError(message)
