"""Refuse a migration that would fail, before anything changes: checks over facts read from the cluster.

The broker decides whether a group may convert (GroupMetadataManager): the
protocol must be enabled and its feature finalized; an online classic ->
consumer upgrade is refused (fatal ``GROUP_ID_NOT_FOUND`` in the clients)
when the migration policy forbids it, when the group is larger than
``group.consumer.max.size`` or when any member's assignment carries
``userData`` (a custom client assignor); a streams application can only take
over an *empty* classic group, and a 4.2.0 broker can lose such a group after
compaction (KAFKA-20254). Each of those is a check here, with the evidence
read from the cluster and the remedy.

:func:`~airflow_provider_kip848.kafka.api.read_preflight_facts` reads (one
backend call per fact); :func:`run_preflight` judges, purely, so every rule
is unit-testable on recorded facts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

from airflow_provider_kip848.kafka.errors import InvalidArgument, InvalidGroupId
from airflow_provider_kip848.kafka.model import (
    BrokerVersion,
    ClusterFeatures,
    ConsumerGroupDescription,
    FeatureUpdate,
    GroupCoordinatorConfig,
    GroupListing,
    GroupType,
    StreamsGroupDescription,
)
from airflow_provider_kip848.kafka.rules.features import (
    FEATURE_GROUP_TYPES,
    describe_dependents,
    refuse_dependents,
)
from airflow_provider_kip848.kafka.rules.lint import ASSIGNOR_MAP, server_assignor_names

#: the DAG that migrates a consumer group offline, named by remedies when the online path is refused
OFFLINE_CONSUMER_DAG = "kip848_consumer_offline_migration"

MODES = {
    "classic_to_consumer": "online upgrade of a classic group to the consumer protocol (KIP-848)",
    "consumer_to_classic": "online rollback of a consumer group to the classic protocol",
    "classic_to_consumer_offline": ("offline migration of a classic group to the consumer protocol (stop every "
                                    "instance, Empty, restart): when the online upgrade is refused"),
    "consumer_to_classic_offline": "offline rollback of a consumer group to the classic protocol",
    "classic_to_streams": ("offline migration of a Kafka Streams application's classic group to a streams group "
                           "(KIP-1071)"),
    "streams_to_classic": ("offline rollback of a Kafka Streams application's streams group to the classic "
                           "protocol (an empty streams group converts on the first classic join)"),
    "enable_feature": "finalize a feature level (group.version or streams.version)",
    "downgrade_feature": ("lower or disable group.version, streams.version or share.version (refused while groups "
                          "of that type exist)"),
    "disable_feature": ("lower or disable group.version, streams.version or share.version under approval (the "
                        "kafka_disable_group_feature DAG): refused while a group of that type has members or its "
                        "members cannot be counted; empty ones are listed (warn): they stay, unusable until the "
                        "feature is raised again"),
    "delete_streams_group": ("delete an empty streams group (the kip1071_delete_streams_group DAG): refused for "
                             "another type or a group with members"),
}
PASS, WARN, FAIL = "pass", "warn", "fail"
#: the protocol each group mode moves to
TARGET_PROTOCOL = {"classic_to_consumer": "consumer", "consumer_to_classic": "classic",
                   "classic_to_consumer_offline": "consumer", "consumer_to_classic_offline": "classic",
                   "classic_to_streams": "streams", "streams_to_classic": "classic"}
#: the modes that stop every instance first (the group converts while empty, under every policy)
OFFLINE_MODES = frozenset({"classic_to_consumer_offline", "consumer_to_classic_offline", "classic_to_streams",
                           "streams_to_classic"})

#: the rebalance protocol a feature serves (share groups are governed by share.version alone: the brokers'
#: group.coordinator.rebalance.protocols does not list them)
FEATURE_PROTOCOL = {"group.version": "consumer", "streams.version": "streams"}
#: the metadata.version at which a newly formatted cluster has a feature level on by default (Kafka's
#: "bootstrap" metadata version). Not a dependency: none of these levels depends on metadata.version, and
#: the controller finalizes them on older metadata (verified on the real broker); the preflight says so.
FEATURE_BOOTSTRAP_METADATA = {("group.version", 1): (22, "4.0-IV0"), ("streams.version", 1): (29, "4.2-IV1"),
                              ("share.version", 1): (28, "4.2-IV0")}
BUILTIN_CLASSIC_ASSIGNORS = frozenset({"range", "roundrobin", "sticky", "cooperative-sticky"})


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    evidence: str
    remedy: str = ""


@dataclass(frozen=True)
class PreflightReport:
    mode: str
    group_id: str | None
    checks: tuple[Check, ...]

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status == FAIL)

    @property
    def warnings(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status == WARN)

    @property
    def passed(self) -> bool:
        return not self.failures

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def to_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "group_id": self.group_id, "passed": self.passed,
                "failures": [c.name for c in self.failures], "warnings": [c.name for c in self.warnings],
                "checks": [asdict(c) for c in self.checks]}

    def render_text(self) -> str:
        head = f"Preflight {self.mode} for {self.group_id or 'the cluster'}: " + (
            "PASSED" if self.passed else f"FAILED ({len(self.failures)} check(s))")
        lines = [head]
        for c in self.checks:
            lines.append(f"  [{c.status.upper():4}] {c.name}: {c.evidence}")
            if c.remedy and c.status != PASS:
                lines.append(f"         -> {c.remedy}")
        return "\n".join(lines)


@dataclass(frozen=True)
class PreflightFacts:
    brokers: tuple[BrokerVersion, ...]
    features: ClusterFeatures
    coordinator: GroupCoordinatorConfig
    listing: GroupListing | None = None
    description: ConsumerGroupDescription | StreamsGroupDescription | None = None
    user_data: dict[str, bytes] = field(default_factory=dict)
    #: downgrade_feature: every group of the type the feature enables -> its member count
    dependent_groups: dict[str, int] = field(default_factory=dict)
    #: the application's declared source topics -> partition count (None: the topic does not exist)
    source_topics: dict[str, int | None] = field(default_factory=dict)
    #: the topics the group has committed offsets on (what the application consumed until now)
    committed_topics: tuple[str, ...] = ()
    #: every broker's group.* configs (``coordinator`` is one of them); not given: ``coordinator``'s alone
    coordinators: tuple[GroupCoordinatorConfig, ...] = ()
    #: the group's own (dynamic) group configs, read whether or not the group exists (Kafka keeps them after the
    #: group is deleted, KAFKA-20236); None: not read (``group_configs_error`` says why when reading failed)
    group_configs: dict[str, str | None] | None = None
    group_configs_error: str | None = None
    #: whether the group has committed offsets (read for an existing group without members); None: not read
    group_has_offsets: bool | None = None

    def __post_init__(self) -> None:
        if not self.coordinators:
            object.__setattr__(self, "coordinators", (self.coordinator,))

    def for_group(self, listing: GroupListing | None,
                  description: ConsumerGroupDescription | StreamsGroupDescription | None,
                  user_data: dict[str, bytes] | None = None) -> PreflightFacts:
        """These cluster-wide facts with one group's: the brokers, features and coordinator configs
        are read once for a whole fleet (an inventory) and each group judged against them, without
        a request per group."""
        return replace(self, listing=listing, description=description, user_data=dict(user_data or {}))


def run_preflight(
    facts: PreflightFacts,
    mode: str,
    *,
    group_id: str | None = None,
    declared_broker_version: str | None = None,
    expect_empty: bool | None = None,
    feature: str | None = None,
    feature_level: int | None = None,
    rollback: str | None = None,
    source_topics: Sequence[str] | None = None,
) -> PreflightReport:
    """Judge the facts for ``mode``; ``expect_empty`` (offline modes) defaults to True.

    ``source_topics``: the streams application's source topics (streams modes), checked to exist
    (a missing one leaves the streams group NOT_READY) and against what the group consumed so far
    (a topology change does not belong in a protocol migration).

    ``rollback``: ``"fail"`` or ``"warn"`` when the run offers an online rollback (the rolling
    upgrade's Reject/timeout branch restarts the instances on the classic protocol while others are
    still on the new one), judged against the broker's migration policy; None when it offers none.
    """
    if mode not in MODES:
        raise InvalidArgument(f"unknown preflight mode {mode!r}.", remedy=f"Use one of {', '.join(MODES)}.")
    if rollback not in (None, FAIL, WARN):
        raise InvalidArgument(f"rollback must be 'fail', 'warn' or None, not {rollback!r}.")
    checks: list[Check] = []
    if mode == "enable_feature":
        if not feature:
            raise InvalidArgument("mode enable_feature needs a feature.",
                                  remedy="Pass feature (e.g. streams.version) and feature_level.")
        level = 1 if feature_level is None else int(feature_level)
        checks.append(_broker_version(facts, "4.2" if feature == "streams.version" else "4.0",
                                      declared_broker_version, streams=feature == "streams.version"))
        checks.append(_feature_enable(facts, feature, level))
        if feature in FEATURE_PROTOCOL and level >= 1:
            # a finalized feature alone does not serve the protocol: the brokers must list it too
            checks.append(_protocol_enabled(facts, FEATURE_PROTOCOL[feature]))
            checks.append(_brokers_agree(facts))
        return PreflightReport(mode, group_id, tuple(checks))
    if mode == "downgrade_feature":
        if feature not in FEATURE_GROUP_TYPES:
            raise InvalidArgument(f"mode downgrade_feature needs feature group.version, streams.version or "
                                  f"share.version, not {feature!r}.")
        checks.append(_feature_downgrade(facts, feature, 0 if feature_level is None else int(feature_level)))
        return PreflightReport(mode, group_id, tuple(checks))
    if mode == "disable_feature":
        if feature not in FEATURE_GROUP_TYPES:
            raise InvalidArgument(f"mode disable_feature needs feature group.version, streams.version or "
                                  f"share.version, not {feature!r}.")
        checks += _feature_disable(facts, feature, 0 if feature_level is None else int(feature_level))
        return PreflightReport(mode, group_id, tuple(checks))
    if mode == "delete_streams_group":
        if not group_id:
            raise InvalidGroupId(f"mode {mode} needs a group_id; got {group_id!r}.")
        return PreflightReport(mode, group_id, _deletable_streams_group(facts, group_id))
    if not group_id:
        raise InvalidGroupId(f"mode {mode} needs a group_id; got {group_id!r}.")
    checks += _group_checks(facts, mode, group_id, declared_broker_version, expect_empty, rollback, source_topics)
    return PreflightReport(mode, group_id, tuple(checks))


def _group_checks(facts: PreflightFacts, mode: str, group_id: str, declared_broker_version: str | None,
                  expect_empty: bool | None, rollback: str | None, source_topics: Sequence[str] | None) -> list[Check]:
    """The checks of a mode that moves one group between protocols, in the order a person reads them."""
    checks: list[Check] = []
    streams = mode in ("classic_to_streams", "streams_to_classic")
    target = TARGET_PROTOCOL[mode]
    checks.append(_broker_version(facts, "4.2" if streams else "4.0", declared_broker_version,
                                  streams=mode == "classic_to_streams"))
    checks.append(_protocol_enabled(facts, target))
    checks.append(_brokers_agree(facts))
    if target in ASSIGNMENT_INTERVAL:
        checks.append(_assignment_epochs(facts, target))
    if target == "consumer":
        checks.append(_feature_finalized(facts, "group.version"))
    elif mode == "classic_to_streams":
        checks.append(_feature_finalized(facts, "streams.version"))
    checks.append(_group_type(facts, group_id, mode))
    desc = facts.description
    members = len(desc.members) if desc is not None else 0
    if mode in ("classic_to_consumer", "consumer_to_classic"):
        checks.append(_migration_policy(facts, mode, members))
    if mode == "classic_to_consumer" and rollback is not None:
        checks.append(_rollback_policy(facts, rollback))
    if mode == "classic_to_consumer":
        checks.append(_custom_assignor(facts))
        checks.append(_group_size(facts, "group.consumer.max.size", members))
        checks.append(_static_members_online(facts))
    if target == "consumer":
        checks.append(_assignor_mapping(facts))
    if mode == "classic_to_streams":
        checks.append(_group_size(facts, "group.streams.max.size", members))
        checks.append(_static_members_streams(facts))
    if mode in ("classic_to_streams", "streams_to_classic") and source_topics is not None:
        checks.append(_source_topics(facts, list(source_topics)))
        if mode == "classic_to_streams":
            checks.append(_topology_unchanged(facts, group_id, list(source_topics)))
    if mode in OFFLINE_MODES:
        checks.append(_group_empty(facts, True if expect_empty is None else expect_empty, target))
    if facts.group_configs is not None or facts.group_configs_error is not None:
        checks.append(_inherited_group_configs(facts, group_id))
    return checks


# -- checks ----------------------------------------------------------------------


def _release_tuple(release: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in release.split("."))
    except ValueError:
        return (0,)


def _broker_version(facts: PreflightFacts, minimum: str, declared: str | None, *, streams: bool) -> Check:
    releases = sorted({b.release for b in facts.brokers})
    seen = ", ".join(f"broker {b.node_id}: {b.release} (metadata.version up to {b.metadata_version_max})"
                     for b in facts.brokers)
    need = "4.2.1" if streams else minimum
    too_old = [b for b in facts.brokers if _release_tuple(b.release) < _release_tuple(minimum)]
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
        if _release_tuple(declared) < (4, 2, 1):
            return Check("broker_version", FAIL, f"declared {declared}",
                         "Do not migrate to a streams group on Kafka 4.2.0 (KAFKA-20254): upgrade to 4.2.1+ first.")
    detail = f"{seen}" + (f"; declared {declared}" if declared else "")
    return Check("broker_version", PASS, detail)


def _protocol_enabled(facts: PreflightFacts, protocol: str) -> Check:
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


def _brokers_agree(facts: PreflightFacts) -> Check:
    """Every broker has the same group settings; brokers that disagree (a config change rolling out, or
    applied to some brokers only) fail, naming each broker's value."""
    configs = facts.coordinators
    unread = sorted({b.node_id for b in facts.brokers} - {c.broker_id for c in configs})
    if unread:
        return Check("brokers_agree", FAIL, f"the group.* configs of broker(s) {', '.join(map(str, unread))} were "
                     f"not read (read: {', '.join(str(c.broker_id) for c in configs)})",
                     "Read every broker's configs (DESCRIBE_CONFIGS on the cluster) and rerun.")
    keys = sorted({k for c in configs for k in c.values if MUST_AGREE.match(k)})
    differing = {k: {c.broker_id: c.values.get(k) for c in configs} for k in keys
                 if len({c.values.get(k) for c in configs}) > 1}
    if not differing:
        return Check("brokers_agree", PASS, f"{len(configs)} broker(s) agree on {len(keys)} group setting(s)")
    evidence = "; ".join(f"{k}: " + ", ".join(f"broker {b} = {'(unset)' if v is None else v}"
                                             for b, v in sorted(values.items()))
                         for k, values in differing.items())
    return Check("brokers_agree", FAIL, evidence,
                 "The brokers disagree: a config change is still rolling out, or was applied to some brokers only. "
                 "A group follows whichever broker coordinates it, so its protocol, migration policy and bounds "
                 "would depend on where its coordinator lands. Finish the change on every broker, then rerun.")


