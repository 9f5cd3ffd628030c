"""Lint an application's client properties for the protocol it is about to switch to.

The most common failure of a KIP-848 rollout is an application that does not
start: with ``group.protocol=consumer`` the clients reject the classic-only
keys (``partition.assignment.strategy``, ``session.timeout.ms``,
``heartbeat.interval.ms``; librdkafka also ``group.protocol.type``). Others
start but behave differently: assignment moves to the broker, regex
subscriptions are matched by the broker with RE2/J full-match semantics, a
static member restarted while its old instance is alive is fenced. Streams
applications on ``group.protocol=streams`` silently ignore their client-side
standby and session settings (group configs now), the high-availability
assignor's warm-up and probing settings, rack-aware assignment and custom task
assignors; regex subscriptions are not supported, static membership only from
Kafka 4.4 (brokers and Kafka Streams, KAFKA-20169).

Two facts outside the properties matter too, and are judged when given: the
client's release (each protocol has a first production-ready release per
client family, and the Java client's default protocol changes in 5.0), and the
brokers' ``group.consumer.assignors`` (which server-side assignor a client that
names none gets).

Each finding carries the fix; :func:`lint_client_config` is pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

ERROR, WARN, INFO = "error", "warn", "info"
TARGETS = ("consumer", "classic", "streams")
CLIENTS = ("java", "librdkafka")

#: the first production-ready (GA) release of each protocol, per client family
MIN_CLIENT_RELEASE: dict[tuple[str, str], tuple[tuple[int, ...], str]] = {
    ("java", "consumer"): ((4, 0), "the Java consumer 4.0 (KIP-848 is early access in 3.7-3.9)"),
    ("librdkafka", "consumer"): ((2, 12), "librdkafka 2.12.0 / confluent-kafka 2.12.0 (KIP-848 GA)"),
    ("java", "streams"): ((4, 2), "Kafka Streams 4.2 (KIP-1071 GA)"),
}
#: the Java client release whose KafkaConsumer defaults to group.protocol=consumer (KIP-1274)
JAVA_DEFAULT_CONSUMER_PROTOCOL = (5, 0)
#: the classic assignors each client uses when partition.assignment.strategy is not set (the group
#: settles on the first one every member supports: range, for both)
DEFAULT_CLASSIC_ASSIGNORS = {"java": ("range", "cooperative-sticky"), "librdkafka": ("range", "roundrobin")}
#: the brokers' group.consumer.assignors when it cannot be read (the first one is the default)
DEFAULT_SERVER_ASSIGNORS = ("uniform", "range")
#: built-in server assignors named by class in group.consumer.assignors -> the name clients ask for
SERVER_ASSIGNOR_CLASSES = {"org.apache.kafka.coordinator.group.assignor.uniformassignor": "uniform",
                           "org.apache.kafka.coordinator.group.assignor.rangeassignor": "range"}


def server_assignor_names(config_value: str | None) -> tuple[str, ...]:
    """The brokers' ``group.consumer.assignors`` as the names ``group.remote.assignor`` takes (built-ins
    may be listed by name or by class; a custom one keeps the name it is listed by)."""
    names = (a.strip() for a in (config_value or "").split(","))
    return tuple(SERVER_ASSIGNOR_CLASSES.get(n.lower(), n) for n in names if n)
#: Kafka Streams settings the streams protocol does not use: the broker's sticky task assignor has no
#: warm-up tasks, no probing rebalances and no rack awareness, and custom task assignors do not run
STREAMS_UNSUPPORTED_ASSIGNMENT = {
    "acceptable.recovery.lag": "warm-up tasks (high-availability assignor)",
    "max.warmup.replicas": "warm-up tasks (high-availability assignor)",
    "probing.rebalance.interval.ms": "probing rebalances (high-availability assignor)",
    "rack.aware.assignment.tags": "rack-aware task assignment",
    "rack.aware.assignment.strategy": "rack-aware task assignment",
    "rack.aware.assignment.traffic_cost": "rack-aware task assignment",
    "rack.aware.assignment.non_overlap_cost": "rack-aware task assignment",
    "task.assignor.class": "custom task assignors",
}

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

    def to_dict(self) -> dict[str, object]:
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
    client_version: str | None = None,
    broker_assignors: Sequence[str] | None = None,
    current_assignor: str | None = None,
) -> list[LintFinding]:
    """What breaks (errors), changes (warnings) or is worth knowing (info) under ``group.protocol=target``.

    ``client`` is ``java`` or ``librdkafka`` (confluent-kafka and the other
    librdkafka bindings); ``subscription_pattern`` is the application's regex
    subscription, if any; ``client_version`` the client library's release
    (e.g. ``4.1.0``, ``2.12.1``); ``broker_assignors`` the brokers'
    ``group.consumer.assignors`` (read from the cluster); ``current_assignor``
    the classic assignor the group uses now (its protocol name, from a describe).
    """
    if target not in TARGETS:
        raise ValueError(f"target {target!r} is not one of {', '.join(TARGETS)}")
    if client not in CLIENTS:
        raise ValueError(f"client {client!r} is not one of {', '.join(CLIENTS)}")
    release = _parse_release(client_version) if client_version not in (None, "") else None
    props = {k.strip(): str(v).strip() for k, v in properties.items()}
    findings = _lint_release(props, target, client, release)
    if target == "consumer":
        assignors = tuple(broker_assignors) if broker_assignors else None
        return findings + _lint_consumer(props, client, subscription_pattern, assignors, current_assignor)
    if target == "streams":
        return findings + _lint_streams(props, subscription_pattern, release)
    return findings + _lint_classic(props)


def _parse_release(text: str | None) -> tuple[int, ...]:
    m = re.match(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?", str(text))
    if not m:
        raise ValueError(f"client_version {text!r} is not a release like 4.1.0 or 2.12.1")
    return tuple(int(x) for x in m.groups() if x is not None)


def _lint_release(props: dict[str, str], target: str, client: str,
                  release: tuple[int, ...] | None) -> list[LintFinding]:
    """The client release against the protocol's first GA release, and the Java default that moves."""
    findings: list[LintFinding] = []
    if target == "streams" and client != "java":
        findings.append(LintFinding("client", ERROR, "the streams protocol is spoken by Kafka Streams (Java) only",
                                    "Lint the Kafka Streams application's config with client='java'."))
    minimum = MIN_CLIENT_RELEASE.get((client, target))
    shown = ".".join(map(str, release)) if release else None
    if minimum and release is not None and release < minimum[0]:
        findings.append(LintFinding(
            "client.version", ERROR, f"{client} {shown} predates {minimum[1]}",
            f"Upgrade the client to {'.'.join(map(str, minimum[0]))} or later before switching to "
            f"group.protocol={target}."))
    elif minimum and release is None:
        findings.append(LintFinding(
            "client.version", INFO, f"no client release given to the lint: group.protocol={target} needs "
                                    f"{minimum[1]} or later (the preflight's client_release check judges the release "
                                    "each instance runs, read from its log)",
            "Pass client_version to have this configuration's release checked here too."))
    if client == "java" and "group.protocol" not in props and target in ("classic", "consumer"):
        moves = release is not None and release >= JAVA_DEFAULT_CONSUMER_PROTOCOL
        findings.append(LintFinding(
            "group.protocol", ERROR if moves and target == "classic" else WARN,
            "group.protocol is not set: the Java KafkaConsumer defaults to classic before 5.0 and to consumer "
            "from 5.0 on" + (f" (this is {shown})" if shown else ""),
            f"Set group.protocol={target} explicitly, so a client upgrade does not switch protocols by itself."))
    return findings


