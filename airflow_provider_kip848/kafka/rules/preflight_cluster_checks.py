"""The preflight's cluster-wide checks: the brokers' releases and configs, the protocols enabled, and the
feature levels a change would finalize, lower or disable. Facts in, one :class:`~.preflight_model.Check` out;
pure."""

from __future__ import annotations

import re

from airflow_provider_kip848.kafka.model import GROUP_APIS, FeatureUpdate
from airflow_provider_kip848.kafka.rules.features import FEATURE_GROUP_TYPES, describe_dependents, refuse_dependents
from airflow_provider_kip848.kafka.rules.preflight_model import (
    FAIL,
    FEATURE_BOOTSTRAP_METADATA,
    PASS,
    WARN,
    Check,
    PreflightFacts,
    release_tuple,
)


def check_broker_version(facts: PreflightFacts, minimum: str, declared: str | None, *, streams: bool) -> Check:
    releases = sorted({b.release for b in facts.brokers})
    seen = ", ".join(f"broker {b.node_id}: {b.release} (metadata.version up to {b.metadata_version_max})"
                     for b in facts.brokers)
    need = "4.2.1" if streams else minimum
    too_old = [b for b in facts.brokers if release_tuple(b.release) < release_tuple(minimum)]
    if too_old:
        return Check("broker_version", FAIL, seen, f"Upgrade every broker to Kafka {need} or newer first.")
    if len(releases) > 1:
        return Check("broker_version", FAIL if streams else WARN, f"mixed releases: {seen}",
                     "Finish the rolling broker upgrade before migrating groups.")
    if declared and not declared.startswith(releases[0] + "."):
        return Check("broker_version", FAIL, f"declared {declared}, but the brokers report {releases[0]} ({seen})",
                     "Correct declared_broker_version to the release the brokers run.")
    if streams and releases[0] == "4.2":
        if declared is None:
            return Check("broker_version", FAIL,
                         f"{seen}; 4.2.0 and 4.2.1 cannot be told apart over the protocol",
                         "Migrating a classic group to a streams group on 4.2.0 can make the group unloadable "
                         "after __consumer_offsets compaction (KAFKA-20254, fixed in 4.2.1). Read each broker's own "
                         "release: the line 'Kafka version: X' its log prints at start-up, or the JMX attribute "
                         "'version' of kafka.server:type=app-info (kafka-broker-api-versions --version prints the "
                         "tool's version, not the broker's), then pass declared_broker_version='4.2.1' (or later).")
        if release_tuple(declared) < (4, 2, 1):
            return Check("broker_version", FAIL, f"declared {declared}",
                         "Do not migrate to a streams group on Kafka 4.2.0 (KAFKA-20254): upgrade to 4.2.1+ first.")
    detail = f"{seen}" + (f"; declared {declared}" if declared else "")
    return Check("broker_version", PASS, detail)


def check_protocol_enabled(facts: PreflightFacts, protocol: str) -> Check:
    protocols = facts.coordinator.rebalance_protocols
    evidence = f"group.coordinator.rebalance.protocols={','.join(protocols)} (broker {facts.coordinator.broker_id})"
    if protocol in protocols:
        return Check("protocol_enabled", PASS, evidence)
    return Check("protocol_enabled", FAIL, evidence,
                 f"Add {protocol} to group.coordinator.rebalance.protocols on every broker (rolling restart); "
                 "until then members get UNSUPPORTED_VERSION.")


#: the broker settings a group's protocol, migration and bounds depend on: they must be the same on every
#: broker, since a group follows whichever broker coordinates it (its __consumer_offsets partition's leader)
MUST_AGREE = re.compile(
    r"^group\.(coordinator\.rebalance\.protocols|consumer\.migration\.policy|max\.size"
    r"|(min|max)\.session\.timeout\.ms"
    r"|(classic|consumer|streams|share)\.(max\.size|assignors|(min\.|max\.)?(session\.timeout\.ms|heartbeat\.interval\.ms)"
    r"|(max\.)?num\.standby\.replicas))$")


