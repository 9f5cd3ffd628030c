"""CLI backend: the same administrative actions as :class:`~airflow_provider_kip848.kafka.admin.KafkaAdmin`,
done by Kafka's own tools (``kafka-features``, ``kafka-configs``, ``kafka-consumer-groups``,
``kafka-streams-groups``, ``kafka-groups``, ``kafka-get-offsets``).

Why two backends: the tools are what Kafka's runbooks prescribe and what
platform teams trust; the native backend is faster and needs no JVM. The
parity tests run both against the same broker and require equal results, so
either can be used and each checks the other. Validation, idempotency and
no-op detection are shared (:mod:`..features`, :mod:`..group_configs`), so
both refuse the same bad input with the same error before sending anything.

What the tools cannot do, this backend does not pretend to: ``kafka-configs``
has no validate-only mode (a dry run validates locally against the broker's
bounds and stops), and no tool removes group members (use the native backend).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from airflow_provider_kip848.kafka import errors as E
from airflow_provider_kip848.kafka.readback import read_back
from airflow_provider_kip848.kafka.cli import parsers as P
from airflow_provider_kip848.kafka.cli.runner import KafkaToolRunner, KafkaTools
from airflow_provider_kip848.kafka.features import outcome_message, plan_feature_update
from airflow_provider_kip848.kafka.group_configs import plan_config_change
from airflow_provider_kip848.kafka.offsets import require_empty, require_inside_log, require_offsets
from airflow_provider_kip848.kafka.model import (
    ClusterFeatures,
    ConsumerGroupDescription,
    FeatureUpdate,
    GroupConfig,
    GroupConfigChange,
    GroupCoordinatorConfig,
    GroupListing,
    GroupOffsets,
    GroupType,
    StreamsGroupDescription,
    TopicPartition,
)
from airflow_provider_kip848.kafka.settings import ClientSettings

class KafkaCli:
    """Group, feature and config administration through the Kafka CLI tools."""

    def __init__(self, settings: ClientSettings, tools: KafkaTools | None = None, timeout: float = 120.0) -> None:
        self.settings = settings
        self.runner = KafkaToolRunner(settings, tools, timeout)

    def __repr__(self) -> str:
        return f"KafkaCli({self.settings!r}, {self.runner.tools!r})"

    def __enter__(self) -> "KafkaCli":
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def close(self) -> None:
        pass

    def _run(self, tool: str, *args: str, files: dict[str, str] | None = None) -> str:
        return self.runner.run(tool, list(args), files=files).stdout

    def _requires(self, action: str, *needs: tuple[str, str, str | None]):
        """An authorization failure inside names the permission ``action`` needs (see :func:`errors.requires`)."""
        return E.requires(action, *needs, principal=self.settings.sasl_username)

    # -- features ------------------------------------------------------------

    def describe_features(self) -> ClusterFeatures:
        return P.parse_features_describe(self._run("kafka-features", "describe"))

    def update_feature(
        self,
        feature: str,
        level: int | str | None = None,
        *,
        action: str = "upgrade",
        dry_run: bool = False,
        unsafe: bool = False,
    ) -> FeatureUpdate:
        plan = plan_feature_update(self.describe_features(), feature, level, action, dry_run=dry_run)
        if plan.noop:
            return plan
        args = [action, "--feature", feature if action == "disable" else f"{feature}={plan.to_level}"]
        if unsafe and action != "upgrade":
            args.append("--unsafe")
        if dry_run:
            args.append("--dry-run")
        with self._requires(f"{'validate' if dry_run else 'apply'} {action} of {feature}", ("ALTER", "CLUSTER", None)):
            self._run("kafka-features", *args)
        if dry_run:
            return replace(plan, message=outcome_message(plan, dry_run=True))
        after = read_back(lambda: self.describe_features().level(feature), lambda lvl: lvl == plan.to_level,
                          self.settings.request_timeout_ms / 1000)
        if after != plan.to_level:
            raise E.KafkaToolError(f"{feature} reads back at {after} after the change to {plan.to_level}.")
        return replace(plan, applied=True, message=outcome_message(plan, dry_run=False))

    # -- broker and group configs ---------------------------------------------

    def group_coordinator_config(self, broker_id: int | None = None) -> GroupCoordinatorConfig:
        if broker_id is None:
            broker_id = self._any_broker_id()
        with self._requires("read the brokers' group.* configs", ("DESCRIBE_CONFIGS", "CLUSTER", None)):
            text = self._run("kafka-configs", "--describe", "--all", "--entity-type", "brokers",
                             "--entity-name", str(broker_id))
        values = {n: e.value for n, e in P.parse_config_entries(text).items() if n.startswith("group.")}
        return GroupCoordinatorConfig(broker_id=broker_id, values=values)

    def _any_broker_id(self) -> int:
        import re

        text = self._run("kafka-broker-api-versions")
        ids = sorted(int(m.group(1)) for m in re.finditer(r"\(id: (\d+) rack:", text))
        if not ids:
            raise E.KafkaToolError("kafka-broker-api-versions listed no brokers.")
        return ids[0]

    def describe_group_config(self, group_id: str) -> GroupConfig:
        E.require_group_id(group_id)
        with self._requires(f"read the configs of group {group_id!r}", ("DESCRIBE_CONFIGS", "GROUP", group_id)):
            text = self._run("kafka-configs", "--describe", "--all", "--entity-type", "groups",
                             "--entity-name", group_id)
        return P.parse_group_config(group_id, text)

    def alter_group_config(
        self,
        group_id: str,
        set_configs: Mapping[str, object] | None = None,
        delete_configs: Iterable[str] = (),
        *,
        dry_run: bool = False,
    ) -> GroupConfigChange:
        plan = plan_config_change(self.describe_group_config(group_id), set_configs, delete_configs,
                                  self.group_coordinator_config())
        if dry_run or plan.noop:  # kafka-configs has no validate-only mode: a dry run stops after validation
            return plan.unchanged(dry_run=dry_run)
        args = ["--alter", "--entity-type", "groups", "--entity-name", group_id]
        if plan.to_set:
            args += ["--add-config", ",".join(f"{k}={v}" for k, v in plan.to_set.items())]
        if plan.to_delete:
            args += ["--delete-config", ",".join(plan.to_delete)]
        with self._requires(f"change the configs of group {group_id!r}", ("ALTER_CONFIGS", "GROUP", group_id)):
            self._run("kafka-configs", *args)
        after = read_back(lambda: self.describe_group_config(group_id).dynamic, plan.is_applied,
                          self.settings.request_timeout_ms / 1000)
        return plan.result(after, applied=True, dry_run=False)

    # -- groups ------------------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        states: dict[str, str] = {}
        for tool in ("kafka-consumer-groups", "kafka-streams-groups", "kafka-share-groups"):
            states.update(P.parse_list_states(self._run(tool, "--list", "--state")))
        return P.parse_groups_list(self._run("kafka-groups", "--list"), states)

    def group_listing(self, group_id: str) -> GroupListing:
        E.require_group_id(group_id)
        for listing in P.parse_groups_list(self._run("kafka-groups", "--list")):
            if listing.group_id == group_id:
                return listing
        if self.settings.uses_sasl or self.settings.uses_ssl:  # only a secured cluster can hide a group
            self._check_group_visible(group_id)
        raise E.GroupNotFound(f"Group {group_id!r} does not exist on {self.settings.bootstrap_servers}.")

    def _check_group_visible(self, group_id: str) -> None:
        """Raise :class:`AuthorizationFailed` if the principal lacks DESCRIBE on the group (``--list``
        leaves out groups it may not describe; ``--describe`` of one says so)."""
        try:
            with self._requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
                self._run("kafka-consumer-groups", "--describe", "--group", group_id, "--state")
        except E.AuthorizationFailed:
            raise
        except E.Kip848Error:
            pass

    def describe_group(self, group_id: str) -> ConsumerGroupDescription | StreamsGroupDescription:
        if self.group_listing(group_id).type is GroupType.STREAMS:
            return self.describe_streams_group(group_id)
        return self.describe_consumer_group(group_id)

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        E.require_group_id(group_id)
        base = ["--describe", "--group", group_id, "--verbose"]
        with self._requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            state = self._run("kafka-consumer-groups", *base, "--state")
            members = self._run("kafka-consumer-groups", *base, "--members")
        return P.parse_consumer_group(group_id, state, members)

    def describe_streams_group(self, group_id: str) -> StreamsGroupDescription:
        E.require_group_id(group_id)
        base = ["--describe", "--group", group_id, "--verbose"]
        with self._requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            state = self._run("kafka-streams-groups", *base, "--state")
            members = self._run("kafka-streams-groups", *base, "--members")
        return P.parse_streams_group(group_id, state, members)

    def delete_group(self, group_id: str) -> None:
        tool = "kafka-streams-groups" if self.group_listing(group_id).type is GroupType.STREAMS else "kafka-consumer-groups"
        with self._requires(f"delete group {group_id!r}", ("DELETE", "GROUP", group_id)):
            self._run(tool, "--delete", "--group", group_id)

    # -- offsets -----------------------------------------------------------------

    def group_offsets(self, group_id: str) -> GroupOffsets:
        listing = self.group_listing(group_id)
        tool = "kafka-streams-groups" if listing.type is GroupType.STREAMS else "kafka-consumer-groups"
        with self._requires(f"read the committed offsets of group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            text = self._run(tool, "--describe", "--group", group_id, "--offsets", "--verbose")
        offsets = P.parse_group_offsets(group_id, text)
        starts = self.log_start_offsets([TopicPartition(p.topic, p.partition) for p in offsets.partitions])
        return GroupOffsets(group_id, tuple(
            replace(p, log_start=starts.get(TopicPartition(p.topic, p.partition))) for p in offsets.partitions))

    def log_start_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        tps = sorted(set(tps))
        if not tps:
            return {}
        try:
            out = self._run("kafka-get-offsets", "--topic-partitions", ",".join(str(tp) for tp in tps), "--time", "-2")
        except E.UnknownTopicOrPartition as exc:  # the tool says "could not match any", not which
            raise E.UnknownTopicOrPartition(f"No such topic-partition: {', '.join(map(str, tps))}.") from exc
        return P.parse_get_offsets(out)

    def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int], *, dry_run: bool = False
    ) -> GroupOffsets:
        """``--reset-offsets --from-file`` with a private CSV of ``topic,partition,offset``."""
        E.require_group_id(group_id)
        offsets = require_offsets(offsets)
        try:
            desc = self.describe_group(group_id)
        except E.GroupNotFound:
            desc = None  # no group, no members: the commit creates it (a restore after the group was lost)
        if desc is not None:
            require_empty(desc)
        tool = "kafka-streams-groups" if isinstance(desc, StreamsGroupDescription) else "kafka-consumer-groups"
        current = self.group_offsets(group_id) if desc is not None else GroupOffsets(group_id)
        bounds = {TopicPartition(p.topic, p.partition): (p.log_start, p.log_end) for p in current.partitions}
        missing = [tp for tp in offsets if tp not in bounds]
        if missing:
            starts = self.log_start_offsets(missing)
            for tp in missing:
                if tp not in starts:
                    raise E.UnknownTopicOrPartition(f"No such topic-partition: {tp}.")
                latest = P.parse_get_offsets(self._run("kafka-get-offsets", "--topic-partitions", str(tp),
                                                       "--time", "-1"))
                bounds[tp] = (starts[tp], latest.get(tp))
        require_inside_log(offsets, bounds)
        if dry_run or not offsets:
            return current
        csv = "".join(f"{tp.topic},{tp.partition},{int(o)}\n" for tp, o in sorted(offsets.items()))
        topics = ", ".join(sorted({tp.topic for tp in offsets}))
        with self._requires(f"commit offsets for group {group_id!r}", ("READ", "GROUP", group_id),
                            ("READ", "TOPIC", topics)):
            self._run(tool, "--reset-offsets", "--group", group_id, "--from-file", "{offsets.csv}", "--execute",
                      files={"offsets.csv": csv})
        return self.group_offsets(group_id)