def _feature_finalized(facts: PreflightFacts, feature: str) -> Check:
    level = facts.features.level(feature)
    evidence = f"{feature} finalized at {level}"
    if level >= 1:
        return Check("feature_finalized", PASS, evidence)
    return Check("feature_finalized", FAIL, evidence,
                 f"Finalize it first: kafka-features upgrade --feature {feature}=1 (the kafka_enable_streams_protocol "
                 "DAG or KafkaFeatureOperator); the protocol is silently unavailable until then.")


def _feature_enable(facts: PreflightFacts, feature: str, level: int) -> Check:
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


def _feature_downgrade(facts: PreflightFacts, feature: str, level: int) -> Check:
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


def _feature_disable(facts: PreflightFacts, feature: str, level: int) -> list[Check]:
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


def _deletable_streams_group(facts: PreflightFacts, group_id: str) -> tuple[Check, ...]:
    """``group_type`` (a streams group; absent: nothing to delete, warned) and ``group_empty`` (no member)."""
    listing, desc = facts.listing, facts.description
    if listing is None:
        return (Check("group_type", WARN, f"group {group_id!r} does not exist: nothing to delete",
                      "If another group was meant, fix the group id."),)
    if listing.type is not GroupType.STREAMS:
        return (Check("group_type", FAIL, f"a {listing.type.value} group ({listing.state})",
                      "This deletes streams groups only; other groups: kafka-consumer-groups --delete."),)
    checks = [Check("group_type", PASS, f"streams group ({listing.state})")]
    if desc is None:
        checks.append(Check("group_empty", FAIL, "the group's members cannot be read (StreamsGroupDescribe refused)",
                            "Finalize streams.version=1 so the group can be described, then rerun."))
    elif desc.members:
        checks.append(Check(
            "group_empty", FAIL, f"{len(desc.members)} active member(s), state {desc.state}",
            "A group with members cannot be deleted. Stop every instance of the application and wait for Empty "
            "(streams groups reject LeaveGroup: members leave when they close, or at streams.session.timeout.ms)."))
    else:
        checks.append(Check("group_empty", PASS, f"no members ({desc.state})"))
    return tuple(checks)