def check_brokers_agree(facts: PreflightFacts) -> Check:
    """Every broker has the same group settings; brokers that disagree (a config change rolling out, or
    applied to some brokers only) fail, naming each broker's value. During a rolling broker upgrade a setting
    the newer release introduced is unset on the older brokers (4.4.0 has group.streams.assignors, 4.3.1 not):
    that is no disagreement but the upgrade itself, which warns, naming each broker's release."""
    configs = facts.coordinators
    unread = sorted({b.node_id for b in facts.brokers} - {c.broker_id for c in configs})
    if unread:
        return Check("brokers_agree", FAIL, f"the group.* configs of broker(s) {', '.join(map(str, unread))} were "
                     f"not read (read: {', '.join(str(c.broker_id) for c in configs)})",
                     "Read every broker's configs (DESCRIBE_CONFIGS on the cluster) and rerun.")
    release = {b.node_id: b.release for b in facts.brokers}
    mixed = len(set(release.values())) > 1

    def who(broker: int) -> str:
        return f"broker {broker} ({release[broker]})" if mixed and broker in release else f"broker {broker}"

    keys = sorted({k for c in configs for k in c.values if MUST_AGREE.match(k)})
    differing = {k: {c.broker_id: c.values.get(k) for c in configs} for k in keys
                 if len({c.values.get(k) for c in configs}) > 1}
    newer_only = {k: v for k, v in differing.items() if mixed and _newer_release_only(v, release)}
    conflicts = {k: v for k, v in differing.items() if k not in newer_only}
    releases = "; releases: " + ", ".join(f"broker {b}: {r}" for b, r in sorted(release.items())) if mixed else ""
    if conflicts:
        evidence = "; ".join(f"{k}: " + ", ".join(f"{who(b)} = {'(unset)' if v is None else v}"
                                                 for b, v in sorted(values.items()))
                             for k, values in conflicts.items())
        return Check("brokers_agree", FAIL, evidence + releases,
                     "The brokers disagree: a config change is still rolling out, or was applied to some brokers "
                     "only. A group follows whichever broker coordinates it, so its protocol, migration policy and "
                     "bounds would depend on where its coordinator lands. Finish the change on every broker, then "
                     "rerun.")
    agreed = f"{len(configs)} broker(s) agree on {len(keys) - len(newer_only)} group setting(s)"
    if not newer_only:
        return Check("brokers_agree", PASS, agreed + releases)
    only = "; ".join(f"{k} = {next(v for v in values.values() if v is not None)} only on "
                     + ", ".join(who(b) for b, v in sorted(values.items()) if v is not None)
                     for k, values in newer_only.items())
    return Check("brokers_agree", WARN, f"{agreed}; mixed releases during a broker upgrade: {only}{releases}",
                 "Those settings exist only in the newer release: they apply where the group's coordinator runs "
                 "it. Finish the rolling broker upgrade, then rerun to judge every broker on one release.")


def _newer_release_only(values: dict[int, str | None], release: dict[int, str]) -> bool:
    """The brokers that have the setting agree on it and all run a newer release than every broker without it."""
    having = {b for b, v in values.items() if v is not None}
    lacking = set(values) - having
    if not lacking or len({values[b] for b in having}) != 1 or not (having | lacking) <= set(release):
        return False
    return min(release_tuple(release[b]) for b in having) > max(release_tuple(release[b]) for b in lacking)


def check_features_agree(facts: PreflightFacts, feature: str | None = None, level: int | None = None) -> Check | None:
    """Every broker knows the same finalized feature levels (each broker's own ApiVersions answer), and, for a
    level to finalize, every broker supports it: in a cluster of two releases the newer brokers support levels the
    older do not (share.version 2 on 4.4.0, not on 4.3.1), and the controller refuses a level one broker lacks.
    A broker whose features were not read is unknown: it fails. None: no broker's features were read at all."""
    brokers = sorted(facts.brokers, key=lambda b: b.node_id)
    if not any(b.supported_features for b in brokers):
        return None
    name = {b.node_id: f"broker {b.node_id} ({b.release})" for b in brokers}
    unread = [name[b.node_id] for b in brokers if not b.supported_features]
    if unread:
        return Check("features_agree", FAIL, f"the features of {', '.join(unread)} were not read",
                     "Every broker must answer ApiVersions (v3 or later) with its features; rerun when it does.")
    finalized = sorted({f for b in brokers for f in b.finalized_features})
    split = {f: {b.node_id: b.finalized_features.get(f, 0) for b in brokers} for f in finalized
             if len({b.finalized_features.get(f, 0) for b in brokers}) > 1}
    if split:
        return Check("features_agree", FAIL, "the brokers disagree on finalized feature levels: " + "; ".join(
            f"{f}: " + ", ".join(f"{name[b]} = {v}" for b, v in sorted(levels.items()))
            for f, levels in split.items()),
            "A feature change has not reached every broker yet, or a broker lags the metadata log (fenced, cut off "
            "from the controllers). A group's protocol would depend on where its coordinator lands: wait until every "
            "broker reports the same levels (kafka-features describe against each), then rerun.")
    if feature is not None and level is not None:
        ranges = {b.node_id: b.supported_features.get(feature) for b in brokers}
        short = {b: r for b, r in ranges.items() if r is None or not r[0] <= level <= r[1]}
        if short:
            seen = ", ".join(f"{name[b]}: " + (f"{r[0]}..{r[1]}" if r else "unknown feature")
                             for b, r in sorted(ranges.items()))
            return Check("features_agree", FAIL,
                         f"{feature}={level} is not supported by every broker ({seen})",
                         f"The controller finalizes a level only when every broker supports it. Finish the rolling "
                         f"broker upgrade (every broker on a release that supports {feature}={level}), then rerun.")
    releases = sorted({b.release for b in brokers})
    return Check("features_agree", PASS,
                 f"{len(brokers)} broker(s) report the same finalized levels"
                 + (f" (releases {', '.join(releases)})" if len(releases) > 1 else ""))


