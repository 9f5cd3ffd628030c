"""Refuse a migration that would fail, before anything changes: checks over facts read from the cluster.

The broker decides whether a group may convert (GroupMetadataManager): the
protocol must be enabled and its feature finalized; an online classic ->
consumer upgrade is refused (fatal ``GROUP_ID_NOT_FOUND`` in the clients)
when the migration policy forbids it, when the group is larger than
``group.consumer.max.size`` or when any member's assignment carries
``userData`` (a custom client assignor); a streams application can only take
over an *empty* classic group, and a 4.2.0 broker can lose such a group after
compaction (KAFKA-20254); 4.x before 4.3.3 / 4.4.1 gets an online upgrade at
generation 0 or during a rebalance wrong (KAFKA-21581/21582/21584, named by
:mod:`.upgrade_window`, whose wait the roll runs). Each of those is a check here, with the evidence
read from the cluster and the remedy.

:func:`~airflow_provider_kip848.kafka.api.read_preflight_facts` reads (one
backend call per fact); :func:`run_preflight` judges, purely, so every rule
is unit-testable on recorded facts. The facts, the verdicts and the modes are
:mod:`.preflight_model`'s (importable from here, as the preflight's callers use them), the
rules those of :mod:`.preflight_cluster_checks` and :mod:`.preflight_group_checks`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_provider_kip848.kafka.errors import InvalidArgument, InvalidGroupId
from airflow_provider_kip848.kafka.rules.client_release import InstanceRelease, check_client_releases
from airflow_provider_kip848.kafka.rules.features import FEATURE_GROUP_TYPES
from airflow_provider_kip848.kafka.rules.preflight_cluster_checks import (
    check_broker_version,
    check_brokers_agree,
    check_client_apis,
    check_feature_disable,
    check_feature_downgrade,
    check_feature_enable,
    check_feature_finalized,
    check_features_agree,
    check_protocol_enabled,
)
from airflow_provider_kip848.kafka.rules.preflight_group_checks import (
    STREAMS_INSTANCE_ID_KEYS,
    check_assignment_epochs,
    check_assignor_mapping,
    check_custom_assignor,
    check_deletable_streams_group,
    check_group_empty,
    check_group_size,
    check_group_type,
    check_inherited_group_configs,
    check_migration_policy,
    check_rollback_policy,
    check_source_topics,
    check_static_members_online,
    check_static_members_streams,
    check_topology_unchanged,
)
from airflow_provider_kip848.kafka.rules.preflight_model import (
    ASSIGNMENT_INTERVAL,
    FAIL,
    FEATURE_PROTOCOL,
    MODES,
    OFFLINE_MODES,
    PASS,
    TARGET_PROTOCOL,
    WARN,
    Check,
    PreflightFacts,
    PreflightReport,
)
from airflow_provider_kip848.kafka.rules.upgrade_window import check_upgrade_bug_windows, check_way_back_path


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
    client_properties: Mapping[str, str] | None = None,
    client_releases: Sequence[InstanceRelease] | None = None,
) -> PreflightReport:
    """Judge the facts for ``mode``; ``expect_empty`` (offline modes) defaults to True.

    ``source_topics``: the streams application's source topics (streams modes), checked to exist
    (a missing one leaves the streams group NOT_READY) and against what the group consumed so far
    (a topology change does not belong in a protocol migration).

    ``rollback``: ``"fail"`` or ``"warn"`` when the run offers an online rollback (the rolling
    upgrade's Reject/timeout branch restarts the instances on the classic protocol while others are
    still on the new one), judged against the broker's migration policy; None when it offers none.

    ``client_properties``: the client properties the application will run with on the target protocol (its
    controller's config, the run's on top; None: not known), for what the group's members cannot show before
    the restart (``classic_to_streams``: a ``group.instance.id``, which brokers before 4.4 refuse fatally).

    ``client_releases``: the client release each instance runs and where it was read
    (:func:`~airflow_provider_kip848.kafka.rules.client_release.resolve_releases`), judged for the modes whose
    target protocol has a minimum client release (``client_release``); None: not judged.
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
        checks.append(check_broker_version(facts, "4.2" if feature == "streams.version" else "4.0",
                                      declared_broker_version, streams=feature == "streams.version"))
        checks.append(check_feature_enable(facts, feature, level))
        checks += _present(check_features_agree(facts, feature, level))
        if feature in FEATURE_PROTOCOL and level >= 1:
            # a finalized feature alone does not serve the protocol: the brokers must list it too
            checks.append(check_protocol_enabled(facts, FEATURE_PROTOCOL[feature]))
            checks.append(check_brokers_agree(facts))
        return PreflightReport(mode, group_id, tuple(checks))
    if mode == "downgrade_feature":
        if feature not in FEATURE_GROUP_TYPES:
            raise InvalidArgument(f"mode downgrade_feature needs feature group.version, streams.version or "
                                  f"share.version, not {feature!r}.")
        checks.append(check_feature_downgrade(facts, feature, 0 if feature_level is None else int(feature_level)))
        return PreflightReport(mode, group_id, tuple(checks))
    if mode == "disable_feature":
        if feature not in FEATURE_GROUP_TYPES:
            raise InvalidArgument(f"mode disable_feature needs feature group.version, streams.version or "
                                  f"share.version, not {feature!r}.")
        checks += check_feature_disable(facts, feature, 0 if feature_level is None else int(feature_level))
        return PreflightReport(mode, group_id, tuple(checks))
    if mode == "delete_streams_group":
        if not group_id:
            raise InvalidGroupId(f"mode {mode} needs a group_id; got {group_id!r}.")
        return PreflightReport(mode, group_id, check_deletable_streams_group(facts, group_id))
    if not group_id:
        raise InvalidGroupId(f"mode {mode} needs a group_id; got {group_id!r}.")
    checks += _group_checks(facts, mode, group_id, declared_broker_version, expect_empty, rollback, source_topics,
                            client_properties)
    if client_releases is not None:
        static = any(str(v) for k, v in (client_properties or {}).items() if k in STREAMS_INSTANCE_ID_KEYS)
        checks += _present(check_client_releases(client_releases, TARGET_PROTOCOL[mode], static_members=static))
    return PreflightReport(mode, group_id, tuple(checks))


