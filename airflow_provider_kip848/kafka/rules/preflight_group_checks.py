"""The preflight's checks of one group: its type against the mode, the migration policy, its size, custom
assignors, static members, emptiness, its topology, and the Kafka facts that changed under a group (assignment
epochs, inherited group configs). Facts in, one :class:`~.preflight_model.Check` out; pure."""

from __future__ import annotations

from collections.abc import Mapping

from airflow_provider_kip848.kafka.model import ConsumerGroupDescription, GroupType
from airflow_provider_kip848.kafka.rules.lint import ASSIGNOR_MAP, server_assignor_names
from airflow_provider_kip848.kafka.rules.preflight_model import (
    ASSIGNMENT_INTERVAL,
    BUILTIN_CLASSIC_ASSIGNORS,
    FAIL,
    OFFLINE_CONSUMER_DAG,
    PASS,
    TARGET_PROTOCOL,
    WARN,
    Check,
    PreflightFacts,
    release_tuple,
)


def check_deletable_streams_group(facts: PreflightFacts, group_id: str) -> tuple[Check, ...]:
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


def check_group_type(facts: PreflightFacts, group_id: str, mode: str) -> Check:
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


def check_migration_policy(facts: PreflightFacts, mode: str, members: int) -> Check:
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


def check_rollback_policy(facts: PreflightFacts, severity: str) -> Check:
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


def check_custom_assignor(facts: PreflightFacts) -> Check:
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


def check_group_size(facts: PreflightFacts, key: str, members: int) -> Check:
    limit = facts.coordinator.int_value(key)
    evidence = f"{members} member(s), {key}={limit}"
    if limit is None or members <= limit:
        return Check("group_size", PASS, evidence)
    return Check("group_size", FAIL, evidence, f"Raise {key} on the brokers or shrink the group before migrating.")


def check_static_members_online(facts: PreflightFacts) -> Check:
    desc = facts.description
    static = [m.instance_id for m in (desc.members if desc else ()) if m.instance_id]
    if not static:
        return Check("static_membership", PASS, "no static members")
    return Check("static_membership", WARN, f"{len(static)} static member(s): {', '.join(static[:5])}",
                 "Under the consumer protocol a new member reusing a live group.instance.id is fenced "
                 "(UNRELEASED_INSTANCE_ID): restart each instance only after the old one has left (graceful "
                 "shutdown), never overlapping.")


#: the client properties that set a Kafka Streams application's ``group.instance.id`` (its main consumer's)
STREAMS_INSTANCE_ID_KEYS = ("group.instance.id", "consumer.group.instance.id", "main.consumer.group.instance.id")
#: the first release line whose brokers accept static members in streams groups (KAFKA-20169)
STREAMS_STATIC_RELEASE = (4, 4)
#: what a streams member with ``group.instance.id`` gets from an older broker (read from a 4.3.1 broker's answer to
#: a Kafka Streams 4.4.0 member, in the application's log), and what a Kafka Streams client before 4.4 says at start
STREAMS_STATIC_REFUSED = ("the fatal INVALID_REQUEST 'Static membership is not yet supported.' "
                          "(StreamsGroupHeartbeat; Kafka Streams 4.4 goes to ERROR and processes nothing)")
STREAMS_STATIC_CLIENT_REFUSED = ("a Kafka Streams client before 4.4 refuses the config at start (ConfigException: "
                                 "'Streams rebalance protocol does not support static membership')")