#: what each move needs from the address its clients bootstrap from: the heartbeat of the target protocol, and
#: its describe where the provider itself goes through that address (its waits describe the group)
CLIENT_APIS = {"consumer": (68, 69), "streams": (88, 89)}


def check_client_apis(facts: PreflightFacts, target: str) -> Check | None:
    """The address(es) the applications' clients bootstrap from advertise the target protocol's heartbeat. A proxy
    or gateway in front of the brokers that does not forward it (Conduktor Gateway: KIP-848 support off by default)
    leaves it out of its ApiVersions answer, and a client on the new protocol dies with UnsupportedVersionException
    although every broker serves it. An address that gave no list of APIs is unknown: it fails too."""
    if facts.client_apis is None or target not in CLIENT_APIS:
        return None
    heartbeat, describe = CLIENT_APIS[target]
    unknown = [a for a in facts.client_apis if a.error is not None]
    missing = {a.address: a.missing((heartbeat, describe) if a.provider_uses else (heartbeat,))
               for a in facts.client_apis if a.error is None}
    missing = {k: v for k, v in missing.items() if v}
    addresses = ", ".join(a.address for a in facts.client_apis)
    if unknown:
        return Check("client_apis", FAIL, "; ".join(f"{a.address} {a.error}" for a in unknown),
                     "Nothing is known of what the clients would be offered there, so the move is not judged safe. "
                     "Check that the connection's client_bootstrap_servers names the address the applications use "
                     "and that it answers Kafka's ApiVersions request, then rerun.")
    if missing:
        evidence = "; ".join(f"{address} does not advertise "
                             + ", ".join(f"{GROUP_APIS[k]} (API key {k})" for k in keys)
                             for address, keys in missing.items())
        return Check("client_apis", FAIL, evidence,
                     f"Something between the clients and the brokers (a proxy or gateway) does not forward the "
                     f"{target} protocol: a client with group.protocol={target} would fail with "
                     f"UnsupportedVersionException ('The node does not support {_const(GROUP_APIS[heartbeat])}'), "
                     "although the brokers serve it. Enable those APIs in the proxy (or point the applications at "
                     "the brokers and set client_bootstrap_servers accordingly), then rerun.")
    return Check("client_apis", PASS, f"{addresses} advertise(s) {GROUP_APIS[heartbeat]} (API key {heartbeat})")