def _protocol_finding(props: dict[str, str], target: str) -> list[LintFinding]:
    current = props.get("group.protocol", "classic").lower()
    if current == target or ("group.protocol" not in props and target == "classic"):
        return []  # an unset protocol is judged with the client's release (_lint_release)
    return [LintFinding("group.protocol", ERROR, f"group.protocol is {current!r}, not {target!r}",
                        f"Set group.protocol={target}.")]


def _lint_consumer(props: dict[str, str], client: str, pattern: str | None,
                   broker_assignors: tuple[str, ...] | None, current_assignor: str | None) -> list[LintFinding]:
    findings = _protocol_finding(props, "consumer")
    findings += _assignor_findings(props, client, broker_assignors, current_assignor)
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
    if pattern:
        findings.extend(_lint_regex(pattern))
    if props.get("enable.auto.commit", "true").lower() == "true":
        findings.append(LintFinding(
            "enable.auto.commit", INFO,
            "auto-commit with incremental rebalances: revoked partitions are committed per callback, not per poll; "
            "and close()/unsubscribe() retry the final commit for up to the group's session timeout "
            "(consumer.session.timeout.ms, 45 s by default)",
            "If the application commits on revocation itself, test that path; duplicates after the switch usually "
            "come from commits skipped in the revoke callback. Give each instance's shutdown (Kubernetes "
            "terminationGracePeriodSeconds, systemd TimeoutStopSec) at least the session timeout, or the final "
            "commit may be cut off and its records processed again."))
    if props.get("client.rack"):
        findings.append(LintFinding(
            "client.rack", WARN,
            f"client.rack={props['client.rack']}: rack-aware assignment is incomplete under the consumer protocol "
            "(KAFKA-19387): the server-side assignors may not keep partitions in the consumer's rack",
            "If the application relies on rack-local consumption (cross-zone traffic cost, fetch-from-follower), "
            "measure cross-rack fetches after the switch, or keep it on the classic protocol for now."))
    return findings


def _server_assignor(name: str) -> str | None:
    return ASSIGNOR_MAP.get(name.strip().lower())


