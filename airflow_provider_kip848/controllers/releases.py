"""The client release each running instance prints at start, read through its controller's logs.

The controller task (``KafkaApplicationControllerOperator``) asks this once, before the approval: for every
instance the platform reports running, the instance's log from its start (``logs(from_start=True)``; a
platform that keeps no start offers its newest lines) is read and
:func:`~airflow_provider_kip848.kafka.rules.client_release.release_from_log` names the client library and
release it printed. The preflight then falls back, per instance, to the controller's config and the run's
Params (:func:`~airflow_provider_kip848.kafka.rules.client_release.resolve_releases`) and judges the result.

Bounded: one read per running instance, at most :data:`LOG_BYTES` and :data:`LOG_SECONDS` each (a Java
client's ``Kafka version:`` line follows its config dump, a few kilobytes into the log). A log that was not
read is an instance whose log says nothing, with the controller's reason.
"""

from __future__ import annotations

from airflow_provider_kip848.controllers.named import NamedController
from airflow_provider_kip848.controllers.protocol import ApplicationStatus
from airflow_provider_kip848.kafka.rules.client_release import release_from_log

#: how much of an instance's log is read, from its start
LOG_BYTES = 65536
#: how long one instance's log read may take
LOG_SECONDS = 20.0


def logged_releases(named: NamedController, status: ApplicationStatus) -> list[dict[str, object]] | None:
    """One entry per running instance: ``{instance, library, version, streams, evidence, reason, source,
    releases_seen}`` (``version`` None: its log names none, or was not read, ``reason`` says why). None when
    the platform cannot say which instances run (nothing to pair a log with)."""
    if not status.known:
        return None
    readable = named.can_read_logs()
    out: list[dict[str, object]] = []
    for instance in status.running:
        if not readable:
            out.append({"instance": instance.name, "library": None, "version": None,
                        "reason": f"controller {named.name!r} does not read instance logs", "source": ""})
            continue
        log = named.logs(instance.name, max_bytes=LOG_BYTES, from_start=True, timeout_s=LOG_SECONDS)
        if not log.known:
            out.append({"instance": instance.name, "library": None, "version": None,
                        "reason": f"its log was not read: {log.reason}", "source": log.source})
            continue
        found = release_from_log(log.lines)
        reason = found.reason + (" in the part read (the log was cut)" if found.version is None and log.truncated
                                 else "")
        out.append({"instance": instance.name, "library": found.library, "version": found.version,
                    "streams": found.streams, "evidence": found.evidence, "reason": reason, "source": log.source,
                    "releases_seen": list(found.releases_seen)})
    return out


__all__ = ["LOG_BYTES", "LOG_SECONDS", "logged_releases"]
