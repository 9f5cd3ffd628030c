"""Native admin backend: confluent-kafka's AdminClient, plus kafka-python where it lacks a request.

Which client answers what, and why:

* confluent-kafka (librdkafka): cluster description, group configs
  (``ResourceType.GROUP``), committed offsets, log start/end offsets, offset
  alteration. Public, typed APIs.
* kafka-python 3.0: feature flags (``DescribeFeatures`` / ``UpdateFeatures``),
  the unfiltered ``ListGroups`` that carries each group's type (confluent
  drops streams and share groups), classic ``DescribeGroups`` with raw
  assignment ``userData``, ``LeaveGroup`` for member removal, ``DeleteGroups``,
  per-broker ``ApiVersions``, and through :mod:`.protocol` the two describe
  requests no Python client ships: ``ConsumerGroupDescribe`` v1 (epochs and
  each member's classic/consumer type) and ``StreamsGroupDescribe``.

Every method returns the typed facts of :mod:`.model` and raises the errors
of :mod:`.errors`; no client object or client exception leaks out.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import replace
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_provider_kip848.kafka import errors as E
from airflow_provider_kip848.kafka.readback import read_back
from airflow_provider_kip848.kafka.features import outcome_message, plan_feature_update
from airflow_provider_kip848.kafka.group_configs import plan_config_change
from airflow_provider_kip848.kafka.offsets import require_empty, require_inside_log, require_offsets
from airflow_provider_kip848.kafka.model import (
    METADATA_VERSION_NAMES,
    BrokerNode,
    BrokerVersion,
    ClusterFeatures,
    ClusterInfo,
    ConfigEntry,
    ConsumerGroupDescription,
    ConsumerGroupMember,
    Feature,
    FeatureUpdate,
    GroupConfig,
    GroupConfigChange,
    GroupCoordinatorConfig,
    GroupListing,
    GroupOffsets,
    GroupType,
    MemberProtocol,
    MemberRemoval,
    PartitionOffsets,
    StreamsGroupDescription,
    StreamsGroupMember,
    StreamsTask,
    TaskAssignment,
    TopicPartition,
    normalize_state,
    partitions,
)
from airflow_provider_kip848.kafka.settings import ClientSettings

#: Java ``ConfigEntry.ConfigSource`` names, which the CLI prints, by librdkafka's numeric codes.
CONFIG_SOURCE_NAMES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "DYNAMIC_CLIENT_METRICS_CONFIG",
    8: "DYNAMIC_GROUP_CONFIG",
}

_GROUP_ID_NOT_FOUND = 69
_UNSUPPORTED_VERSION = 35

# kafka-python logs every connect/disconnect at INFO and warns about its own event-loop timing;
# in an Airflow task log that drowns what the provider says. While a broker restarts it logs each
# refused reconnect and metadata refresh at ERROR (dozens a minute in a waiting trigger's log), which
# the provider reports once, as a retriable error with the remedy. Applied only where the user has
# not configured these loggers.
for _name, _level in (("kafka", logging.WARNING), ("kafka.net.selector", logging.ERROR),
                      ("kafka.net", logging.CRITICAL), ("kafka.cluster", logging.CRITICAL)):
    if logging.getLogger(_name).level == logging.NOTSET:
        logging.getLogger(_name).setLevel(_level)


class KafkaAdmin:
    """Administrative reads and changes against one cluster.

    Clients are created lazily and closed by :meth:`close` (or the context
    manager), so constructing a ``KafkaAdmin`` never touches the network.
    """

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self._kp_admin: Any = None
        #: errors librdkafka reports out of band (an authentication failure arrives here,
        #: while the request future only times out)
        self._client_errors: list[Any] = []
        #: credentials checked once (SASL/SSL): a refused login is reported at once, not after a request timeout
        self._credentials_checked = not (settings.uses_sasl or settings.uses_ssl)

    def __repr__(self) -> str:
        return f"KafkaAdmin({self.settings!r})"

    def __enter__(self) -> "KafkaAdmin":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._kp_admin is not None:
            self._kp_admin.close()
            self._kp_admin = None

    def __del__(self) -> None:  # a forgotten close() must not leave kafka-python's network thread behind
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # -- clients -----------------------------------------------------------

    @functools.cached_property
    def _confluent(self):
        from confluent_kafka.admin import AdminClient

        def on_error(err: Any) -> None:
            if len(self._client_errors) < 50:
                self._client_errors.append(err)

        return AdminClient({**self.settings.confluent_config(), "logger": _QUIET_LOGGER, "error_cb": on_error})

    @property
    def _kafka_python(self):
        if self._kp_admin is None:
            from kafka.admin import KafkaAdminClient
            from kafka.errors import KafkaError

            # kafka-python retries a refused login until its bootstrap timeout and then only says
            # "unable to bootstrap"; librdkafka names the authentication failure within a second.
            self._check_credentials()
            try:
                self._kp_admin = KafkaAdminClient(**self.settings.kafka_python_config())
            except KafkaError as exc:
                raise translate_kafka_python(exc, self.settings) from exc
        return self._kp_admin

    def _reported_connection_error(self) -> E.Kip848Error | None:
        """An authentication failure, or all brokers down, as librdkafka reported it out of band."""
        from confluent_kafka import KafkaError

        if (auth := self._auth_error()) is not None:
            return auth
        if any(e.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT, KafkaError._RESOLVE)
               for e in self._client_errors):
            return E.KafkaConnectionError(f"Cannot reach any broker at {self.settings.bootstrap_servers}.")
        return None

    def _auth_error(self) -> E.AuthenticationFailed | None:
        from confluent_kafka import KafkaError

        if "_confluent" in self.__dict__:
            self._confluent.poll(0)  # error callbacks are served by poll()
        for err in self._client_errors:
            if err.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._SSL):
                return E.AuthenticationFailed(
                    f"The brokers at {self.settings.bootstrap_servers} refused this connection's credentials: "
                    f"{_no_secrets(err.str(), self.settings)}."
                )
        return None

    def _check_credentials(self) -> None:
        """On a secured connection, raise :class:`AuthenticationFailed` before the first request if the
        brokers refuse the login (a request would only time out, after ``request_timeout_ms``)."""
        if self._credentials_checked:
            return
        refused = self._probe_connection()
        if refused is not None:
            raise refused
        self._credentials_checked = True

    def _probe_connection(self) -> E.Kip848Error | None:
        """None once librdkafka gets metadata; an AuthenticationFailed as soon as it reports one; a
        (retriable) KafkaConnectionError when no broker answered within the request timeout."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + self._timeout_s()
        while time.monotonic() < deadline:
            try:
                self._confluent.list_topics(timeout=0.5)
                return None
            except KafkaException:
                pass
            if (auth := self._auth_error()) is not None:
                return auth
        return self._reported_connection_error() or E.KafkaConnectionError(
            f"No broker at {self.settings.bootstrap_servers} answered within {self.settings.request_timeout_ms} ms.")

    def _timeout_s(self) -> float:
        return self.settings.request_timeout_ms / 1000

    def _requires(self, action: str, *needs: tuple[str, str, str | None]):
        """An authorization failure inside names the permission ``action`` needs (see :func:`errors.requires`)."""
        return E.requires(action, *needs, principal=self.settings.sasl_username)

    def _retrying(self, call, *args: Any, **kwargs: Any) -> Any:
        """Run ``call``, retrying retriable broker errors with backoff until the request timeout.

        A coordinator still loading after a broker restart, or a leader that
        moved, answers with a retriable error; the Java Admin client retries
        those, and so do we, instead of failing the task.
        """
        from confluent_kafka import KafkaException
        from kafka.errors import KafkaError

        self._check_credentials()
        deadline = time.monotonic() + self._timeout_s()
        backoff = 0.1
        while True:
            try:
                return call(*args, **kwargs)
            except KafkaError as exc:
                if getattr(exc, "retriable", False) and time.monotonic() + backoff < deadline:
                    time.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
                    continue
                raise translate_kafka_python(exc, self.settings) from exc
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if (auth := self._auth_error()) is not None:
                    raise auth from exc
                if err is not None and err.retriable() and time.monotonic() + backoff < deadline:
                    time.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
                    continue
                error = translate_confluent(exc, self.settings)
                if isinstance(error, E.OperationTimedOut):
                    error = self._reported_connection_error() or error
                raise error from exc

    def _kp_call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call a kafka-python admin method, translating its errors into this provider's."""
        return self._retrying(lambda: getattr(self._kafka_python, method)(*args, **kwargs))

    def _kp_send(self, request_factory, node_id: int | None = None, group_id: str | None = None) -> Any:
        """Send a raw request (to ``node_id`` or to ``group_id``'s coordinator) through kafka-python."""
        admin = self._kafka_python

        async def send():
            node = node_id
            if group_id is not None:
                node = await admin._find_coordinator_id(group_id)
            return await admin._manager.send(request_factory(), node_id=node)

        return self._retrying(lambda: admin._manager.run(send))

    def _confluent_result(self, future: Any) -> Any:
        return self._retrying(lambda: future.result(self._timeout_s() + 5))

    # -- cluster -----------------------------------------------------------

    def describe_cluster(self) -> ClusterInfo:
        """Cluster id, controller and brokers (``kafka-metadata-quorum``/``DescribeCluster``)."""
        desc = self._retrying(
            lambda: self._confluent.describe_cluster(request_timeout=self._timeout_s()).result(self._timeout_s() + 5)
        )
        return ClusterInfo(
            cluster_id=desc.cluster_id,
            controller_id=desc.controller.id if desc.controller else None,
            brokers=tuple(
                BrokerNode(node_id=n.id, host=n.host, port=n.port, rack=n.rack)
                for n in sorted(desc.nodes, key=lambda n: n.id)
            ),
        )

    def broker_versions(self) -> list[BrokerVersion]:
        """Each broker's release line, from the ``metadata.version`` range it supports (see :class:`BrokerVersion`)."""
        from kafka.protocol.metadata import ApiVersionsRequest

        versions = []
        for broker in self.describe_cluster().brokers:
            response = self._kp_send(
                lambda: ApiVersionsRequest(client_software_name="airflow-provider-kip848",
                                           client_software_version="0", min_version=3),
                node_id=broker.node_id,
            )
            mv_max = next((f.max_version for f in response.supported_features or [] if f.name == "metadata.version"), None)
            name = METADATA_VERSION_NAMES.get(mv_max, str(mv_max)) if mv_max is not None else "unknown"
            versions.append(BrokerVersion(
                node_id=broker.node_id,
                release=name.split("-")[0] if "-IV" in name else "unknown",
                metadata_version_max=name,
                api_versions={k.api_key: (k.min_version, k.max_version) for k in response.api_keys},
            ))
        return versions

    def group_coordinator_config(self, broker_id: int | None = None) -> GroupCoordinatorConfig:
        """The broker's ``group.*`` configs (protocols, migration policy, session/heartbeat/standby bounds)."""
        from confluent_kafka.admin import ConfigResource, ResourceType

        if broker_id is None:
            info = self.describe_cluster()
            broker_id = info.controller_id if info.controller_id is not None else info.brokers[0].node_id
        resource = ConfigResource(ResourceType.BROKER, str(broker_id))
        with self._requires("read the brokers' group.* configs", ("DESCRIBE_CONFIGS", "CLUSTER", None)):
            entries = self._retrying(
                lambda: self._confluent.describe_configs([resource], request_timeout=self._timeout_s())[resource]
                .result(self._timeout_s() + 5)
            )
        values = {name: e.value for name, e in entries.items() if name.startswith("group.")}
        return GroupCoordinatorConfig(broker_id=broker_id, values=values)

    # -- features ----------------------------------------------------------

    def describe_features(self) -> ClusterFeatures:
        """Supported ranges and finalized levels of every feature (``kafka-features describe``)."""
        raw = self._kp_call("describe_features")
        features = {}
        for name, info in raw.items():
            supported_min, supported_max = info.get("supported") or (0, 0)
            finalized = info.get("finalized")
            features[name] = Feature(
                name=name,
                supported_min=int(supported_min),
                supported_max=int(supported_max),
                finalized_level=int(finalized[1]) if finalized else 0,
                epoch=info.get("finalized_epoch"),
            )
        return ClusterFeatures(features)

    def update_feature(
        self,
        feature: str,
        level: int | str | None = None,
        *,
        action: str = "upgrade",
        dry_run: bool = False,
        unsafe: bool = False,
    ) -> FeatureUpdate:
        """Upgrade, downgrade or disable one feature; a no-op (nothing sent) when already at the level.

        ``dry_run`` asks the controller to validate the change (``--dry-run``)
        without applying it. After a real change the level is read back.
        """
        from kafka.admin import UpdateFeatureType

        plan = plan_feature_update(self.describe_features(), feature, level, action, dry_run=dry_run)
        if plan.noop:
            return plan
        kind = UpdateFeatureType.UPGRADE
        if action in ("downgrade", "disable"):
            kind = UpdateFeatureType.UNSAFE_DOWNGRADE if unsafe else UpdateFeatureType.SAFE_DOWNGRADE
        with self._requires(f"{'validate' if dry_run else 'apply'} {action} of {feature}", ("ALTER", "CLUSTER", None)):
            result = self._kp_call("update_features", {feature: (kind, plan.to_level)}, validate_only=dry_run)
            outcome = result.get(feature, "OK")
            if outcome != "OK":
                raise _feature_error(feature, plan, outcome)
        if dry_run:
            return replace(plan, message=outcome_message(plan, dry_run=True))
        after = read_back(lambda: self.describe_features().level(feature), lambda lvl: lvl == plan.to_level,
                          self._timeout_s())
        if after != plan.to_level:
            raise E.KafkaToolError(f"{feature} reads back at {after} after the change to {plan.to_level}.")
        return replace(plan, applied=True, message=outcome_message(plan, dry_run=False))

    # -- groups: listing and description -------------------------------------

    def list_groups(self) -> list[GroupListing]:
        """Every group with its type and state, streams and share groups included."""
        rows = self._kp_call("list_groups")
        listings = [
            GroupListing(
                group_id=row["group_id"],
                type=GroupType.parse(row.get("group_type")),
                state=normalize_state(row.get("group_state")),
                protocol_type=row.get("protocol_type") or "",
            )
            for row in rows
        ]
        return sorted(listings, key=lambda g: g.group_id)

    def group_listing(self, group_id: str) -> GroupListing:
        """The listing of one group, or :class:`GroupNotFound` (:class:`AuthorizationFailed` when the
        principal may not describe it: ListGroups leaves such groups out instead of refusing)."""
        E.require_group_id(group_id)
        for listing in self.list_groups():
            if listing.group_id == group_id:
                return listing
        self._check_group_visible(group_id)
        self._confirm_absent(group_id)
        raise E.GroupNotFound(f"Group {group_id!r} does not exist on {self.settings.bootstrap_servers}.")

    def _confirm_absent(self, group_id: str) -> None:
        """Ask the group's coordinator before calling a group absent.

        ListGroups is answered from every coordinator partition a broker leads *now*: while a broker
        shuts down, restarts or hands a partition over, the partitions it no longer (or not yet)
        leads are silently left out, and a live group vanishes from the listing. A sensor waiting
        for "empty" must not take that for "the group is gone". The coordinator itself answers
        OffsetFetch with a retriable NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS in that
        window (retried here), and a group that has committed offsets exists.
        """
        # kafka-python, not confluent-kafka: librdkafka 2.16 crashes the process (SIGSEGV) on
        # ListConsumerGroupOffsets of a group id that does not exist.
        committed = self._kp_call("list_group_offsets", {group_id: None}).get(group_id) or {}
        if any(getattr(meta, "offset", -1) >= 0 for meta in committed.values()):
            raise E.KafkaConnectionError(
                f"Group {group_id!r} has committed offsets but is missing from the brokers' group listing: "
                "a group coordinator is moving (a broker restarting or shutting down)",
                remedy="Retry in a few seconds; sensors poke again by themselves.")

    def _check_group_visible(self, group_id: str) -> None:
        """Raise :class:`AuthorizationFailed` if the principal lacks DESCRIBE on the group.

        FindCoordinator needs DESCRIBE on the group, exists or not, so it tells "not there" from
        "not allowed to see it". Any other failure leaves the verdict to the caller.
        """
        admin = self._kafka_python

        async def find():
            return await admin._find_coordinator_id(group_id)

        try:
            with self._requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
                self._retrying(lambda: admin._manager.run(find))
        except E.AuthorizationFailed:
            raise
        except E.Kip848Error:
            pass

    def describe_group(self, group_id: str) -> ConsumerGroupDescription | StreamsGroupDescription:
        """Describe a group of any type supported here (classic, consumer, streams)."""
        E.require_group_id(group_id)
        listing = self.group_listing(group_id)
        if listing.type is GroupType.STREAMS:
            return self.describe_streams_group(group_id)
        return self.describe_consumer_group(group_id, _listing=listing)

    def describe_consumer_group(self, group_id: str, *, _listing: GroupListing | None = None) -> ConsumerGroupDescription:
        """A classic or consumer group with members, assignments and (for consumer groups) epochs.

        Consumer (KIP-848) groups are described with ``ConsumerGroupDescribe``
        v1, which also says member by member whether a member still speaks the
        classic protocol (a mixed group during an online migration).
        """
        E.require_group_id(group_id)
        with self._requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            return self._describe_consumer_group(group_id, _listing)

    def _describe_consumer_group(self, group_id: str, _listing: GroupListing | None) -> ConsumerGroupDescription:
        # A group converting between classic and consumer (its first consumer member joins, or its
        # last one leaves) can answer ConsumerGroupDescribe as "not found" while the listing, read a
        # moment later, already (or still) says consumer. That is a race, not a wrong type: read again.
        for attempt in range(2):
            try:
                return self._describe_consumer_group_once(group_id, _listing if attempt == 0 else None)
            except E.WrongGroupType as exc:
                if exc.actual is not GroupType.CONSUMER:
                    raise
                time.sleep(0.2 * (attempt + 1))
        return self._describe_consumer_group_once(group_id, None)

    def _describe_consumer_group_once(self, group_id: str, _listing: GroupListing | None) -> ConsumerGroupDescription:
        from airflow_provider_kip848.kafka.protocol import ConsumerGroupDescribeRequest

        unsupported = None
        try:
            response = self._kp_send(
                lambda: ConsumerGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False),
                group_id=group_id,
            )
            group = response.groups[0]
            if group.error_code == 0:
                return _consumer_group_from_response(group, self._coordinator_id(group_id))
            if group.error_code == _UNSUPPORTED_VERSION:
                unsupported = group.error_message or "UNSUPPORTED_VERSION"
            elif group.error_code != _GROUP_ID_NOT_FOUND:
                raise _group_error(group_id, group.error_code, group.error_message, self.settings)
        except E.UnsupportedBrokerVersion as exc:
            unsupported = exc.what
        listing = _listing or self.group_listing(group_id)
        if listing.type is GroupType.CLASSIC:
            return self._describe_classic_group(group_id)
        if unsupported is not None:
            # no ConsumerGroupDescribe: group.version is 0 (KIP-848 off) or the brokers predate 4.0
            raise E.UnsupportedBrokerVersion(
                f"The cluster does not serve ConsumerGroupDescribe, needed for {listing.type.value} group "
                f"{group_id!r} ({unsupported}).",
                remedy="Finalize group.version=1 (kafka-features upgrade --feature group.version=1) on Kafka 4.0+ "
                       "brokers, or upgrade the brokers.",
            )
        raise E.WrongGroupType(
            f"Group {group_id!r} is a {listing.type.value} group, not a classic or consumer group.",
            actual=listing.type,
            remedy="Use describe_streams_group() for streams groups." if listing.type is GroupType.STREAMS else None,
        )

    def _describe_classic_group(self, group_id: str) -> ConsumerGroupDescription:
        raw = self._kp_call("describe_groups", [group_id])[group_id]
        members = []
        for m in raw.get("members", []):
            assignment = m.get("member_assignment") or {}
            pairs = [(a["topic"], p) for a in assignment.get("assigned_partitions", []) for p in a["partitions"]]
            members.append(ConsumerGroupMember(
                member_id=m["member_id"],
                client_id=m.get("client_id") or "",
                host=_host(m.get("client_host")),
                instance_id=m.get("group_instance_id"),
                assignment=partitions(pairs),
                protocol=MemberProtocol.CLASSIC,
            ))
        return ConsumerGroupDescription(
            group_id=group_id,
            type=GroupType.CLASSIC,
            state=normalize_state(raw.get("group_state")),
            assignor=raw.get("protocol_data") or "",
            coordinator_id=self._coordinator_id(group_id),
            members=tuple(sorted(members, key=lambda m: m.member_id)),
        )

    def classic_assignment_user_data(self, group_id: str) -> dict[str, bytes]:
        """Member id -> the ``userData`` of its classic assignment (non-empty means a custom client assignor).

        The broker refuses an online upgrade to the consumer protocol when any
        member's assignment carries userData ("unsupported custom assignor").
        """
        raw = self._kp_call("describe_groups", [group_id])[group_id]
        out = {}
        for m in raw.get("members", []):
            data = (m.get("member_assignment") or {}).get("user_data") or b""
            out[m["member_id"]] = data.encode() if isinstance(data, str) else bytes(data)
        return out

    def describe_streams_group(self, group_id: str) -> StreamsGroupDescription:
        """A streams group with members, task assignments and epochs (``StreamsGroupDescribe``)."""
        E.require_group_id(group_id)
        with self._requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            return self._describe_streams_group(group_id)

    def _describe_streams_group(self, group_id: str) -> StreamsGroupDescription:
        from airflow_provider_kip848.kafka.protocol import StreamsGroupDescribeRequest

        try:
            response = self._kp_send(
                lambda: StreamsGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False),
                group_id=group_id,
            )
        except E.UnsupportedBrokerVersion as exc:
            raise E.UnsupportedBrokerVersion(
                f"The cluster does not serve StreamsGroupDescribe ({exc.what}).",
                remedy="Finalize streams.version=1 (kafka-features upgrade --feature streams.version=1) on "
                       "Kafka 4.2.1+ brokers, or upgrade the brokers.",
            ) from exc
        group = response.groups[0]
        if group.error_code == _UNSUPPORTED_VERSION:
            raise E.UnsupportedBrokerVersion(
                f"The cluster does not serve StreamsGroupDescribe ({group.error_message or 'UNSUPPORTED_VERSION'}).",
                remedy="Finalize streams.version=1 (kafka-features upgrade --feature streams.version=1) on "
                       "Kafka 4.2.1+ brokers, or upgrade the brokers.",
            )
        if group.error_code == _GROUP_ID_NOT_FOUND:
            listing = self.group_listing(group_id)  # GroupNotFound if absent
            raise E.WrongGroupType(
                f"Group {group_id!r} is a {listing.type.value} group, not a streams group.",
                remedy="Use describe_consumer_group() for classic and consumer groups.",
            )
        if group.error_code != 0:
            raise _group_error(group_id, group.error_code, group.error_message, self.settings)
        return _streams_group_from_response(group, self._coordinator_id(group_id))

    def streams_group_source_partitions(self, group_id: str) -> tuple[TopicPartition, ...]:
        """Input partitions (source and repartition topics) of the group's active tasks."""
        from airflow_provider_kip848.kafka.protocol import StreamsGroupDescribeRequest

        response = self._kp_send(
            lambda: StreamsGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False),
            group_id=group_id,
        )
        group = response.groups[0]
        if group.error_code != 0 or group.topology is None:
            return ()
        inputs = {
            s.subtopology_id: [*s.source_topics, *(t.name for t in s.repartition_source_topics)]
            for s in group.topology.subtopologies or []
        }
        pairs = set()
        for m in group.members:
            for task in m.assignment.active_tasks:
                for topic in inputs.get(task.subtopology_id, []):
                    pairs.update((topic, p) for p in task.partitions)
        return partitions(pairs)

    def _coordinator_id(self, group_id: str) -> int | None:
        admin = self._kafka_python

        async def find():
            return await admin._find_coordinator_id(group_id)

        try:
            return self._retrying(lambda: admin._manager.run(find))
        except E.Kip848Error:
            return None

    def delete_group(self, group_id: str) -> None:
        """Delete an empty group (its committed offsets go with it)."""
        self.group_listing(group_id)
        with self._requires(f"delete group {group_id!r}", ("DELETE", "GROUP", group_id)):
            self._delete_group(group_id)

    def _delete_group(self, group_id: str) -> None:
        outcome = self._kp_call("delete_groups", [group_id]).get(group_id, "OK")  # "OK" or an error class name
        if outcome == "NonEmptyGroupError":
            raise E.GroupNotEmpty(f"Group {group_id!r} still has active members; it cannot be deleted.")
        if outcome == "GroupIdNotFoundError":
            raise E.GroupNotFound(f"Group {group_id!r} does not exist on {self.settings.bootstrap_servers}.")
        if outcome != "OK":
            from kafka import errors as kerr

            error_cls = getattr(kerr, outcome, kerr.KafkaError)
            raise translate_kafka_python(error_cls(f"DeleteGroups of {group_id!r}"), self.settings)

    # -- membership ----------------------------------------------------------

    def remove_members(
        self,
        group_id: str,
        *,
        member_ids: Iterable[str] = (),
        instance_ids: Iterable[str] = (),
        all_members: bool = False,
        missing_ok: bool = False,
        reason: str = "removed by airflow-provider-kip848",
    ) -> MemberRemoval:
        """Force members out of a classic or consumer group with LeaveGroup.

        This is how a classic group is emptied before an offline streams
        migration without waiting a whole session timeout. Static members are
        removed by ``group.instance.id`` (which also releases the instance id),
        dynamic ones by member id. Streams groups reject LeaveGroup, so they
        are refused here with the reason. Unknown ids raise before anything is
        removed unless ``missing_ok``.
        """
        from kafka.admin import MemberToRemove

        member_ids = _id_list("member_ids", member_ids)
        instance_ids = _id_list("instance_ids", instance_ids)
        desc = self.describe_group(group_id)
        if isinstance(desc, StreamsGroupDescription):
            raise E.WrongGroupType(
                f"Group {group_id!r} is a streams group: the broker rejects LeaveGroup for streams groups.",
                remedy="Stop the application's instances (they leave on close) or wait for "
                       "streams.session.timeout.ms to expire them.",
            )
        by_member = {m.member_id: m for m in desc.members}
        by_instance = {m.instance_id: m for m in desc.members if m.instance_id}
        wanted = {i for i in member_ids if i in by_member} | {by_instance[i].member_id for i in instance_ids
                                                               if i in by_instance}
        missing = sorted({i for i in member_ids if i not in by_member} | {i for i in instance_ids if i not in by_instance})
        if missing and not missing_ok:
            raise E.GroupNotFound(
                f"Not members of group {group_id!r}: {', '.join(missing)}. Current members: "
                f"{', '.join(f'{m.member_id} ({m.instance_id})' if m.instance_id else m.member_id for m in desc.members) or 'none'}.",
                remedy="Describe the group again and pass ids of current members (or all_members=True).",
            )
        targets = list(desc.members) if all_members else [by_member[i] for i in sorted(wanted)]
        if not targets:
            return MemberRemoval(group_id, desc.type, removed=(), failed={}, not_found=tuple(missing))
        requests = [
            MemberToRemove(group_instance_id=m.instance_id, reason=reason) if m.instance_id
            else MemberToRemove(member_id=m.member_id, reason=reason)
            for m in targets
        ]
        with self._requires(f"remove members of group {group_id!r}", ("READ", "GROUP", group_id)):
            results = self._kp_call("remove_group_members", group_id, requests)
        # the response is keyed by member id, or by group.instance.id for static members
        ident_of = {}
        for m in targets:
            ident = m.instance_id or m.member_id
            ident_of[m.member_id] = ident
            if m.instance_id:
                ident_of[m.instance_id] = ident
        removed, failed = [], {}
        for key, error in results.items():
            ident = ident_of.get(key, key)
            if getattr(error, "errno", 0) == 0:
                removed.append(ident)
            else:
                failed[ident] = getattr(error, "__name__", type(error).__name__)
        return MemberRemoval(group_id, desc.type, removed=tuple(sorted(removed)), failed=failed,
                             not_found=tuple(missing))

    # -- offsets -------------------------------------------------------------

    def group_offsets(self, group_id: str) -> GroupOffsets:
        """Committed offsets of a group with each partition's log start and end (lag = end - committed).

        Partitions assigned to members but without a commit are included with
        ``committed=None``, as ``kafka-consumer-groups --describe`` lists them.
        """
        from confluent_kafka import ConsumerGroupTopicPartitions

        desc = self.describe_group(group_id)
        request = [ConsumerGroupTopicPartitions(group_id)]
        with self._requires(f"read the committed offsets of group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            result = self._retrying(
                lambda: self._confluent.list_consumer_group_offsets(request, request_timeout=self._timeout_s())[
                    group_id].result(self._timeout_s() + 5)
            )
        committed: dict[TopicPartition, tuple[int, int | None]] = {}
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                raise translate_confluent(tp.error, self.settings)
            if tp.offset >= 0:
                committed[TopicPartition(tp.topic, tp.partition)] = (tp.offset, tp.leader_epoch)
        if isinstance(desc, StreamsGroupDescription):
            assigned = set(self.streams_group_source_partitions(group_id))
        else:
            assigned = {tp for m in desc.members for tp in m.assignment}
        wanted = sorted(set(committed) | assigned)
        starts, ends = self.log_offsets(wanted)
        rows = tuple(
            PartitionOffsets(
                topic=tp.topic,
                partition=tp.partition,
                committed=committed[tp][0] if tp in committed else None,
                leader_epoch=committed[tp][1] if tp in committed else None,
                log_start=starts.get(tp),
                log_end=ends.get(tp),
            )
            for tp in wanted
        )
        return GroupOffsets(group_id=group_id, partitions=rows)

    def log_offsets(self, tps: Iterable[TopicPartition]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """Log start and end offsets (earliest/latest, read_uncommitted) of the given partitions."""
        tps = list(tps)
        if not tps:
            return {}, {}
        topics = ", ".join(sorted({tp.topic for tp in tps}))
        with self._requires(f"read the log offsets of {topics}", ("DESCRIBE", "TOPIC", topics)):
            return self._log_offsets(tps)

    def _log_offsets(self, tps: list[TopicPartition]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        from confluent_kafka import TopicPartition as CTP
        from confluent_kafka.admin import OffsetSpec

        self._check_partitions_exist(tps)
        out = []
        for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):
            futures = self._retrying(
                lambda spec=spec: self._confluent.list_offsets({CTP(tp.topic, tp.partition): spec for tp in tps},
                                                               request_timeout=self._timeout_s())
            )
            found = {}
            for ctp, fut in futures.items():
                info = self._confluent_result(fut)
                found[TopicPartition(ctp.topic, ctp.partition)] = info.offset
            out.append(found)
        return out[0], out[1]

    def topic_offsets(self, topics: Iterable[str]) -> dict[TopicPartition, tuple[int, int]]:
        """Log start and end offsets of every partition of ``topics`` (the fixed range a validation reads)."""
        metadata = self._retrying(lambda: self._confluent.list_topics(timeout=self._timeout_s()))
        tps = []
        for topic in topics:
            if topic not in metadata.topics or metadata.topics[topic].error is not None:
                raise E.UnknownTopicOrPartition(f"Topic {topic!r} does not exist.")
            tps += [TopicPartition(topic, p) for p in metadata.topics[topic].partitions]
        starts, ends = self.log_offsets(tps)
        return {tp: (starts[tp], ends[tp]) for tp in sorted(tps)}

    def _check_partitions_exist(self, tps: Iterable[TopicPartition]) -> None:
        metadata = self._retrying(lambda: self._confluent.list_topics(timeout=self._timeout_s()))
        missing = sorted(tp for tp in tps
                         if tp.topic not in metadata.topics or tp.partition not in metadata.topics[tp.topic].partitions)
        if missing:
            raise E.UnknownTopicOrPartition(f"No such topic-partition: {', '.join(map(str, missing))}.")

    def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int], *, dry_run: bool = False
    ) -> GroupOffsets:
        """Set committed offsets (to restore a snapshot); only on an empty group, only inside the log.

        Returns the offsets read back after the change (or the current ones for a dry run).
        """
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka import TopicPartition as CTP

        E.require_group_id(group_id)
        offsets = require_offsets(offsets)
        try:
            require_empty(self.describe_group(group_id))
        except E.GroupNotFound:
            pass  # no group, no members: the commit creates it (a restore after the group was lost)
        starts, ends = self.log_offsets(offsets)
        require_inside_log(offsets, {tp: (starts[tp], ends[tp]) for tp in offsets})
        if not dry_run and offsets:
            request = [ConsumerGroupTopicPartitions(
                group_id, [CTP(tp.topic, tp.partition, int(o)) for tp, o in sorted(offsets.items())])]
            topics = ", ".join(sorted({tp.topic for tp in offsets}))
            with self._requires(f"commit offsets for group {group_id!r}", ("READ", "GROUP", group_id),
                                ("READ", "TOPIC", topics)):
                result = self._retrying(
                    lambda: self._confluent.alter_consumer_group_offsets(request, request_timeout=self._timeout_s())[
                        group_id].result(self._timeout_s() + 5)
                )
                for tp in result.topic_partitions or []:
                    if tp.error is not None:
                        raise translate_confluent(tp.error, self.settings)
        return self.group_offsets(group_id)

    # -- group configs -----------------------------------------------------------

    def describe_group_config(self, group_id: str) -> GroupConfig:
        """Every group config of ``group_id`` with its effective value and source (``--describe --all``)."""
        from confluent_kafka.admin import ConfigResource, ResourceType

        E.require_group_id(group_id)
        resource = ConfigResource(ResourceType.GROUP, group_id)
        with self._requires(f"read the configs of group {group_id!r}", ("DESCRIBE_CONFIGS", "GROUP", group_id)):
            entries = self._retrying(
                lambda: self._confluent.describe_configs([resource], request_timeout=self._timeout_s())[resource]
                .result(self._timeout_s() + 5)
            )
        return GroupConfig(
            group_id=group_id,
            entries={
                name: ConfigEntry(name=name, value=e.value, source=CONFIG_SOURCE_NAMES.get(int(e.source), str(e.source)),
                                  sensitive=bool(e.is_sensitive))
                for name, e in sorted(entries.items())
            },
        )

    def alter_group_config(
        self,
        group_id: str,
        set_configs: Mapping[str, object] | None = None,
        delete_configs: Iterable[str] = (),
        *,
        dry_run: bool = False,
    ) -> GroupConfigChange:
        """Set and/or delete group-level configs, validated against the broker's bounds first.

        Idempotent: values already in place and deletes of absent overrides
        send nothing. Returns the dynamic values before and after (read back).
        """
        from confluent_kafka.admin import AlterConfigOpType, ConfigResource, ResourceType
        from confluent_kafka.admin import ConfigEntry as CEntry

        plan = plan_config_change(self.describe_group_config(group_id), set_configs, delete_configs,
                                  self.group_coordinator_config())
        if plan.noop:
            return plan.unchanged(dry_run=dry_run)
        resource = ConfigResource(
            ResourceType.GROUP, group_id,
            incremental_configs=[CEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                                 for k, v in plan.to_set.items()]
            + [CEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in plan.to_delete],
        )
        with self._requires(f"{'validate a change of' if dry_run else 'change'} the configs of group {group_id!r}",
                            ("ALTER_CONFIGS", "GROUP", group_id)):
            self._retrying(
                lambda: self._confluent.incremental_alter_configs([resource], validate_only=dry_run,
                                                                  request_timeout=self._timeout_s())[resource]
                .result(self._timeout_s() + 5)
            )
        if dry_run:
            return plan.unchanged(dry_run=True)
        after = read_back(lambda: self.describe_group_config(group_id).dynamic, plan.is_applied,
                          self._timeout_s())
        return plan.result(after, applied=True, dry_run=False)