#: mode -> the group type it moves from (checked further) and the type that means "already done"
_MODE_TYPES: dict[str, tuple[GroupType, GroupType, str]] = {
    "classic_to_consumer": (GroupType.CLASSIC, GroupType.CONSUMER, "already a consumer group: nothing to migrate"),
    "classic_to_consumer_offline": (GroupType.CLASSIC, GroupType.CONSUMER,
                                    "already a consumer group: nothing to migrate"),
    "consumer_to_classic": (GroupType.CONSUMER, GroupType.CLASSIC, "already a classic group: nothing to roll back"),
    "consumer_to_classic_offline": (GroupType.CONSUMER, GroupType.CLASSIC,
                                    "already a classic group: nothing to roll back"),
    "classic_to_streams": (GroupType.CLASSIC, GroupType.STREAMS, "already a streams group: nothing to migrate"),
    "streams_to_classic": (GroupType.STREAMS, GroupType.CLASSIC, "already a classic group: nothing to roll back"),
}


def _group_type(facts: PreflightFacts, group_id: str, mode: str) -> Check:
    listing, desc = facts.listing, facts.description
    if listing is None:
        return Check("group_type", WARN, f"group {group_id!r} does not exist",
                     "If the id is right, members joining with the new protocol create the new group type directly "
                     "and there is nothing to migrate; otherwise fix the group id.")
    source, done, done_text = _MODE_TYPES[mode]
    gtype = listing.type
    if gtype is done:
        classic = len(desc.classic_members) if isinstance(desc, ConsumerGroupDescription) and \
            done is GroupType.CONSUMER else 0
        if classic:
            return Check("group_type", WARN, f"already a consumer group with {classic} classic member(s) left "
                         "(a migration in progress)", "Roll the remaining classic members.")
        return Check("group_type", PASS, done_text)
    if gtype is source:
        if source is GroupType.CLASSIC and TARGET_PROTOCOL[mode] == "consumer" and \
                listing.protocol_type not in ("consumer", ""):
            return Check("group_type", FAIL, f"classic group with protocol type {listing.protocol_type!r}",
                         "Only groups of protocol type 'consumer' can move to the consumer protocol "
                         "(Connect and other embedded protocols cannot).")
        return Check("group_type", PASS, f"{gtype.value} group ({listing.state})")
    if mode == "classic_to_streams" and gtype is GroupType.CONSUMER:
        return Check("group_type", FAIL, "a consumer (KIP-848) group",
                     "An empty consumer group is not converted to a streams group by the broker: roll it back "
                     "to classic first (consumer_to_classic), then migrate.")
    return Check("group_type", FAIL, f"a {gtype.value} group", f"Mode {mode} does not apply to {gtype.value} groups.")


