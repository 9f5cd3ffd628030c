"""The instances' own logs read through their controller and scanned for the client errors a migration causes.

A wait that fails on a count ("2 of 3 live") or on the platform's word ("EXITED") says what happened, not why:
why is in the client's log (UNRELEASED_INSTANCE_ID, a topic the principal may not read). This reads each
instance's recent log through :meth:`~airflow_provider_kip848.controllers.NamedController.logs` (bounded in
bytes and time per instance, and in time for all of them) and hands the lines newer than the instance's mark
(the last lines before the start or roll, kept in the baseline as ``log_marks``) to the core's scanner
(:mod:`airflow_provider_kip848.kafka.rules.client_errors`). It runs where the platform is already asked (the
platform watch's looks, a failure's message), never on the broker's poll path.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_kip848.controllers import ApplicationStatus, NamedController
from airflow_provider_kip848.kafka.rules.client_errors import (
    ClientErrorFinding,
    after_mark,
    describe_findings,
    scan_lines,
)

#: how much of each instance's log a scan reads (its newest bytes)
LOG_SCAN_BYTES = 32_768
#: one instance's read
LOG_READ_TIMEOUT_S = 10.0
#: every instance's reads of one scan together: a platform that answers slowly costs a look this at most
LOG_SCAN_BUDGET_S = 20.0
#: how much of a failed instance's log its failure quotes: its newest lines, within these bytes
LAST_LINES, LAST_LINES_BYTES = 8, 2048


@dataclass(frozen=True)
class ClientErrors:
    """What one scan found: the ``findings`` per instance, the instances whose log could not be read
    (``unread``: name -> why) and how many were read."""

    findings: tuple[ClientErrorFinding, ...] = ()
    unread: tuple[tuple[str, str], ...] = ()
    read: int = 0

    @property
    def fatal(self) -> tuple[ClientErrorFinding, ...]:
        return tuple(f for f in self.findings if f.fatal)

    def describe(self) -> str:
        """The findings per instance in the client's words (and the logs not read), "" when there is nothing."""
        parts = []
        if self.findings:
            parts.append("The clients logged: " + describe_findings(self.findings))
        if self.unread and self.findings:
            parts.append("Logs not read: " + "; ".join(f"{n} ({why})" for n, why in self.unread))
        return ". ".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {"findings": [f.to_dict() for f in self.findings], "unread": dict(self.unread), "read": self.read}


def baseline_instances(baseline: Mapping[str, object] | None) -> tuple[list[str], dict[str, list[str]]]:
    """The instances of a baseline (the start's or roll's status) and their log marks."""
    status = ApplicationStatus.from_dict(baseline)
    names = [i.name for i in status.instances] if status is not None else []
    raw = (baseline or {}).get("log_marks")
    marks = ({str(k): [str(x) for x in v] for k, v in raw.items() if isinstance(v, list)}
             if isinstance(raw, Mapping) else {})
    return names, marks


def read_client_errors(named: NamedController, instances: Sequence[str],
                       marks: Mapping[str, Sequence[str]] | None = None, *, max_bytes: int = LOG_SCAN_BYTES,
                       timeout_s: float = LOG_READ_TIMEOUT_S, budget_s: float = LOG_SCAN_BUDGET_S) -> ClientErrors:
    """Each instance's log read (the lines after its mark) and scanned; an instance past the budget is unread."""
    if not named.can_read_logs():
        return ClientErrors()
    started = time.monotonic()
    findings: list[ClientErrorFinding] = []
    unread: list[tuple[str, str]] = []
    read = 0
    for name in instances:
        left = budget_s - (time.monotonic() - started)
        if left <= 0.5:
            unread.append((name, f"the scan's {budget_s:g} s were spent"))
            continue
        log = named.logs(name, max_bytes=max_bytes, timeout_s=min(timeout_s, left))
        if not log.known:
            unread.append((name, log.reason))
            continue
        read += 1
        findings.extend(scan_lines(name, after_mark(log.lines, (marks or {}).get(name))))
    return ClientErrors(tuple(findings), tuple(unread), read)


def last_log_lines(named: NamedController, instances: Sequence[str], *,
                   timeout_s: float = LOG_READ_TIMEOUT_S) -> str:
    """The newest lines of each instance's log (at most ``LAST_LINES``, ``LAST_LINES_BYTES``; redacted, as every
    :class:`~airflow_provider_kip848.controllers.InstanceLog`), where they were read, for a failure that names the
    instance: why a process exited is in its last words, which no scan of known client errors may catch. A log
    that cannot be read is said so with why; "" when the controller reads no logs or nothing was logged."""
    if not named.can_read_logs():
        return ""
    parts = []
    for name in instances:
        log = named.logs(name, max_bytes=LAST_LINES_BYTES, timeout_s=timeout_s)
        if not log.known:
            parts.append(f"the log of {name} was not read ({log.reason})")
        elif log.lines:
            parts.append(f"The last lines of {name}'s log ({log.source}): " + " | ".join(log.lines[-LAST_LINES:]))
    return "; ".join(parts)


__all__ = ["LAST_LINES", "LAST_LINES_BYTES", "LOG_READ_TIMEOUT_S", "LOG_SCAN_BUDGET_S", "LOG_SCAN_BYTES",
           "ClientErrors", "baseline_instances", "last_log_lines", "read_client_errors"]