def check_static_members_streams(facts: PreflightFacts,
                                 client_properties: Mapping[str, str] | None = None) -> Check:
    """Static members of a streams application: the ``group.instance.id`` the application will run with on
    streams (``client_properties``, its controller's config with the run's on top; None: not known) and the
    classic group's members that have one. Streams groups accept them from 4.4 brokers on (KAFKA-20169): each
    stream thread's member is ``<group.instance.id>-<n>``. Any broker before 4.4 (or of an unknown release) may
    be the group's coordinator, and refuses them fatally: refused here, naming the brokers and the error."""
    desc = facts.description
    members = [m.instance_id for m in (desc.members if desc else ()) if m.instance_id]
    configured = {k: str(v) for k, v in (client_properties or {}).items() if k in STREAMS_INSTANCE_ID_KEYS and str(v)}
    parts = []
    if configured:
        parts.append("the application's config: " + ", ".join(f"{k}={v}" for k, v in configured.items()))
    if members:
        parts.append(f"{len(members)} static member(s) in the group: {', '.join(members[:5])}")
    unknown_config = "" if client_properties is not None else " (the application's config was not given)"
    if not parts:
        return Check("static_membership", PASS, "no static members" + unknown_config)
    releases = sorted({b.release for b in facts.brokers})
    old = [r for r in releases if release_tuple(r) < STREAMS_STATIC_RELEASE]
    evidence = "; ".join(parts) + f"; brokers {', '.join(releases) or 'unknown'}"
    if old or not releases:
        return Check("static_membership", FAIL, evidence,
                     f"Streams groups accept static members only on Kafka 4.4 brokers (KAFKA-20169): a broker "
                     f"{' / '.join(old) or 'of an unknown release'} answers a streams member with group.instance.id "
                     f"with {STREAMS_STATIC_REFUSED}; {STREAMS_STATIC_CLIENT_REFUSED}. Upgrade every broker to "
                     "4.4, or remove group.instance.id from the application's config before it restarts with "
                     "group.protocol=streams.")
    return Check("static_membership", WARN, evidence,
                 "Kafka 4.4 brokers accept static streams members (KAFKA-20169) from Kafka Streams 4.4 clients "
                 f"only ({STREAMS_STATIC_CLIENT_REFUSED}); each stream thread joins as <group.instance.id>-<n> "
                 "(-1, -2, ...).")


def check_group_empty(facts: PreflightFacts, expect_empty: bool, target: str) -> Check:
    desc = facts.description
    if desc is None or desc.is_empty:
        return Check("group_empty", PASS, f"no members ({desc.state if desc else 'no group'})")
    evidence = f"{len(desc.members)} active member(s), state {desc.state}"
    remedy = (f"A group converts to {target} only while it is empty (a {target} member joining it now is refused): "
              "stop every instance (or remove the members) and wait for Empty before restarting with "
              f"group.protocol={target}.")
    return Check("group_empty", FAIL if expect_empty else WARN, evidence, remedy)


def check_assignor_mapping(facts: PreflightFacts) -> Check:
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


def check_source_topics(facts: PreflightFacts, topics: list[str]) -> Check:
    """A streams group whose source topics do not exist stays NOT_READY with empty assignments."""
    missing = sorted(t for t in topics if facts.source_topics.get(t) is None)
    evidence = ", ".join(f"{t} ({facts.source_topics.get(t) or 'missing'})" for t in topics) or "none declared"
    if missing:
        return Check("source_topics", FAIL, evidence,
                     f"Create {', '.join(missing)} (or correct the list) before restarting: with a missing source "
                     "topic the group stays NOT_READY and its members get empty assignments.")
    return Check("source_topics", PASS, evidence)


def check_topology_unchanged(facts: PreflightFacts, group_id: str, topics: list[str]) -> Check:
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
        elif release != "unknown" and release_tuple(release) < ASSIGNMENT_EPOCHS_RELEASE:
            text = f"{key} not present (broker < 4.3)"
        else:
            text = f"{key} not read"
        shown.setdefault(text, []).append(c.broker_id)
    if len(shown) == 1 and len(facts.coordinators) > 1:
        return f"{next(iter(shown))} on every broker"
    return "; ".join(f"{text} (broker {', '.join(map(str, sorted(ids)))})" for text, ids in shown.items())


def check_assignment_epochs(facts: PreflightFacts, target: str) -> Check:
    """Brokers older than 4.3.0 lack KIP-1251: a consumer group's members can see offset commits fenced while
    they reconcile (the rollout's rebalances). Shows the assignment interval the brokers pace updates with."""
    interval = _assignment_intervals(facts, ASSIGNMENT_INTERVAL[target])
    if target == "streams":
        return Check("assignment_epochs", PASS, "streams groups fence offset commits by assignment epoch (since "
                     f"4.2, KIP-1071); {interval}")
    unknown = sorted(b.node_id for b in facts.brokers if b.release == "unknown")
    old = sorted(b.node_id for b in facts.brokers
                 if b.release != "unknown" and release_tuple(b.release) < ASSIGNMENT_EPOCHS_RELEASE)
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


def check_inherited_group_configs(facts: PreflightFacts, group_id: str) -> Check:
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