def _migration_policy(facts: PreflightFacts, mode: str, members: int) -> Check:
    policy = facts.coordinator.migration_policy or "bidirectional"
    allowed = {"classic_to_consumer": ("bidirectional", "upgrade"),
               "consumer_to_classic": ("bidirectional", "downgrade")}[mode]
    evidence = f"group.consumer.migration.policy={policy}"
    if policy in allowed:
        return Check("migration_policy", PASS, evidence)
    if members == 0:
        return Check("migration_policy", PASS, f"{evidence}; the group is empty, and empty groups convert under "
                     "every policy")
    return Check("migration_policy", FAIL, f"{evidence} forbids an online "
                 f"{'upgrade' if mode == 'classic_to_consumer' else 'downgrade'}",
                 f"Set group.consumer.migration.policy to {' or '.join(allowed)} on the brokers, or migrate offline "
                 f"with the {OFFLINE_CONSUMER_DAG} DAG (stop all members, Empty, restart them with the new "
                 "protocol: an empty group converts under every policy).")


def _rollback_policy(facts: PreflightFacts, severity: str) -> Check:
    """Can the rollback branch work? Rolling instances back to classic while others already speak the
    consumer protocol is an online downgrade, which only ``bidirectional`` and ``downgrade`` allow."""
    policy = facts.coordinator.migration_policy or "bidirectional"
    evidence = f"group.consumer.migration.policy={policy}"
    if policy in ("bidirectional", "downgrade"):
        return Check("rollback_policy", PASS, f"{evidence}: an online rollback to classic is allowed")
    return Check("rollback_policy", severity,
                 f"{evidence} disables the online downgrade: the rollback branch (restart the instances with "
                 "group.protocol=classic one by one) would be refused while any instance still runs the consumer "
                 "protocol",
                 "Set group.consumer.migration.policy=bidirectional on the brokers before the rollout, or plan the "
                 "way back offline (stop every instance, wait for Empty, restart on classic: an empty group "
                 "converts under every policy).")