def _const(name: str) -> str:
    """``ConsumerGroupHeartbeat`` as the Java client's ApiKeys constant ``CONSUMER_GROUP_HEARTBEAT``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def check_feature_finalized(facts: PreflightFacts, feature: str) -> Check:
    level = facts.features.level(feature)
    evidence = f"{feature} finalized at {level}"
    if level >= 1:
        return Check("feature_finalized", PASS, evidence)
    return Check("feature_finalized", FAIL, evidence,
                 f"Finalize it first: kafka-features upgrade --feature {feature}=1 (the kafka_enable_streams_protocol "
                 "DAG or KafkaFeatureOperator); the protocol is silently unavailable until then.")


def check_feature_enable(facts: PreflightFacts, feature: str, level: int) -> Check:
    if feature not in facts.features:
        return Check("feature_level", FAIL, f"{feature} is not known to this cluster",
                     "Upgrade the brokers to a release that supports it.")
    info = facts.features[feature]
    if info.finalized_level == level:
        return Check("feature_level", PASS, f"{feature} already finalized at {level}; nothing to do")
    if not info.supported_min <= level <= info.supported_max:
        return Check("feature_level", FAIL,
                     f"{feature}={level} not in supported range {info.supported_min}..{info.supported_max}",
                     "Upgrade the brokers first.")
    evidence = f"{feature} can go {info.finalized_level} -> {level}"
    bootstrap = FEATURE_BOOTSTRAP_METADATA.get((feature, level))
    mv = facts.features.level("metadata.version")
    if bootstrap and mv < bootstrap[0]:
        # not a dependency (the controller accepts the level, shown on a real broker at 4.1-IV1): the
        # metadata.version at which a newly formatted cluster has it on by default
        evidence += (f" (metadata.version is at level {mv}, below {bootstrap[1]}, where it is on by default; "
                     "the controller validates the change in the dry run before it is applied)")
    return Check("feature_level", PASS, evidence)


def check_feature_downgrade(facts: PreflightFacts, feature: str, level: int) -> Check:
    current = facts.features.level(feature)
    if level >= current:
        return Check("dependent_groups", PASS, f"{feature} is at {current}; nothing is lowered")
    update = FeatureUpdate(feature, "disable" if level == 0 else "downgrade", current, level, True, noop=False,
                           applied=False, message="")
    refusal = refuse_dependents(update, facts.dependent_groups)
    if refusal is None:
        return Check("dependent_groups", PASS,
                     f"no {FEATURE_GROUP_TYPES[feature].value} group exists; {feature} can go {current} -> {level}")
    return Check("dependent_groups", FAIL, refusal.what, refusal.remedy)


def check_feature_disable(facts: PreflightFacts, feature: str, level: int) -> list[Check]:
    """``feature_level`` (known, lower, supported) and ``dependent_groups``: a group of the type the feature
    enables with members (or whose members cannot be counted) fails; empty ones warn, named."""
    if feature not in facts.features:
        return [Check("feature_level", FAIL, f"{feature} is not known to this cluster",
                      "Check the feature name and the brokers' release.")]
    info = facts.features[feature]
    current = info.finalized_level
    if level == current:
        return [Check("feature_level", PASS, f"{feature} is already at {current}; nothing to do")]
    if level > current:
        return [Check("feature_level", FAIL, f"{feature} is at {current}; level {level} would raise it",
                      "Raise a feature with the kafka_enable_streams_protocol DAG.")]
    if level != 0 and not info.supported_min <= level <= info.supported_max:
        return [Check("feature_level", FAIL,
                      f"{feature}={level} not in supported range {info.supported_min}..{info.supported_max}",
                      "Choose a supported level, or 0 to disable it.")]
    checks = [Check("feature_level", PASS, f"{feature} can go {current} -> {level}")]
    gtype = FEATURE_GROUP_TYPES[feature].value
    groups = facts.dependent_groups
    busy = {g: n for g, n in groups.items() if n != 0}
    if busy:
        unknown = sorted(g for g, n in busy.items() if n < 0)
        checks.append(Check(
            "dependent_groups", FAIL,
            f"{len(busy)} {gtype} group(s) with members{' (count unknown)' if unknown else ''}: "
            + describe_dependents(busy),
            f"Their members would fail at their next heartbeat (UNSUPPORTED_VERSION). Stop those applications "
            f"(or move them off the {gtype} protocol) and wait until their groups are Empty, then rerun."
            + (f" The members of {', '.join(repr(g) for g in unknown)} cannot be counted here: a group is "
               "never taken for empty on a guess." if unknown else "")))
    elif groups:
        checks.append(Check(
            "dependent_groups", WARN,
            f"{len(groups)} empty {gtype} group(s) stay: {describe_dependents(groups)}",
            f"While {feature} is below 1 they are still listed, but cannot be described and nobody can join them "
            f"(UNSUPPORTED_VERSION); raising {feature} again brings them back. Delete the ones no longer needed "
            "first (kip1071_delete_streams_group for streams groups)."))
    else:
        checks.append(Check("dependent_groups", PASS, f"no {gtype} group exists"))
    return checks
