"""The typed admin interface both backends implement, and what they share.

:class:`GroupAdmin` is the set of actions the native backend
(:class:`~airflow_provider_kip848.kafka.native.KafkaAdmin`) and the CLI backend
(:class:`~airflow_provider_kip848.kafka.cli.KafkaCli`) both offer, with the
same signatures and results; the hooks expose exactly these. The changes
follow one skeleton, written here once: *plan* against what the cluster
reports (refusing bad input before anything is sent), stop on a *no-op*,
*send* inside the permission the change needs, and *read back* until the
brokers show the new value. A backend only says how to send.

:class:`ClusterAdmin` adds what only the native backend can do (cluster
description, broker versions, member removal, topics for the change lock).

The functions at the end compose reads through these interfaces for the
judges of :mod:`.rules` (preflight facts, offsets snapshots, wait conditions).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Self

from airflow_provider_kip848.kafka import errors
from airflow_provider_kip848.kafka.arguments import (
    describe_similar,
    require_bool,
    require_group_id,
    show_id,
    similar_group_ids,
)
from airflow_provider_kip848.kafka.inventory import GroupInventory
from airflow_provider_kip848.kafka.model import (
    AdvertisedApis,
    BrokerVersion,
    ClusterFeatures,
    ClusterInfo,
    ConsumerGroupDescription,
    ConsumerGroupMember,
    FeatureUpdate,
    GroupConfig,
    GroupConfigChange,
    GroupCoordinatorConfig,
    GroupDescription,
    GroupListing,
    GroupOffsets,
    GroupState,
    GroupType,
    MemberRemoval,
    OffsetSnapshot,
    StreamsGroupDescription,
    TopicPartition,
)
from airflow_provider_kip848.kafka.readback import read_back
from airflow_provider_kip848.kafka.rules.conditions import ConditionResult, GroupCondition, judge
from airflow_provider_kip848.kafka.rules.features import (
    FEATURE_GROUP_TYPES,
    dependent_group_type,
    outcome_message,
    plan_feature_update,
    refuse_dependents,
    refuse_ignored_arguments,
)
from airflow_provider_kip848.kafka.rules.group_configs import (
    ConfigChangePlan,
    parse_group_type,
    plan_config_change,
    require_applicable,
)
from airflow_provider_kip848.kafka.rules.offsets import (
    require_empty,
    require_inside_log,
    require_offsets,
    require_read_back,
    snapshot_from,
)
from airflow_provider_kip848.kafka.rules.preflight import PreflightFacts
from airflow_provider_kip848.kafka.settings import ClientSettings

#: ``(operation, resource type, resource name)`` of one ACL a request needs.
Permission = tuple[str, str, str | None]
#: a member removal's ``before_send(members, description)``: right before LeaveGroup is sent (the audit intent)
BeforeRemoval = Callable[[tuple[ConsumerGroupMember, ...], ConsumerGroupDescription], None]


class GroupAdmin(ABC):
    """Group, feature, config and offsets administration of one cluster, by either backend."""

    settings: ClientSettings

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def close(self) -> None:
        """Release the backend's clients (idempotent)."""

    @property
    def request_timeout_s(self) -> float:
        """The connection's request timeout, in seconds (also the read-back deadline)."""
        return self.settings.request_timeout_ms / 1000

    def requires(self, action: str, *needs: Permission) -> AbstractContextManager[None]:
        """An authorization failure inside names the permission ``action`` needs (see :func:`errors.requires`)."""
        return errors.requires(action, *needs, principal=self.settings.sasl_username)

    # -- features ------------------------------------------------------------

    @abstractmethod
    def describe_features(self) -> ClusterFeatures:
        """Supported ranges and finalized levels of every feature (``kafka-features describe``)."""

    def update_feature(self, feature: str, level: int | str | None = None, *, action: str = "upgrade",
                       dry_run: bool = False, unsafe: bool = False,
                       override_dependent_groups: bool = False,
                       before_send: Callable[[FeatureUpdate], None] | None = None) -> FeatureUpdate:
        """Upgrade, downgrade or disable one feature; a no-op (nothing sent) when already at the level.

        ``dry_run`` asks the controller to validate the change (``--dry-run``)
        without applying it. After a real change the level is read back.
        Lowering ``group.version``, ``streams.version`` or ``share.version``
        while groups of that type exist raises :class:`FeatureInUse` naming
        them, unless ``override_dependent_groups`` (an intended outage).
        ``before_send(plan)``: right before a real change is sent (the audit intent).
        """
        dry_run = require_bool(dry_run, "dry_run")
        unsafe = require_bool(unsafe, "unsafe")
        override = require_bool(override_dependent_groups, "override_dependent_groups")
        refuse_ignored_arguments(feature, action, level, unsafe=unsafe, override_dependent_groups=override)
        plan = plan_feature_update(self.describe_features(), feature, level, action, dry_run=dry_run)
        if plan.noop:
            return plan
        gtype = dependent_group_type(plan)
        if gtype is not None:
            refusal = refuse_dependents(plan, self.dependent_groups(gtype))
            if refusal is not None and not override:
                raise refusal
        if before_send is not None and not dry_run:
            before_send(plan)
        with self.requires(f"{'validate' if dry_run else 'apply'} {action} of {feature}", ("ALTER", "CLUSTER", None)):
            self._send_feature_update(plan, dry_run=dry_run, unsafe=unsafe)
        if dry_run:
            return replace(plan, message=outcome_message(plan, dry_run=True))
        after = read_back(lambda: self.describe_features().level(feature), lambda lvl: lvl == plan.to_level,
                          self.request_timeout_s)
        if after != plan.to_level:
            raise errors.KafkaToolError(f"{feature} reads back at {after} after the change to {plan.to_level}.")
        return replace(plan, applied=True, message=outcome_message(plan, dry_run=False))

    @abstractmethod
    def _send_feature_update(self, plan: FeatureUpdate, *, dry_run: bool, unsafe: bool) -> None:
        """Send the planned change (validate only with ``dry_run``); raise on a refusal."""

    def dependent_groups(self, gtype: GroupType) -> dict[str, int]:
        """Every group of type ``gtype`` -> its member count (-1 where the type cannot be described here).

        An Empty listing counts 0 without a describe; any other state is
        described, so a member count is never guessed from a listing.
        """
        out: dict[str, int] = {}
        for listing in self.list_groups():
            if listing.type is not gtype:
                continue
            if listing.state is GroupState.EMPTY:
                out[listing.group_id] = 0
            elif gtype is GroupType.SHARE:
                out[listing.group_id] = -1
            else:
                try:
                    out[listing.group_id] = len(self.describe_group(listing.group_id).members)
                except errors.GroupNotFound:
                    continue  # deleted since the listing
        return out

    # -- broker and group configs -------------------------------------------------

    @abstractmethod
    def group_coordinator_config(self, broker_id: int | None = None) -> GroupCoordinatorConfig:
        """The broker's ``group.*`` configs (protocols, migration policy, session/heartbeat/standby bounds)."""

    @abstractmethod
    def describe_group_config(self, group_id: str) -> GroupConfig:
        """Every group config of ``group_id`` with its effective value and source (``--describe --all``)."""

    def alter_group_config(self, group_id: str, set_configs: Mapping[str, object] | None = None,
                           delete_configs: Iterable[str] = (), *, dry_run: bool = False,
                           allow_absent_group: bool = False,
                           for_group_type: GroupType | str | None = None,
                           before_send: Callable[[ConfigChangePlan], None] | None = None) -> GroupConfigChange:
        """Set and/or delete group-level configs, validated against the broker's bounds first.

        Idempotent: values already in place and deletes of absent overrides
        send nothing. Returns the dynamic values before and after (read back).
        Kafka accepts configs for any group id, so a group the cluster does not
        list is refused (naming close matches) unless ``allow_absent_group``
        (configuring a group before its first start). Kafka also accepts configs
        of any group type on any group: a key of another type than the group's
        is refused (:func:`~.rules.group_configs.require_applicable`) unless
        ``for_group_type`` names the type the group is becoming (or, for a group
        that does not exist yet, will have); the result carries both types.
        """
        require_group_id(group_id)
        dry_run = require_bool(dry_run, "dry_run")
        target = parse_group_type(for_group_type)
        allow_absent = require_bool(allow_absent_group, "allow_absent_group")
        try:
            listing: GroupListing | None = self.group_listing(group_id)
        except errors.GroupNotFound:
            # raises, naming similar ids; a group that appeared since the first look is judged by its own type
            listing = None if allow_absent else self.require_known_group(group_id)
        plan = plan_config_change(self.describe_group_config(group_id), set_configs, delete_configs,
                                  self.group_coordinator_config())
        group_type = listing.type if listing is not None else None
        applies_to = require_applicable(group_id, plan.normalized, group_type, target)
        if group_type is None:  # a group not created yet is set for the type its configs are of, shown as if given
            target = applies_to
        plan = replace(plan, group_type=group_type.value if group_type is not None else None,
                       for_group_type=target.value if target is not None else None)
        if plan.noop:
            return plan.unchanged(dry_run=dry_run)
        if before_send is not None and not dry_run:
            before_send(plan)
        with self.requires(f"{'validate a change of' if dry_run else 'change'} the configs of group {group_id!r}",
                           ("ALTER_CONFIGS", "GROUP", group_id)):
            self._send_group_config_change(plan, dry_run=dry_run)
        if dry_run:
            return plan.unchanged(dry_run=True)
        after = read_back(lambda: self.describe_group_config(group_id).dynamic, plan.is_applied,
                          self.request_timeout_s)
        return plan.result(after, applied=True, dry_run=False)

    @abstractmethod
    def _send_group_config_change(self, plan: ConfigChangePlan, *, dry_run: bool) -> None:
        """Send the planned change (validate only with ``dry_run``, where the backend can)."""

    def require_known_group(self, group_id: str) -> GroupListing:
        """The group's listing, or :class:`GroupNotFound` naming the ids that look like it."""
        try:
            return self.group_listing(group_id)
        except errors.GroupNotFound:
            near = similar_group_ids(group_id, self.group_ids())
            raise errors.GroupNotFound(
                f"Group {show_id(group_id)} does not exist on this cluster"
                + (f"; {describe_similar(group_id, near)}" if near else ""),
                remedy="Fix the group id; to configure a group before its first start pass "
                       "allow_absent_group=True.") from None

    # -- groups --------------------------------------------------------------

    @abstractmethod
    def list_groups(self) -> list[GroupListing]:
        """Every group with its type and state, streams and share groups included."""

    def group_ids(self) -> list[str]:
        """Every group id (all types) the principal may describe, without types or states: what a hint needs.
        A backend overrides it where listing the ids costs less than :meth:`list_groups`."""
        return [g.group_id for g in self.list_groups()]

    @abstractmethod
    def group_listing(self, group_id: str) -> GroupListing:
        """The listing of one group, or :class:`GroupNotFound` (:class:`AuthorizationFailed` when the
        principal may not describe it)."""

    @abstractmethod
    def describe_group(self, group_id: str) -> GroupDescription:
        """Describe a group of any type supported here (classic, consumer, streams)."""

    @abstractmethod
    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        """A classic or consumer group with members, assignments and (for consumer groups) epochs."""

    @abstractmethod
    def describe_streams_group(self, group_id: str) -> StreamsGroupDescription:
        """A streams group with members, task assignments and epochs."""

    @abstractmethod
    def delete_group(self, group_id: str) -> None:
        """Delete an empty group (its committed offsets go with it)."""

    # -- offsets -------------------------------------------------------------

    @abstractmethod
    def group_offsets(self, group_id: str) -> GroupOffsets:
        """Committed offsets of a group with each partition's log start and end (lag = end - committed).

        Partitions assigned to members but without a commit are included with
        ``committed=None``, as ``kafka-consumer-groups --describe`` lists them.
        """

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int], *, dry_run: bool = False,
                            before_send: Callable[[Mapping[TopicPartition, int]], None] | None = None) -> GroupOffsets:
        """Set committed offsets (to restore a snapshot); only on an empty group, only inside the log.

        ``before_send(offsets)``: once they passed their checks, right before a real commit (the audit intent).
        Returns the offsets read back after the change (or the current ones for a dry run);
        :class:`~airflow_provider_kip848.kafka.errors.OffsetsNotConfirmed` (retriable) when the read-back does not
        show every written offset.
        """
        require_group_id(group_id)
        dry_run = require_bool(dry_run, "dry_run")
        wanted = require_offsets(offsets)
        try:
            desc: GroupDescription | None = self.describe_group(group_id)
        except errors.GroupNotFound:
            desc = None  # no group, no members: the commit creates it (a restore after the group was lost)
        if desc is not None:
            require_empty(desc)
        current = self.group_offsets(group_id) if desc is not None else GroupOffsets(group_id)
        require_inside_log(wanted, self._log_bounds(wanted, current))
        if dry_run or not wanted:
            return current
        if before_send is not None:
            before_send(wanted)
        topics = ", ".join(sorted({tp.topic for tp in wanted}))
        with self.requires(f"commit offsets for group {group_id!r}", ("READ", "GROUP", group_id),
                           ("READ", "TOPIC", topics)):
            self._send_offsets(group_id, wanted, desc)
        after = self.group_offsets(group_id)
        require_read_back(group_id, wanted, after)
        return after

    @abstractmethod
    def _log_bounds(self, offsets: Mapping[TopicPartition, int],
                    current: GroupOffsets) -> dict[TopicPartition, tuple[int | None, int | None]]:
        """Log start and end of every partition in ``offsets`` (``current``: the group's offsets now)."""

    @abstractmethod
    def _send_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int],
                      desc: GroupDescription | None) -> None:
        """Commit ``offsets`` for the (empty or absent) group."""