def _custom_assignor(facts: PreflightFacts) -> Check:
    desc = facts.description
    classic = facts.listing is not None and facts.listing.type is GroupType.CLASSIC
    if not classic or not isinstance(desc, ConsumerGroupDescription) or not desc.members:
        return Check("custom_assignor", PASS, "no classic members to inspect")
    carrying = sorted(m for m, data in facts.user_data.items() if data)
    if carrying:
        evidence = (f"{len(carrying)} member(s) carry assignment userData (assignor {desc.assignor!r}): "
                    f"{', '.join(carrying[:5])}")
        if desc.assignor == "cooperative-sticky":
            # librdkafka's cooperative-sticky writes userData into each assignment (the Java one does not):
            # the built-in name does not make it safe, and there is no built-in to switch to that keeps
            # incremental rebalances
            return Check("custom_assignor", FAIL, evidence,
                         "The broker refuses the online upgrade of a group whose assignments carry userData; "
                         "librdkafka's cooperative-sticky assignor (confluent-kafka and the other librdkafka "
                         f"clients) writes it. Migrate this group offline with the {OFFLINE_CONSUMER_DAG} DAG "
                         "(stop every instance, Empty, restart with group.protocol=consumer).")
        return Check("custom_assignor", FAIL, evidence,
                     "The broker refuses the online upgrade of a group whose assignments carry userData "
                     "(\"unsupported custom assignor\"): switch the members to an assignor that writes no "
                     "assignment userData (range, roundrobin) in a rolling restart first, or migrate offline with "
                     f"the {OFFLINE_CONSUMER_DAG} DAG.")
    if desc.assignor == "cooperative-sticky":
        # seen on a real broker: librdkafka's cooperative-sticky leaves userData empty while no member owned
        # partitions in an earlier generation, and writes it from the next rebalance on (the rollout's own
        # restarts): "no userData now" does not mean the upgrade will be accepted
        return Check("custom_assignor", WARN, "assignor 'cooperative-sticky', no userData seen yet",
                     "If the members are librdkafka clients (confluent-kafka ...), their cooperative-sticky writes "
                     "assignment userData after the next rebalance and the broker then refuses the online upgrade "
                     f"mid-rollout: migrate them offline with the {OFFLINE_CONSUMER_DAG} DAG. Java's "
                     "CooperativeStickyAssignor writes none and upgrades online.")
    if desc.assignor and desc.assignor not in BUILTIN_CLASSIC_ASSIGNORS:
        return Check("custom_assignor", WARN, f"assignor {desc.assignor!r} is not a built-in one (no userData seen)",
                     "Server-side assignors replace it: uniform (default) or range (group.remote.assignor).")
    return Check("custom_assignor", PASS, f"assignor {desc.assignor or '-'}, no userData")