# -- response -> model ---------------------------------------------------------


def _host(raw: str | None) -> str:
    return (raw or "").lstrip("/")


def _consumer_group_from_response(group: Any, coordinator_id: int | None) -> ConsumerGroupDescription:
    members = []
    for m in group.members:
        member_type = getattr(m, "member_type", -1)
        protocol = {0: MemberProtocol.CLASSIC, 1: MemberProtocol.CONSUMER}.get(member_type, MemberProtocol.CONSUMER)
        members.append(ConsumerGroupMember(
            member_id=m.member_id,
            client_id=m.client_id,
            host=_host(m.client_host),
            instance_id=m.instance_id,
            assignment=partitions((t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions),
            target_assignment=partitions(
                (t.topic_name, p) for t in m.target_assignment.topic_partitions for p in t.partitions),
            member_epoch=m.member_epoch,
            protocol=protocol,
        ))
    return ConsumerGroupDescription(
        group_id=group.group_id,
        type=GroupType.CONSUMER,
        state=normalize_state(group.group_state),
        assignor=group.assignor_name,
        coordinator_id=coordinator_id,
        members=tuple(sorted(members, key=lambda m: m.member_id)),
        group_epoch=group.group_epoch,
        target_assignment_epoch=group.assignment_epoch,
    )


def _tasks(task_ids: Any) -> tuple[StreamsTask, ...]:
    return tuple(sorted(StreamsTask(t.subtopology_id, p) for t in task_ids for p in t.partitions))


def _task_assignment(a: Any) -> TaskAssignment:
    return TaskAssignment(active=_tasks(a.active_tasks), standby=_tasks(a.standby_tasks), warmup=_tasks(a.warmup_tasks))


def _streams_group_from_response(group: Any, coordinator_id: int | None) -> StreamsGroupDescription:
    members = tuple(sorted(
        (
            StreamsGroupMember(
                member_id=m.member_id,
                process_id=m.process_id,
                client_id=m.client_id,
                member_epoch=m.member_epoch,
                protocol=MemberProtocol.CLASSIC if m.is_classic else MemberProtocol.STREAMS,
                assignment=_task_assignment(m.assignment),
                target_assignment=_task_assignment(m.target_assignment),
                instance_id=m.instance_id,
            )
            for m in group.members
        ),
        key=lambda m: m.member_id,
    ))
    return StreamsGroupDescription(
        group_id=group.group_id,
        state=normalize_state(group.group_state),
        coordinator_id=coordinator_id,
        group_epoch=group.group_epoch,
        target_assignment_epoch=group.assignment_epoch,
        topology_epoch=group.topology.epoch if group.topology is not None else None,
        members=members,
    )


# -- errors ----------------------------------------------------------------------


def _id_list(name: str, ids: Iterable[str] | None) -> tuple[str, ...]:
    """Member or instance ids as a tuple; a bare string (one id, or a list rendered as text) is refused."""
    if ids is None:
        return ()
    if isinstance(ids, (str, bytes)):
        raise E.InvalidArgument(f"{name} must be a list of ids, not the string {ids!r}.",
                                remedy=f"Pass a list, e.g. {name}=[{ids!r}].")
    return tuple(ids)


def _feature_error(feature: str, plan: FeatureUpdate, outcome: str) -> E.Kip848Error:
    if "Authorization" in outcome:
        return E.AuthorizationFailed(f"Not allowed to change {feature}: {outcome}",
                                     remedy="The principal needs ALTER on the CLUSTER resource.",
                                     resource_type="CLUSTER")
    return E.InvalidFeatureLevel(f"The controller refused {plan.action} of {feature} to {plan.to_level}: {outcome}")


def _group_error(group_id: str, code: int, message: str | None, settings: ClientSettings) -> E.Kip848Error:
    from kafka import errors as kerr

    error = kerr.for_code(code)
    name = error.__name__
    text = message or getattr(error, "description", None) or name
    if code == _GROUP_ID_NOT_FOUND:
        return E.GroupNotFound(f"Group {group_id!r}: {message or 'not found'}.")
    if name == "NonEmptyGroupError" or code == 68:
        return E.GroupNotEmpty(f"Group {group_id!r} is not empty: {text}.")
    return translate_kafka_python(error(text), settings)


def translate_kafka_python(exc: Exception, settings: ClientSettings) -> Exception:
    """kafka-python exception -> this provider's error (or ``exc`` itself when nothing fits)."""
    from kafka import errors as kerr

    name = type(exc).__name__
    where = settings.bootstrap_servers
    if isinstance(exc, kerr.KafkaTimeoutError):
        return E.KafkaConnectionError(f"No broker answered at {where} in time ({exc}).")
    if isinstance(exc, kerr.KafkaConnectionError):
        return E.KafkaConnectionError(f"Cannot reach {where}: {exc}.")
    if "Authentication" in name or "SaslAuthentication" in name:
        return E.AuthenticationFailed(f"The brokers at {where} refused this connection's credentials ({name}).")
    if name.endswith("AuthorizationFailedError"):
        # Cluster-, Group-, Topic-, TransactionalId-AuthorizationFailedError; str(exc) repeats the whole
        # request and response, so only the error's name and description are kept
        resource = name.removesuffix("AuthorizationFailedError").upper() or None
        description = getattr(exc, "description", "") or ""
        return E.AuthorizationFailed(
            f"The principal of this connection is not authorized on {resource or 'a resource'} for this request "
            f"({name}{': ' + description if description else ''}).",
            resource_type=resource,
        )
    if isinstance(exc, kerr.RequestTimedOutError):
        return E.OperationTimedOut(f"The cluster at {where} did not answer in time: {exc}.")
    if isinstance(exc, kerr.UnsupportedVersionError):
        return E.UnsupportedBrokerVersion(f"The brokers at {where} do not support this request: {exc}.")
    if getattr(exc, "retriable", False):
        return E.OperationTimedOut(
            f"The cluster at {where} kept answering {name} for {settings.request_timeout_ms} ms "
            "(a broker restarting or a coordinator loading)."
        )
    return exc


def translate_confluent(exc: Exception, settings: ClientSettings) -> Exception:
    """confluent-kafka KafkaException / KafkaError -> this provider's error (or ``exc`` itself)."""
    from confluent_kafka import KafkaError

    err = exc if isinstance(exc, KafkaError) else (exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None)
    if err is None:
        return exc
    code = err.code()
    where = settings.bootstrap_servers
    text = err.str()
    if code in (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT):
        return E.OperationTimedOut(f"The cluster at {where} did not answer in time: {text}.")
    if code in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE):
        return E.KafkaConnectionError(f"Cannot reach {where}: {text}.")
    if code in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
        return E.AuthenticationFailed(f"The brokers at {where} refused this connection's credentials: {_no_secrets(text, settings)}.")
    if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
        return E.AuthorizationFailed(f"Not authorized on the GROUP: {text}.",
                                     remedy="Grant the principal the needed ACL on the group (DESCRIBE, READ or ALTER_CONFIGS/DESCRIBE_CONFIGS).",
                                     resource_type="GROUP")
    if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        return E.AuthorizationFailed(f"Not authorized on a TOPIC: {text}.",
                                     remedy="Grant the principal DESCRIBE (and READ for offsets) on the group's topics.",
                                     resource_type="TOPIC")
    if code == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
        return E.AuthorizationFailed(f"Not authorized on the CLUSTER: {text}.",
                                     remedy="Grant the principal the needed ACL on the CLUSTER resource.",
                                     resource_type="CLUSTER")
    if code == KafkaError.GROUP_ID_NOT_FOUND:
        return E.GroupNotFound(f"{text}.")
    if code == KafkaError.NON_EMPTY_GROUP:
        return E.GroupNotEmpty(f"{text}.")
    if code == KafkaError.INVALID_CONFIG:
        return E.InvalidGroupConfig(f"The broker refused the config: {text}.")
    if code == KafkaError.UNSUPPORTED_VERSION:
        return E.UnsupportedBrokerVersion(f"The brokers at {where} do not support this request: {text}.")
    if code in (KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS):
        return E.GroupNotEmpty(f"The group has active members: {text}.")
    return exc


def _no_secrets(text: str, settings: ClientSettings) -> str:
    for secret in (settings.sasl_password, settings.ssl_key_password):
        if secret:
            text = text.replace(secret, "***")
    return text


class _QuietLogger:
    """librdkafka logs connection errors at WARNING/ERROR; the errors we raise say the same, once."""

    def log(self, *args: Any, **kwargs: Any) -> None:
        pass

    debug = info = warning = error = exception = critical = log


_QUIET_LOGGER = _QuietLogger()
