"""Where the Kafka CLI tools come from: an installed Kafka, or the provider's Maven-resolved jars.

A worker that has a Kafka release unpacked (``kafka_home``, the directory
holding ``bin/`` and ``libs/``) runs the tools from its ``libs/``. Otherwise
the provider resolves the jars of ``version`` from Maven Central once into its
cache (:mod:`.distribution`) and runs them from there, which is also how the
embedded test broker gets its jars.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from airflow_provider_kip848.kafka import errors
from airflow_provider_kip848.kafka.cli.distribution import (
    DEFAULT_KAFKA_VERSION,
    KAFKA_TOOLS,
    TOOL_JVM_OPTIONS,
    KafkaDistribution,
    tool_main_class_in,
)
from airflow_provider_kip848.kafka.cli.java import find_java


class KafkaTools:
    """The command line of a Kafka CLI tool.

    ``kafka_home``: a Kafka installation (the release tarball unpacked; its
    ``libs/`` is the classpath). Otherwise the provider's own Maven-resolved
    jars of ``version``, fetched on first use.
    """

    def __init__(self, kafka_home: str | Path | None = None, version: str | None = None) -> None:
        self.kafka_home = Path(kafka_home).expanduser() if kafka_home else None
        self.version = version or DEFAULT_KAFKA_VERSION

    def __repr__(self) -> str:
        return f"KafkaTools(kafka_home={str(self.kafka_home) if self.kafka_home else None!r}, version={self.version!r})"

    def command(self, tool: str, args: list[str]) -> list[str]:
        """The argument list (never a shell string) that runs ``tool`` with ``args``."""
        if tool not in KAFKA_TOOLS:
            raise errors.KafkaToolError(f"Unknown Kafka tool {tool!r}.",
                                        remedy=f"Use one of {', '.join(sorted(KAFKA_TOOLS))}.")
        try:
            if self.kafka_home is None:
                dist = KafkaDistribution(self.version)
                dist.ensure()
                return dist.tool_command(tool, args)
            libs = self.kafka_home / "libs"
            if not libs.is_dir():
                raise errors.KafkaToolError(
                    f"{self.kafka_home} has no libs/ directory.",
                    remedy="Point kafka_home at an unpacked Kafka release (the directory that holds bin/ and libs/).",
                )
            log_config = resources.files(__package__).joinpath("resources/tools-log4j2.properties")
            return [find_java().executable, "-Djava.awt.headless=true",
                    f"-Dlog4j2.configurationFile={log_config}", *TOOL_JVM_OPTIONS,
                    "-cp", str(libs / "*"), tool_main_class_in(libs, tool, KAFKA_TOOLS[tool]), *args]
        except errors.Kip848Error as exc:
            if isinstance(exc, errors.KafkaToolError):
                raise
            raise errors.KafkaToolError(f"The Kafka CLI tools cannot run here: {exc.what}", remedy=exc.remedy) from exc