def _group_size(facts: PreflightFacts, key: str, members: int) -> Check:
    limit = facts.coordinator.int_value(key)
    evidence = f"{members} member(s), {key}={limit}"
    if limit is None or members <= limit:
        return Check("group_size", PASS, evidence)
    return Check("group_size", FAIL, evidence, f"Raise {key} on the brokers or shrink the group before migrating.")


def _static_members_online(facts: PreflightFacts) -> Check:
    desc = facts.description
    static = [m.instance_id for m in (desc.members if desc else ()) if m.instance_id]
    if not static:
        return Check("static_membership", PASS, "no static members")
    return Check("static_membership", WARN, f"{len(static)} static member(s): {', '.join(static[:5])}",
                 "Under the consumer protocol a new member reusing a live group.instance.id is fenced "
                 "(UNRELEASED_INSTANCE_ID): restart each instance only after the old one has left (graceful "
                 "shutdown), never overlapping.")


def _static_members_streams(facts: PreflightFacts) -> Check:
    desc = facts.description
    static = [m.instance_id for m in (desc.members if desc else ()) if m.instance_id]
    if not static:
        return Check("static_membership", PASS, "no static members")
    old = all(_release_tuple(b.release) < (4, 4) for b in facts.brokers)
    return Check("static_membership", FAIL if old else WARN, f"{len(static)} static member(s): {', '.join(static[:5])}",
                 "Streams groups reject static membership before Kafka 4.4: remove group.instance.id from the "
                 "application's config before restarting it with group.protocol=streams.")


def _group_empty(facts: PreflightFacts, expect_empty: bool, target: str) -> Check:
    desc = facts.description
    if desc is None or desc.is_empty:
        return Check("group_empty", PASS, f"no members ({desc.state if desc else 'no group'})")
    evidence = f"{len(desc.members)} active member(s), state {desc.state}"
    remedy = (f"A group converts to {target} only while it is empty (a {target} member joining it now is refused): "
              "stop every instance (or remove the members) and wait for Empty before restarting with "
              f"group.protocol={target}.")
    return Check("group_empty", FAIL if expect_empty else WARN, evidence, remedy)


