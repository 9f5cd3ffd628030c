"""CLI backend: the same administrative actions as :class:`~airflow_provider_kip848.kafka.native.KafkaAdmin`,
done by Kafka's own tools (``kafka-features``, ``kafka-configs``, ``kafka-consumer-groups``,
``kafka-streams-groups``, ``kafka-groups``, ``kafka-get-offsets``).

Why two backends: the tools are what Kafka's runbooks prescribe and what
platform teams trust; the native backend is faster and needs no JVM. The
parity tests run both against the same broker and require equal results, so
either can be used and each checks the other. Validation, idempotency,
no-op detection and read-back are shared (:class:`~..api.GroupAdmin` and
:mod:`..rules`), so both refuse the same bad input with the same error before
sending anything; this module only says how each change is sent.

What the tools cannot do, this backend does not pretend to: ``kafka-configs``
has no validate-only mode (a dry run validates locally against the broker's
bounds and stops), and no tool removes group members (use the native backend).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from airflow_provider_kip848.kafka import errors
from airflow_provider_kip848.kafka.api import GroupAdmin
from airflow_provider_kip848.kafka.arguments import require_group_id
from airflow_provider_kip848.kafka.cli import parsers
from airflow_provider_kip848.kafka.cli.runner import KafkaToolRunner
from airflow_provider_kip848.kafka.cli.tools import KafkaTools
from airflow_provider_kip848.kafka.model import (
    ClusterFeatures,
    ConsumerGroupDescription,
    FeatureUpdate,
    GroupConfig,
    GroupCoordinatorConfig,
    GroupDescription,
    GroupListing,
    GroupOffsets,
    GroupType,
    StreamsGroupDescription,
    TopicPartition,
)
from airflow_provider_kip848.kafka.rules.group_configs import ConfigChangePlan
from airflow_provider_kip848.kafka.rules.offsets import refuse_offsets_change_by_tools
from airflow_provider_kip848.kafka.settings import ClientSettings


class KafkaCli(GroupAdmin):
    """Group, feature and config administration through the Kafka CLI tools."""

    def __init__(self, settings: ClientSettings, tools: KafkaTools | None = None, timeout: float = 120.0) -> None:
        self.settings = settings
        self.runner = KafkaToolRunner(settings, tools, timeout)

    def __repr__(self) -> str:
        return f"KafkaCli({self.settings!r}, {self.runner.tools!r})"

    def close(self) -> None:
        """Nothing to release: every tool run is its own process."""

    def _run(self, tool: str, *args: str, files: dict[str, str] | None = None) -> str:
        return self.runner.run(tool, list(args), files=files).stdout

    # -- features ------------------------------------------------------------

    def describe_features(self) -> ClusterFeatures:
        return parsers.parse_features_describe(self._run("kafka-features", "describe"))

    def _send_feature_update(self, plan: FeatureUpdate, *, dry_run: bool, unsafe: bool) -> None:
        target = plan.feature if plan.action == "disable" else f"{plan.feature}={plan.to_level}"
        args = [plan.action, "--feature", target]
        if unsafe and plan.action != "upgrade":
            args.append("--unsafe")
        if dry_run:
            args.append("--dry-run")
        self._run("kafka-features", *args)

    # -- broker and group configs ---------------------------------------------

    def group_coordinator_config(self, broker_id: int | None = None) -> GroupCoordinatorConfig:
        if broker_id is None:
            broker_id = self._any_broker_id()
        with self.requires("read the brokers' group.* configs", ("DESCRIBE_CONFIGS", "CLUSTER", None)):
            text = self._run("kafka-configs", "--describe", "--all", "--entity-type", "brokers",
                             "--entity-name", str(broker_id))
        values = {n: e.value for n, e in parsers.parse_config_entries(text).items()
                  if n.startswith("group.") and e.value is not None}
        return GroupCoordinatorConfig(broker_id=broker_id, values=values)

    def _any_broker_id(self) -> int:
        text = self._run("kafka-broker-api-versions")
        ids = sorted(int(m.group(1)) for m in re.finditer(r"\(id: (\d+) rack:", text))
        if not ids:
            raise errors.KafkaToolError("kafka-broker-api-versions listed no brokers.")
        return ids[0]

    def describe_group_config(self, group_id: str) -> GroupConfig:
        require_group_id(group_id)
        with self.requires(f"read the configs of group {group_id!r}", ("DESCRIBE_CONFIGS", "GROUP", group_id)):
            text = self._run("kafka-configs", "--describe", "--all", "--entity-type", "groups",
                             "--entity-name", group_id)
        return parsers.parse_group_config(group_id, text)

    def _send_group_config_change(self, plan: ConfigChangePlan, *, dry_run: bool) -> None:
        if dry_run:  # kafka-configs has no validate-only mode: a dry run stops after the local validation
            return
        args = ["--alter", "--entity-type", "groups", "--entity-name", plan.group_id]
        if plan.to_set:
            args += ["--add-config", ",".join(f"{k}={v}" for k, v in plan.to_set.items())]
        if plan.to_delete:
            args += ["--delete-config", ",".join(plan.to_delete)]
        self._run("kafka-configs", *args)

    # -- groups ------------------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        states: dict[str, str] = {}
        for tool in ("kafka-consumer-groups", "kafka-streams-groups", "kafka-share-groups"):
            states.update(parsers.parse_list_states(self._run(tool, "--list", "--state")))
        return parsers.parse_groups_list(self._run("kafka-groups", "--list"), states)

    def group_ids(self) -> list[str]:
        """One ``kafka-groups --list`` (one JVM), where :meth:`list_groups` adds a ``--list --state`` per type."""
        return [g.group_id for g in parsers.parse_groups_list(self._run("kafka-groups", "--list"))]

    def group_listing(self, group_id: str) -> GroupListing:
        require_group_id(group_id)
        for listing in parsers.parse_groups_list(self._run("kafka-groups", "--list")):
            if listing.group_id == group_id:
                return listing
        if self.settings.uses_sasl or self.settings.uses_ssl:  # only a secured cluster can hide a group
            self._check_group_visible(group_id)
        raise errors.GroupNotFound(f"Group {group_id!r} does not exist on {self.settings.bootstrap_servers}.")

    def _check_group_visible(self, group_id: str) -> None:
        """Raise :class:`AuthorizationFailed` if the principal lacks DESCRIBE on the group (``--list``
        leaves out groups it may not describe; ``--describe`` of one says so)."""
        try:
            with self.requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
                self._run("kafka-consumer-groups", "--describe", "--group", group_id, "--state")
        except errors.AuthorizationFailed:
            raise
        except errors.Kip848Error:
            pass

    def describe_group(self, group_id: str) -> GroupDescription:
        if self.group_listing(group_id).type is GroupType.STREAMS:
            return self.describe_streams_group(group_id)
        return self.describe_consumer_group(group_id)

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        require_group_id(group_id)
        base = ["--describe", "--group", group_id, "--verbose"]
        with self.requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            state = self._run("kafka-consumer-groups", *base, "--state")
            members = self._run("kafka-consumer-groups", *base, "--members")
        return parsers.parse_consumer_group(group_id, state, members)

    def describe_streams_group(self, group_id: str) -> StreamsGroupDescription:
        require_group_id(group_id)
        base = ["--describe", "--group", group_id, "--verbose"]
        with self.requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            state = self._run("kafka-streams-groups", *base, "--state")
            members = self._run("kafka-streams-groups", *base, "--members")
        return parsers.parse_streams_group(group_id, state, members)

    def delete_group(self, group_id: str) -> None:
        require_group_id(group_id)
        streams = self.group_listing(group_id).type is GroupType.STREAMS
        tool = "kafka-streams-groups" if streams else "kafka-consumer-groups"
        with self.requires(f"delete group {group_id!r}", ("DELETE", "GROUP", group_id)):
            self._run(tool, "--delete", "--group", group_id)

    # -- offsets -----------------------------------------------------------------

    def group_offsets(self, group_id: str) -> GroupOffsets:
        require_group_id(group_id)
        listing = self.group_listing(group_id)
        tool = "kafka-streams-groups" if listing.type is GroupType.STREAMS else "kafka-consumer-groups"
        with self.requires(f"read the committed offsets of group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            text = self._run(tool, "--describe", "--group", group_id, "--offsets", "--verbose")
        offsets = parsers.parse_group_offsets(group_id, text)
        starts = self.log_start_offsets([TopicPartition(p.topic, p.partition) for p in offsets.partitions])
        return GroupOffsets(group_id, tuple(
            replace(p, log_start=starts.get(TopicPartition(p.topic, p.partition))) for p in offsets.partitions))

    def log_start_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        tps = sorted(set(tps))
        if not tps:
            return {}
        try:
            out = self._run("kafka-get-offsets", "--topic-partitions", ",".join(str(tp) for tp in tps), "--time", "-2")
        except errors.UnknownTopicOrPartition as exc:  # the tool says "could not match any", not which
            raise errors.UnknownTopicOrPartition(f"No such topic-partition: {', '.join(map(str, tps))}.") from exc
        return parsers.parse_get_offsets(out)

    def _log_bounds(self, offsets: Mapping[TopicPartition, int],
                    current: GroupOffsets) -> dict[TopicPartition, tuple[int | None, int | None]]:
        bounds = {TopicPartition(p.topic, p.partition): (p.log_start, p.log_end) for p in current.partitions}
        missing = [tp for tp in offsets if tp not in bounds]
        if missing:
            starts = self.log_start_offsets(missing)
            for tp in missing:
                if tp not in starts:
                    raise errors.UnknownTopicOrPartition(f"No such topic-partition: {tp}.")
                latest = parsers.parse_get_offsets(self._run("kafka-get-offsets", "--topic-partitions", str(tp),
                                                             "--time", "-1"))
                bounds[tp] = (starts[tp], latest.get(tp))
        return bounds

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int], *, dry_run: bool = False,
                            before_send: Callable[[Mapping[TopicPartition, int]], None] | None = None,
                            ) -> GroupOffsets:
        """As :meth:`GroupAdmin.alter_group_offsets`, but a streams group is refused first, dry run included, on its
        listed type (see :func:`~airflow_provider_kip848.kafka.rules.offsets.refuse_offsets_change_by_tools`)."""
        require_group_id(group_id)
        try:
            group_type: GroupType | None = self.group_listing(group_id).type
        except errors.GroupNotFound:
            group_type = None
        refuse_offsets_change_by_tools(group_id, group_type)
        return super().alter_group_offsets(group_id, offsets, dry_run=dry_run, before_send=before_send)

    def _send_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int],
                      desc: GroupDescription | None) -> None:
        """``kafka-consumer-groups --reset-offsets --from-file`` with a private CSV of ``topic,partition,offset``.
        Never for a streams group (the tool would not refuse one, KAFKA-20454): :meth:`alter_group_offsets` refuses
        those before this is reached."""
        csv = "".join(f"{tp.topic},{tp.partition},{int(o)}\n" for tp, o in sorted(offsets.items()))
        self._run("kafka-consumer-groups", "--reset-offsets", "--group", group_id, "--from-file", "{offsets.csv}",
                  "--execute", files={"offsets.csv": csv})
