"""Errors of the embedded local Kafka launcher.

Each says, on one line, what is wrong with this machine or this request and
what to do about it: the launcher is the first thing a new user runs, so a
Java stack trace or a silent hang would be the worst possible first contact.
"""

from __future__ import annotations

from airflow_provider_kip848.kafka.errors import Kip848Error


class LocalKafkaError(Kip848Error):
    """Base class of the launcher's errors."""


class JavaNotFoundError(LocalKafkaError):
    remedy = (
        "Install a JDK 17 or newer (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless; "
        "macOS: brew install openjdk@17) or point JAVA_HOME at one."
    )


class MavenNotFoundError(LocalKafkaError):
    remedy = (
        "Install Apache Maven 3.6+ (Debian/Ubuntu: apt-get install maven; macOS: brew install maven) "
        "or set KIP848_MVN to the mvn executable. Maven is only needed the first time, to fetch the Kafka jars."
    )


class ArtifactResolutionError(LocalKafkaError):
    remedy = (
        "Check that Maven Central (or the mirror in ~/.m2/settings.xml) is reachable and that the "
        "Kafka version exists there, then run the command again."
    )


class UnsupportedKafkaVersion(LocalKafkaError):
    remedy = "Use a Kafka 4.x release, for example 4.3.1 (the default) or 4.2.1."


class PortInUseError(LocalKafkaError):
    remedy = "Stop whatever listens there, choose another port, or pass port 0 to let the launcher pick free ports."


class BrokerStartError(LocalKafkaError):
    remedy = "Read the broker log named above; fix the cause and start again."


class BrokerNotRunning(LocalKafkaError):
    remedy = "Start it first: python -m airflow_provider_kip848.local kafka start"


class ToolError(LocalKafkaError):
    """A Kafka CLI tool exited non-zero; ``returncode``/``stderr`` keep its own words."""

    remedy = "Read the tool's message above."

    def __init__(self, what: str, *, returncode: int, stdout: str, stderr: str, remedy: str | None = None):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(what, remedy=remedy)