def _assignor_findings(props: dict[str, str], client: str, broker_assignors: tuple[str, ...] | None,
                       current_assignor: str | None) -> list[LintFinding]:
    """Which server-side assignor takes over from the classic one, and whether the brokers offer it.

    A client that names no ``partition.assignment.strategy`` used its library's default list, whose
    first entry is ``range`` (Java and librdkafka alike); under the consumer protocol it gets the
    brokers' default assignor (the first of ``group.consumer.assignors``, ``uniform`` out of the box)
    unless it sets ``group.remote.assignor``: range semantics (co-partitioned joins rely on them)
    are lost silently.
    """
    findings: list[LintFinding] = []
    offered = broker_assignors or DEFAULT_SERVER_ASSIGNORS
    where = "the brokers' group.consumer.assignors" if broker_assignors else "Kafka's default group.consumer.assignors"
    strategy = props.get("partition.assignment.strategy")
    names = [s.strip() for s in strategy.split(",") if s.strip()] if strategy is not None else []
    if strategy is not None:
        custom = [n for n in names if _server_assignor(n) is None]
        if custom:
            findings.append(LintFinding(
                "partition.assignment.strategy", ERROR,
                f"rejected with group.protocol=consumer, and {', '.join(custom)} is a custom client assignor",
                "Remove it. Client-side assignors do not exist under the consumer protocol: use a server-side "
                "assignor (group.remote.assignor=uniform or range) or a custom server-side one on the brokers "
                "(group.consumer.assignors), or keep this application on the classic protocol."))
            return findings
    today = current_assignor or (names[0] if names else DEFAULT_CLASSIC_ASSIGNORS[client][0])
    equivalent = _server_assignor(today)
    remote = props.get("group.remote.assignor")
    gets = remote or offered[0]
    if strategy is not None:
        findings.append(LintFinding(
            "partition.assignment.strategy", ERROR, "rejected by the client with group.protocol=consumer",
            f"Remove it; the broker assigns partitions. Equivalent server-side assignor: "
            f"group.remote.assignor={equivalent or 'uniform'} (the brokers' default is {offered[0]}). "
            "All server assignors are sticky; rebalance callbacks become incremental."))
    if remote is not None and remote not in offered:
        findings.append(LintFinding(
            "group.remote.assignor", ERROR, f"{remote!r} is not in {where} ({', '.join(offered)})",
            f"Use one of {', '.join(offered)}, or add {remote} to group.consumer.assignors on every broker first."))
    elif equivalent is not None and gets != equivalent:
        findings.append(LintFinding(
            "group.remote.assignor", INFO if remote else WARN,
            f"the group assigns with {today!r} today" + ("" if current_assignor or names else
                                                         f" ({client}'s default when none is set)")
            + f"; under the consumer protocol it gets {gets!r}"
            + ("" if remote else f" (the first of {where})"),
            f"Set group.remote.assignor={equivalent} to keep {equivalent} semantics"
            + ("" if equivalent in offered else f" (add {equivalent} to group.consumer.assignors first)")
            + f", or accept {gets}."))
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


def _lint_streams(props: dict[str, str], pattern: str | None,
                  release: tuple[int, ...] | None = None) -> list[LintFinding]:
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
                "application restarts; the offline streams DAG carries it over)."))
    for key, feature in STREAMS_UNSUPPORTED_ASSIGNMENT.items():
        if key in props:
            findings.append(LintFinding(
                key, ERROR if key == "task.assignor.class" else WARN,
                f"ignored with group.protocol=streams: the broker's sticky task assignor has no {feature}",
                "Remove it; if the application depends on it, keep it on the classic protocol for now."))
    if pattern:
        findings.append(LintFinding(
            "subscription", ERROR, f"pattern subscription {pattern!r}: streams groups do not support regex "
            "source topics", "Name the source topics explicitly, or keep the application on the classic protocol."))
    static = [k for k in ("group.instance.id", "consumer.group.instance.id", "main.consumer.group.instance.id")
              if props.get(k)]
    if static:
        # KAFKA-20169: 4.4 brokers accept static streams members, from Kafka Streams 4.4 clients; older clients
        # refuse the config at start, older brokers answer INVALID_REQUEST (fatal): the preflight judges those
        too_old = release is not None and release < (4, 4)
        findings.append(LintFinding(
            "group.instance.id", ERROR if too_old else WARN,
            ("Kafka Streams before 4.4 refuses static membership with group.protocol=streams at start "
             "(ConfigException)" if too_old else
             "static membership in a streams group needs Kafka Streams 4.4 and 4.4 brokers (KAFKA-20169); each "
             "stream thread joins as <group.instance.id>-<n>"),
            ("Upgrade the application to Kafka Streams 4.4 (and the brokers to 4.4), or remove group.instance.id "
             "from its config." if too_old else
             "Nothing to change on 4.4 brokers with a 4.4 client (the preflight's static_membership check "
             "refuses older brokers); else remove group.instance.id from the application's config.")))
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