def _group_checks(facts: PreflightFacts, mode: str, group_id: str, declared_broker_version: str | None,
                  expect_empty: bool | None, rollback: str | None, source_topics: Sequence[str] | None,
                  client_properties: Mapping[str, str] | None = None) -> list[Check]:
    """The checks of a mode that moves one group between protocols, in the order a person reads them."""
    checks: list[Check] = []
    streams = mode in ("classic_to_streams", "streams_to_classic")
    target = TARGET_PROTOCOL[mode]
    checks.append(check_broker_version(facts, "4.2" if streams else "4.0", declared_broker_version,
                                  streams=mode == "classic_to_streams"))
    checks.append(check_protocol_enabled(facts, target))
    checks.append(check_brokers_agree(facts))
    checks += _present(check_features_agree(facts))
    checks += _present(check_client_apis(facts, target))
    if target in ASSIGNMENT_INTERVAL:
        checks.append(check_assignment_epochs(facts, target))
    if target == "consumer":
        checks.append(check_feature_finalized(facts, "group.version"))
    elif mode == "classic_to_streams":
        checks.append(check_feature_finalized(facts, "streams.version"))
    checks.append(check_group_type(facts, group_id, mode))
    desc = facts.description
    members = len(desc.members) if desc is not None else 0
    if mode in ("classic_to_consumer", "consumer_to_classic"):
        checks.append(check_migration_policy(facts, mode, members))
        # the online paths' bug windows (KAFKA-21581/21582/21584, KAFKA-21176): named with the fixed releases
        checks.append(check_upgrade_bug_windows((b.release for b in facts.brokers), declared_broker_version,
                                                downgrade=mode == "consumer_to_classic"))
    if mode in ("consumer_to_classic", "consumer_to_classic_offline"):
        # the way back: which path this run takes, the known risk of each, the safer one here
        checks.append(check_way_back_path((b.release for b in facts.brokers), declared_broker_version,
                                          path="online" if mode == "consumer_to_classic" else "offline",
                                          policy=facts.coordinator.migration_policy, members=members))
    if mode == "classic_to_consumer" and rollback is not None:
        checks.append(check_rollback_policy(facts, rollback))
    if mode == "classic_to_consumer":
        checks.append(check_custom_assignor(facts))
        checks.append(check_group_size(facts, "group.consumer.max.size", members))
        checks.append(check_static_members_online(facts))
    if target == "consumer":
        checks.append(check_assignor_mapping(facts))
    if mode == "classic_to_streams":
        checks.append(check_group_size(facts, "group.streams.max.size", members))
        checks.append(check_static_members_streams(facts, client_properties))
    if mode in ("classic_to_streams", "streams_to_classic") and source_topics is not None:
        checks.append(check_source_topics(facts, list(source_topics)))
        if mode == "classic_to_streams":
            checks.append(check_topology_unchanged(facts, group_id, list(source_topics)))
    if mode in OFFLINE_MODES:
        checks.append(check_group_empty(facts, True if expect_empty is None else expect_empty, target))
    if facts.group_configs is not None or facts.group_configs_error is not None:
        checks.append(check_inherited_group_configs(facts, group_id))
    return checks


def _present(check: Check | None) -> list[Check]:
    """A check that judges only facts that were read (None: not read, e.g. recorded facts without them)."""
    return [] if check is None else [check]


__all__ = ["FAIL", "MODES", "PASS", "WARN", "Check", "PreflightFacts", "PreflightReport", "run_preflight"]
