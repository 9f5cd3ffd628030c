"""What a local Kafka node runs: the Kafka jars from Maven Central and, with metrics, the Prometheus JMX exporter.

The jars come from the provider's own :class:`~airflow_provider_kip848.kafka.cli.distribution.KafkaDistribution`
(the CLI backend needs the same jars in production): resolved once into the cache (``KIP848_CACHE_DIR``) and
reused by every broker, tool and Streams application after that. The exporter's agent jar is cached beside them
(:mod:`~kip848_harness.jmx_exporter`). Here: resolving both before a start (and saying whether anything was
fetched), the java command line of a node, and Kafka's CLI tools pointed at a running cluster.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_kip848.kafka.cli.distribution import CLUSTER_TOOLS, KafkaDistribution, tail_lines
from kip848_harness.errors import ToolError
from kip848_harness.jmx_exporter import EXPORTER_CONFIG, JmxExporterAgent

BROKER_MAIN_CLASS = "kafka.Kafka"


@dataclass(frozen=True)
class ResolvedJars:
    """What resolving the jars before a start cost: seconds, and whether any jar was fetched (not cached)."""

    seconds: float
    fetched: bool


def resolve_jars(distribution: KafkaDistribution, exporter: JmxExporterAgent, *, with_agent: bool) -> ResolvedJars:
    """The Kafka jars, and the exporter's agent when a node runs with metrics, in the cache (fetched if not)."""
    kafka = distribution.ensure()
    if not with_agent:
        return ResolvedJars(kafka.seconds, kafka.fetched)
    agent = exporter.ensure()
    return ResolvedJars(kafka.seconds + agent.seconds, kafka.fetched or agent.fetched)


def exporter_jvm_options(exporter: JmxExporterAgent, config_path: Path, host: str,
                         metrics_port: int | None) -> list[str]:
    """The JVM option that starts the Prometheus JMX exporter on ``metrics_port`` (none without a port); writes
    the exporter's config to ``config_path`` when it differs."""
    if not metrics_port:
        return []
    exporter.ensure()  # cached after the first start: a file check
    if not config_path.is_file() or config_path.read_text() != EXPORTER_CONFIG:
        config_path.write_text(EXPORTER_CONFIG)
    return [exporter.jvm_option(host, metrics_port, config_path)]


def broker_command(distribution: KafkaDistribution, config_path: Path, jvm_options: Sequence[str]) -> list[str]:
    """The java command line of one node (``kafka.Kafka server.properties``), with the broker's log4j config."""
    return distribution.java_command(BROKER_MAIN_CLASS, [str(config_path)], log_config="broker",
                                     jvm_options=list(jvm_options))


def tool_command(distribution: KafkaDistribution, tool: str, args: Sequence[str], bootstrap_servers: str) -> list[str]:
    """Argument list for a Kafka CLI tool; adds ``--bootstrap-server`` for cluster tools if absent."""
    argv = list(args)
    name = tool.removesuffix(".sh")
    if name in CLUSTER_TOOLS and not any(
        a in ("--bootstrap-server", "--bootstrap-controller") or a.startswith("--bootstrap-server=")
        for a in argv
    ):
        argv = ["--bootstrap-server", bootstrap_servers, *argv]
    return distribution.tool_command(name, argv)


def run_tool(cmd: list[str], tool: str, args: Sequence[str], *, timeout: float,
             check: bool) -> subprocess.CompletedProcess[str]:
    """Run a tool's command line; with ``check``, a non-zero exit raises :class:`ToolError` with its last lines."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        message = tail_lines(proc.stderr or proc.stdout, 3)
        raise ToolError(
            f"{tool} {' '.join(args)} exited {proc.returncode}: {message}",
            returncode=proc.returncode,
            stdout=proc.stdout,
            stderr=proc.stderr,
        )
    return proc


__all__ = ["BROKER_MAIN_CLASS", "ResolvedJars", "broker_command", "exporter_jvm_options", "resolve_jars",
           "run_tool", "tool_command"]