def _assignor_mapping(facts: PreflightFacts) -> Check:
    """The server-side assignor that will replace the group's classic one (Kafka's mapping: range -> range,
    roundrobin/sticky/cooperative-sticky -> uniform), against the one the brokers give by default (the
    first of ``group.consumer.assignors``)."""
    offered = server_assignor_names(facts.coordinator.values.get("group.consumer.assignors"))
    names = offered
    desc = facts.description
    current = desc.assignor if isinstance(desc, ConsumerGroupDescription) and desc.type is GroupType.CLASSIC \
        else None
    evidence = f"group.consumer.assignors={','.join(offered) or '(not readable)'}"
    if not current:
        return Check("assignor_mapping", PASS, f"{evidence}; no classic assignor in use to map")
    equivalent = ASSIGNOR_MAP.get(current.lower())
    if equivalent is None:
        return Check("assignor_mapping", WARN, f"{evidence}; the group uses {current!r}, which has no server-side "
                     "equivalent", "Pick group.remote.assignor (uniform or range) knowingly, or implement it on "
                     "the brokers (group.consumer.assignors).")
    default = names[0] if names else "uniform"
    evidence += f"; the group uses {current!r} -> {equivalent!r}; the brokers' default is {default!r}"
    if names and equivalent not in names:
        return Check("assignor_mapping", FAIL, evidence,
                     f"Add {equivalent} to group.consumer.assignors on every broker, or choose another assignor.")
    if equivalent != default:
        return Check("assignor_mapping", WARN, evidence,
                     f"Set group.remote.assignor={equivalent} in the new client config to keep {equivalent} "
                     f"semantics; without it the brokers assign with {default}.")
    return Check("assignor_mapping", PASS, evidence)


def _source_topics(facts: PreflightFacts, topics: list[str]) -> Check:
    """A streams group whose source topics do not exist stays NOT_READY with empty assignments."""
    missing = sorted(t for t in topics if facts.source_topics.get(t) is None)
    evidence = ", ".join(f"{t} ({facts.source_topics.get(t) or 'missing'})" for t in topics) or "none declared"
    if missing:
        return Check("source_topics", FAIL, evidence,
                     f"Create {', '.join(missing)} (or correct the list) before restarting: with a missing source "
                     "topic the group stays NOT_READY and its members get empty assignments.")
    return Check("source_topics", PASS, evidence)


def _topology_unchanged(facts: PreflightFacts, group_id: str, topics: list[str]) -> Check:
    """The declared source topics against the topics the group committed on (internal repartition topics
    aside). Changing the topology together with the protocol mixes two risks; a topic added now starts
    from ``auto.offset.reset``, and a significant topology change on a streams group needs a new group."""
    consumed = {t for t in facts.committed_topics if not (t.startswith(f"{group_id}-") and t.endswith("-repartition"))}
    if not consumed:
        return Check("topology", PASS, "no committed offsets to compare with")
    added, dropped = sorted(set(topics) - consumed), sorted(consumed - set(topics))
    if not added and not dropped:
        return Check("topology", PASS, f"source topics match the committed ones: {', '.join(sorted(consumed))}")
    evidence = "; ".join(p for p in (f"new: {', '.join(added)}" if added else "",
                                     f"no longer read: {', '.join(dropped)}" if dropped else "") if p)
    return Check("topology", WARN, evidence,
                 "Deploy the topology change before or after the migration, not with it: a new source topic "
                 "starts from auto.offset.reset, and a streams group whose topology changes significantly must be "
                 "recreated.")


# -- Kafka facts that changed (issue 30, item 9) -------------------------------------------------------

#: KIP-1251 (Kafka 4.3.0): a consumer group's coordinator records the epoch at which each partition was
#: assigned to a member and accepts an offset commit when assignment epoch <= the member's epoch <= the
#: broker's; before it, a commit had to carry the broker-side member epoch exactly, so one sent while the
#: member reconciled a new assignment was fenced (STALE_MEMBER_EPOCH). Streams groups track assignment
#: epochs since 4.2 (KIP-1071; StreamsGroup's assignment-epoch validator is in the 4.2.1 broker already).
ASSIGNMENT_EPOCHS_RELEASE = (4, 3)
#: the broker config that paces assignment updates, added with KIP-1251 in 4.3.0 (1 s by default; names and
#: default read from GroupCoordinatorConfig of the 4.3.1 broker; absent on 4.2.1)
ASSIGNMENT_INTERVAL = {"consumer": "group.consumer.assignment.interval.ms",
                       "streams": "group.streams.assignment.interval.ms"}


