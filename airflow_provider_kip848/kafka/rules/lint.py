"""Lint an application's client properties for the protocol it is about to switch to.

The most common failure of a KIP-848 rollout is an application that does not
start: with ``group.protocol=consumer`` the clients reject the classic-only
keys (``partition.assignment.strategy``, ``session.timeout.ms``,
``heartbeat.interval.ms``; librdkafka also ``group.protocol.type``). Others
start but behave differently: assignment moves to the broker, regex
subscriptions are matched by the broker with RE2/J full-match semantics, a
static member restarted while its old instance is alive is fenced. Streams
applications on ``group.protocol=streams`` silently ignore their client-side
standby and session settings: those are group configs now.

Each finding carries the fix; :func:`lint_client_config` is pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

ERROR, WARN, INFO = "error", "warn", "info"
TARGETS = ("consumer", "classic", "streams")

#: classic client assignors -> the server-side assignor that replaces them
ASSIGNOR_MAP = {
    "range": "range",
    "org.apache.kafka.clients.consumer.rangeassignor": "range",
    "roundrobin": "uniform",
    "org.apache.kafka.clients.consumer.roundrobinassignor": "uniform",
    "sticky": "uniform",
    "org.apache.kafka.clients.consumer.stickyassignor": "uniform",
    "cooperative-sticky": "uniform",
    "org.apache.kafka.clients.consumer.cooperativestickyassignor": "uniform",
}


@dataclass(frozen=True)
class LintFinding:
    key: str
    severity: str
    message: str
    fix: str

    def to_dict(self) -> dict:
        return asdict(self)


def parse_properties(text: str) -> dict[str, str]:
    """A ``.properties`` file (``key=value`` or ``key: value``, ``#``/``!`` comments) as a dict."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^=:\s]+)\s*[=:]?\s*(.*)$", line)
        if m:
            props[m.group(1)] = m.group(2).strip()
    return props


def load_properties(source: Mapping[str, object] | str | Path) -> dict[str, str]:
    """Properties from a mapping, a path to a .properties file, or properties text."""
    if isinstance(source, Mapping):
        return {str(k): str(v) for k, v in source.items()}
    path = Path(str(source))
    if "\n" not in str(source) and path.suffix == ".properties" and path.is_file():
        return parse_properties(path.read_text())
    return parse_properties(str(source))


def lint_client_config(
    properties: Mapping[str, object],
    target: str,
    *,
    client: str = "java",
    subscription_pattern: str | None = None,
) -> list[LintFinding]:
    """What breaks (errors), changes (warnings) or is worth knowing (info) under ``group.protocol=target``.

    ``client`` is ``java`` or ``librdkafka`` (confluent-kafka and the other
    librdkafka bindings); ``subscription_pattern`` is the application's regex
    subscription, if any.
    """
    if target not in TARGETS:
        raise ValueError(f"target {target!r} is not one of {', '.join(TARGETS)}")
    props = {k.strip(): str(v).strip() for k, v in properties.items()}
    if target == "consumer":
        return _lint_consumer(props, client, subscription_pattern)
    if target == "streams":
        return _lint_streams(props)
    return _lint_classic(props)


def _protocol_finding(props: dict[str, str], target: str) -> list[LintFinding]:
    current = props.get("group.protocol", "classic").lower()
    if current == target:
        return []
    return [LintFinding("group.protocol", ERROR, f"group.protocol is {current!r}, not {target!r}",
                        f"Set group.protocol={target}.")]


def _lint_consumer(props: dict[str, str], client: str, pattern: str | None) -> list[LintFinding]:
    findings = _protocol_finding(props, "consumer")
    strategy = props.get("partition.assignment.strategy")
    if strategy is not None:
        names = [s.strip() for s in strategy.split(",") if s.strip()]
        mapped = {ASSIGNOR_MAP.get(n.lower()) for n in names}
        if None in mapped:
            custom = [n for n in names if n.lower() not in ASSIGNOR_MAP]
            findings.append(LintFinding(
                "partition.assignment.strategy", ERROR,
                f"rejected with group.protocol=consumer, and {', '.join(custom)} is a custom client assignor",
                "Remove it. Client-side assignors do not exist under the consumer protocol: use a server-side "
                "assignor (group.remote.assignor=uniform or range) or a custom server-side one on the brokers "
                "(group.consumer.assignors), or keep this application on the classic protocol."))
        else:
            server = "range" if mapped == {"range"} else "uniform"
            findings.append(LintFinding(
                "partition.assignment.strategy", ERROR, "rejected by the client with group.protocol=consumer",
                f"Remove it; the broker assigns partitions. Equivalent server-side assignor: "
                f"group.remote.assignor={server}" + (" (uniform is the default)" if server == "uniform" else "")
                + ". All server assignors are sticky; rebalance callbacks become incremental."))
    for key, group_config in (("session.timeout.ms", "consumer.session.timeout.ms"),
                              ("heartbeat.interval.ms", "consumer.heartbeat.interval.ms")):
        if key in props:
            findings.append(LintFinding(
                key, ERROR, "rejected by the client with group.protocol=consumer (the broker owns it now)",
                f"Remove it; to keep {props[key]} ms set the group config {group_config}={props[key]} "
                "(KafkaGroupConfigOperator, bounded by the broker's group.consumer.min/max settings)."))
    if client == "librdkafka" and "group.protocol.type" in props:
        findings.append(LintFinding("group.protocol.type", ERROR, "rejected by librdkafka with group.protocol=consumer",
                                    "Remove it."))
    if "group.instance.id" in props:
        findings.append(LintFinding(
            "group.instance.id", WARN,
            "static membership: a new member reusing a group.instance.id that is still alive is fenced with "
            "UNRELEASED_INSTANCE_ID (fatal), where classic fenced the old one",
            "Restart instances with a graceful shutdown and never run two with the same id; after a crash wait "
            "for the session timeout (or remove the member) before restarting."))
    if "group.remote.assignor" in props and props["group.remote.assignor"] not in ("uniform", "range"):
        findings.append(LintFinding("group.remote.assignor", WARN,
                                    f"{props['group.remote.assignor']!r} must exist on the brokers "
                                    "(group.consumer.assignors)", "Check the brokers' group.consumer.assignors."))
    if pattern:
        findings.extend(_lint_regex(pattern))
    if props.get("enable.auto.commit", "true").lower() == "true":
        findings.append(LintFinding(
            "enable.auto.commit", INFO,
            "auto-commit with incremental rebalances: revoked partitions are committed per callback, not per poll",
            "If the application commits on revocation itself, test that path; duplicates after the switch usually "
            "come from commits skipped in the revoke callback."))
    return findings


def _lint_regex(pattern: str) -> list[LintFinding]:
    findings = [LintFinding(
        "subscription", WARN,
        f"regex subscription {pattern!r} is evaluated by the broker with RE2/J full-match semantics",
        "Write it as a full match of the topic name (e.g. 'orders-.*', not '^orders'); RE2/J has no "
        "backreferences or lookarounds.")]
    if pattern.startswith("^") or pattern.endswith("$"):
        findings.append(LintFinding("subscription", INFO, "anchors are redundant under full-match semantics",
                                    "Drop ^ and $."))
    if re.search(r"[^.\]\)]\*", pattern) and ".*" not in pattern:
        findings.append(LintFinding(
            "subscription", ERROR,
            f"{pattern!r} uses '*' as a wildcard; as a full-match regex it matches far fewer topics",
            "Use '.*' for 'anything' (e.g. 'topic.*'); '^topic*' no longer matches 'topic-1'."))
    for lookaround in ("(?=", "(?!", "(?<=", "(?<!"):
        if lookaround in pattern:
            findings.append(LintFinding("subscription", ERROR, f"{lookaround} is not supported by RE2/J",
                                        "Rewrite the pattern without lookarounds."))
    return findings


def _lint_streams(props: dict[str, str]) -> list[LintFinding]:
    findings = _protocol_finding(props, "streams")
    ignored = {
        "num.standby.replicas": "streams.num.standby.replicas",
        "session.timeout.ms": "streams.session.timeout.ms",
        "consumer.session.timeout.ms": "streams.session.timeout.ms",
        "main.consumer.session.timeout.ms": "streams.session.timeout.ms",
        "heartbeat.interval.ms": "streams.heartbeat.interval.ms",
        "consumer.heartbeat.interval.ms": "streams.heartbeat.interval.ms",
        "main.consumer.heartbeat.interval.ms": "streams.heartbeat.interval.ms",
    }
    for key, group_config in ignored.items():
        if key in props:
            findings.append(LintFinding(
                key, WARN, "silently ignored with group.protocol=streams",
                f"Set the group config {group_config}={props[key]} instead (KafkaGroupConfigOperator, before the "
                "application restarts)."))
    if "group.instance.id" in props or "consumer.group.instance.id" in props:
        findings.append(LintFinding("group.instance.id", ERROR,
                                    "streams groups reject static membership before Kafka 4.4",
                                    "Remove group.instance.id from the application's config."))
    for key in ("partition.assignment.strategy", "consumer.partition.assignment.strategy"):
        if key in props:
            findings.append(LintFinding(key, WARN, "ignored: the broker assigns tasks in streams groups",
                                        "Remove it."))
    if props.get("processing.guarantee", "at_least_once") == "at_least_once":
        findings.append(LintFinding(
            "processing.guarantee", INFO,
            "at_least_once: records processed after the last commit before the stop are processed again after "
            "the switch (only committed offsets survive the conversion)",
            "Stop the application cleanly (it commits on close) and expect duplicates only up to commit.interval.ms."))
    return findings


def _lint_classic(props: dict[str, str]) -> list[LintFinding]:
    findings = _protocol_finding(props, "classic")
    if "group.remote.assignor" in props:
        findings.append(LintFinding("group.remote.assignor", WARN, "ignored by the classic protocol",
                                    "Set partition.assignment.strategy (e.g. cooperative-sticky) if you need a "
                                    "specific client-side assignor."))
    if "group.instance.id" in props:
        findings.append(LintFinding("group.instance.id", INFO,
                                    "static membership under classic: a restarted instance fences the old one",
                                    "Nothing to change."))
    return findings