class ClusterAdmin(GroupAdmin):
    """What only the native backend does: the cluster, broker versions, members, the fleet inventory, topics."""

    @abstractmethod
    def group_coordinator_configs(self) -> tuple[GroupCoordinatorConfig, ...]:
        """Every broker's ``group.*`` configs, by broker id (a config change rolls out broker by broker: until
        it is done, brokers disagree, and a group follows whichever broker coordinates it)."""

    @abstractmethod
    def describe_cluster(self) -> ClusterInfo:
        """Cluster id, controller and brokers (``DescribeCluster``)."""

    @abstractmethod
    def broker_versions(self) -> list[BrokerVersion]:
        """Each broker's release line, from the ``metadata.version`` range it supports."""

    @abstractmethod
    def advertised_apis(self) -> tuple[AdvertisedApis, ...]:
        """The APIs each address the applications' clients bootstrap from advertises (``ApiVersions``): a proxy
        in front of the brokers may hide the group protocols' APIs the brokers serve."""

    @abstractmethod
    def remove_members(self, group_id: str, *, member_ids: Iterable[str] = (), instance_ids: Iterable[str] = (),
                       all_members: bool = False, missing_ok: bool = False, expected_gone: Iterable[str] = (),
                       reason: str = "removed by airflow-provider-kip848",
                       before_send: BeforeRemoval | None = None) -> MemberRemoval:
        """Force members out of a classic or consumer group with LeaveGroup; an id that is not a member is refused
        (``MemberNotFound``) unless ``missing_ok`` or in ``expected_gone`` (removed by an earlier try)."""

    @abstractmethod
    def inventory(self, group_ids: Iterable[str] | None = None, *, timeout_s: float | None = None,
                  declared_broker_version: str | None = None) -> GroupInventory:
        """Every group (or only ``group_ids``) with type, state, members, assignor, offsets, lag and the
        readiness of each migration, read with batched requests (see :mod:`.inventory`)."""

    @abstractmethod
    def classic_assignment_user_data(self, group_id: str) -> dict[str, bytes]:
        """Member id -> the ``userData`` of its classic assignment (non-empty means a custom client assignor)."""

    @abstractmethod
    def log_offsets(self, tps: Iterable[TopicPartition]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """Log start and end offsets (earliest/latest, read_uncommitted) of the given partitions."""

    @abstractmethod
    def topic_offsets(self, topics: Iterable[str]) -> dict[TopicPartition, tuple[int, int]]:
        """Log start and end offsets of every partition of ``topics``."""

    @abstractmethod
    def create_topic(self, topic: str, *, partitions: int = 1, config: Mapping[str, str] | None = None) -> bool:
        """Create ``topic``; False when it already exists (CreateTopics is atomic on the controller)."""

    @abstractmethod
    def create_topics(self, topics: Iterable[str], *, partitions: int = 1,
                      config: Mapping[str, str] | None = None) -> dict[str, bool]:
        """Create each of ``topics`` in one request: topic -> True when this call created it, False when it
        already existed; all or nothing (a refusal leaves none of them created by this call)."""

    @abstractmethod
    def topic_exists(self, topic: str) -> bool:
        """Whether the cluster's metadata lists ``topic``."""

    @abstractmethod
    def topic_partition_counts(self, topics: Iterable[str]) -> dict[str, int | None]:
        """Each topic's partition count from one metadata read; None for a topic the cluster does not have."""

    @abstractmethod
    def delete_topic(self, topic: str) -> None:
        """Delete ``topic`` (already gone is fine) and wait until the metadata no longer lists it."""


# -- reads composed for the judges of rules/ ----------------------------------------------


def read_preflight_facts(admin: ClusterAdmin, group_id: str | None, feature: str | None = None,
                         source_topics: Iterable[str] | None = None) -> PreflightFacts:
    """Everything :func:`~.rules.preflight.run_preflight` judges, read through ``admin`` (with ``feature``
    one of the group-protocol features: the groups that depend on it; with ``source_topics``, whether
    they exist and which topics the group has committed offsets on)."""
    listing: GroupListing | None = None
    description: GroupDescription | None = None
    user_data: dict[str, bytes] = {}
    if group_id:
        try:
            listing = admin.group_listing(group_id)
            description = admin.describe_group(group_id)
        except errors.GroupNotFound:
            listing = description = None
        except errors.UnsupportedBrokerVersion:
            description = None  # judged by the feature checks
        classic = listing is not None and listing.type is GroupType.CLASSIC
        if classic and description is not None and description.members:
            user_data = admin.classic_assignment_user_data(group_id)
    group_configs: dict[str, str | None] | None = None
    configs_error: str | None = None
    has_offsets: bool | None = None
    if group_id:
        # whether or not the group exists: its configs outlive it and a new group inherits them (KAFKA-20236)
        try:
            group_configs = admin.describe_group_config(group_id).dynamic
        except errors.AuthorizationFailed as exc:
            configs_error = exc.what
        if listing is not None and description is not None and description.is_empty:
            has_offsets = bool(admin.group_offsets(group_id).committed)
    topics: dict[str, int | None] = {}
    committed: tuple[str, ...] = ()
    if source_topics is not None:
        topics = admin.topic_partition_counts(source_topics)
        if listing is not None and group_id:
            committed = tuple(sorted({p.topic for p in admin.group_offsets(group_id).partitions}))
    coordinators = admin.group_coordinator_configs()
    return PreflightFacts(
        brokers=tuple(admin.broker_versions()),
        client_apis=admin.advertised_apis(),
        features=admin.describe_features(),
        coordinator=coordinators[0] if coordinators else admin.group_coordinator_config(),
        coordinators=coordinators,
        listing=listing,
        description=description,
        user_data=user_data,
        dependent_groups=admin.dependent_groups(FEATURE_GROUP_TYPES[feature]) if feature in FEATURE_GROUP_TYPES
        else {},
        source_topics=topics,
        committed_topics=committed,
        group_configs=group_configs,
        group_configs_error=configs_error,
        group_has_offsets=has_offsets,
    )


def take_snapshot(admin: ClusterAdmin, group_id: str) -> OffsetSnapshot:
    """The group's committed offsets now, tied to the cluster's id."""
    return snapshot_from(admin.describe_cluster().cluster_id, admin.describe_group(group_id),
                         admin.group_offsets(group_id))


def evaluate_condition(admin: GroupAdmin, group_id: str, condition: GroupCondition) -> ConditionResult:
    """Read what ``condition`` needs about ``group_id`` and judge it (sensors and triggers call this)."""
    if condition.kind == "lag":
        try:
            offsets = admin.group_offsets(group_id)
        except errors.GroupNotFound:
            # its lag is unknown, not 0: fail as an Empty wait on an unknown id does, naming what was meant
            near = similar_group_ids(group_id, admin.group_ids())
            raise errors.GroupNotFound(
                f"Group {show_id(group_id)} does not exist on this cluster"
                + (f"; {describe_similar(group_id, near)}" if near else "")
                + ". A group that does not exist has no lag to drain (unknown, not 0)",
                remedy="Fix the group id (kafka-groups --list shows every group with its type).") from None
        return judge(condition, offsets=offsets)
    try:
        desc = admin.describe_group(group_id)
    except errors.GroupNotFound:
        desc = None
    if desc is None and condition.kind == "empty" and not condition.allow_absent:
        # an Empty wait on an id the cluster does not know fails (follow), naming the ids the user may have meant
        absent = judge(condition, description=None)
        return replace(absent, detail={**absent.detail, "group_id": group_id,
                                       "similar": similar_group_ids(group_id, admin.group_ids())})
    if condition.kind == "migrated" and condition.liveness_s > 0 and desc is not None and desc.members:
        # a member's liveness shows as progress: its partitions' committed offsets advancing
        return judge(condition, description=desc, offsets=admin.group_offsets(group_id))
    return judge(condition, description=desc)