def _assignment_intervals(facts: PreflightFacts, key: str) -> str:
    """Each broker's ``key``, or why it has none: not present on a broker older than 4.3 (never a guessed
    default), not read otherwise."""
    releases = {b.node_id: b.release for b in facts.brokers}
    shown: dict[str, list[int]] = {}
    for c in facts.coordinators:
        value = c.values.get(key)
        release = releases.get(c.broker_id, "unknown")
        if value is not None:
            text = f"{key}={value}"
        elif release != "unknown" and _release_tuple(release) < ASSIGNMENT_EPOCHS_RELEASE:
            text = f"{key} not present (broker < 4.3)"
        else:
            text = f"{key} not read"
        shown.setdefault(text, []).append(c.broker_id)
    if len(shown) == 1 and len(facts.coordinators) > 1:
        return f"{next(iter(shown))} on every broker"
    return "; ".join(f"{text} (broker {', '.join(map(str, sorted(ids)))})" for text, ids in shown.items())


def _assignment_epochs(facts: PreflightFacts, target: str) -> Check:
    """Brokers older than 4.3.0 lack KIP-1251: a consumer group's members can see offset commits fenced while
    they reconcile (the rollout's rebalances). Shows the assignment interval the brokers pace updates with."""
    interval = _assignment_intervals(facts, ASSIGNMENT_INTERVAL[target])
    if target == "streams":
        return Check("assignment_epochs", PASS, "streams groups fence offset commits by assignment epoch (since "
                     f"4.2, KIP-1071); {interval}")
    unknown = sorted(b.node_id for b in facts.brokers if b.release == "unknown")
    old = sorted(b.node_id for b in facts.brokers
                 if b.release != "unknown" and _release_tuple(b.release) < ASSIGNMENT_EPOCHS_RELEASE)
    remedy = ("Upgrade every broker to Kafka 4.3.0 or newer before moving groups to the consumer protocol, or "
              "accept it knowingly: without KIP-1251 (assignment epochs) the coordinator fences an offset commit "
              "that carries the member's previous epoch, so commits sent while a member reconciles a new "
              "assignment fail (STALE_MEMBER_EPOCH) and their records are processed again after the rebalance; "
              "the rollout's restarts cause such reconciliations.")
    if old:
        releases = ", ".join(f"broker {b.node_id}: {b.release}" for b in facts.brokers if b.node_id in old)
        return Check("assignment_epochs", WARN, f"{releases} (< 4.3.0, without KIP-1251 assignment epochs); "
                     f"{interval}", remedy)
    if unknown:
        return Check("assignment_epochs", WARN, f"the release of broker(s) {', '.join(map(str, unknown))} is "
                     f"unknown, so whether they have KIP-1251 assignment epochs (4.3.0+) is unknown; {interval}",
                     remedy)
    return Check("assignment_epochs", PASS, f"every broker is 4.3+ (KIP-1251 assignment epochs); {interval}")


def _inherited_group_configs(facts: PreflightFacts, group_id: str) -> Check:
    """Group configs outlive their group and apply to a new group with the same id (KAFKA-20236): a group that
    does not exist, or an empty one without committed offsets (new, or recreated), but has group configs
    inherits them, named here with their values."""
    if facts.group_configs is None:
        return Check("inherited_group_configs", WARN,
                     f"the configs of group {group_id!r} could not be read: {facts.group_configs_error}",
                     "Grant DESCRIBE_CONFIGS on the group and rerun: a group created with this id inherits any "
                     "group configs left on it.")
    configs = ", ".join(f"{k}={v}" for k, v in sorted(facts.group_configs.items()))
    remedy = ("Kafka keeps a group's configs after the group is deleted and applies them to a new group with the "
              "same id (KAFKA-20236). Keep them if they are meant for this application; otherwise delete them "
              f"before the migration (kafka-configs --alter --entity-type groups --entity-name {group_id} "
              "--delete-config <names>, or KafkaGroupConfigOperator delete_configs).")
    if not facts.group_configs:
        return Check("inherited_group_configs", PASS, "no group configs set")
    if facts.listing is None:
        return Check("inherited_group_configs", WARN, f"group {group_id!r} does not exist but has group configs: "
                     f"{configs}; a group created with this id inherits them", remedy)
    desc = facts.description
    if desc is not None and desc.is_empty and facts.group_has_offsets is False:
        return Check("inherited_group_configs", WARN, f"group {group_id!r} is empty and has no committed offsets "
                     f"(new, or recreated) but has group configs: {configs}; they may be left from a deleted "
                     "group of the same id", remedy)
    return Check("inherited_group_configs", PASS, f"the group's own configs: {configs}")
