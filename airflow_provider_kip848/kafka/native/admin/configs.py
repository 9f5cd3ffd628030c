"""Configs: the brokers' ``group.*`` settings (the group coordinator's) and the group-level configs
(``kafka-configs --entity-type groups``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka.admin import AlterConfigOpType, ConfigResource, ResourceType
from confluent_kafka.admin import ConfigEntry as ConfluentConfigEntry

from airflow_provider_kip848.kafka.arguments import require_group_id
from airflow_provider_kip848.kafka.model import GroupConfig, GroupCoordinatorConfig
from airflow_provider_kip848.kafka.native import converters
from airflow_provider_kip848.kafka.native.admin.base import NativeBase
from airflow_provider_kip848.kafka.rules.group_configs import ConfigChangePlan


def _coordinator_config(broker_id: int, entries: Mapping[str, Any]) -> GroupCoordinatorConfig:
    """One broker's DescribeConfigs answer, kept to its ``group.*`` settings that have a value."""
    return GroupCoordinatorConfig(broker_id=broker_id, values={name: e.value for name, e in entries.items()
                                                               if name.startswith("group.") and e.value is not None})


class NativeConfigs(NativeBase):
    """Brokers' group coordinator configs and group configs, read and changed."""

    def group_coordinator_config(self, broker_id: int | None = None) -> GroupCoordinatorConfig:
        """The broker's ``group.*`` configs (protocols, migration policy, session/heartbeat/standby bounds)."""
        if broker_id is None:
            info = self.describe_cluster()
            broker_id = info.controller_id if info.controller_id is not None else info.brokers[0].node_id
        resource = ConfigResource(ResourceType.BROKER, str(broker_id))
        with self.requires("read the brokers' group.* configs", ("DESCRIBE_CONFIGS", "CLUSTER", None)):
            entries = self._describe_configs(resource)
        return _coordinator_config(broker_id, entries)

    def group_coordinator_configs(self) -> tuple[GroupCoordinatorConfig, ...]:
        """Every broker's ``group.*`` configs, each asked of its own broker, all requests in flight at once (a
        broker's own config is answered by that broker; librdkafka takes one broker resource per request)."""
        ids = sorted(b.node_id for b in self.describe_cluster().brokers)
        resources = [ConfigResource(ResourceType.BROKER, str(i)) for i in ids]
        timeout = self._t.timeout_s

        def read() -> list[Any]:
            futures = [self._t.confluent.describe_configs([r], request_timeout=timeout)[r] for r in resources]
            return [f.result(timeout + 5) for f in futures]

        with self.requires("read the brokers' group.* configs", ("DESCRIBE_CONFIGS", "CLUSTER", None)):
            answers = self._t.retrying(read)
        return tuple(_coordinator_config(i, entries) for i, entries in zip(ids, answers, strict=True))

    def describe_group_config(self, group_id: str) -> GroupConfig:
        """Every group config of ``group_id`` with its effective value and source (``--describe --all``)."""
        require_group_id(group_id)
        resource = ConfigResource(ResourceType.GROUP, group_id)
        with self.requires(f"read the configs of group {group_id!r}", ("DESCRIBE_CONFIGS", "GROUP", group_id)):
            return converters.group_config(group_id, self._describe_configs(resource))

    def _send_group_config_change(self, plan: ConfigChangePlan, *, dry_run: bool) -> None:
        resource = ConfigResource(
            ResourceType.GROUP, plan.group_id,
            incremental_configs=[ConfluentConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                                 for k, v in plan.to_set.items()]
            + [ConfluentConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in plan.to_delete],
        )
        timeout = self._t.timeout_s
        self._t.retrying(
            lambda: self._t.confluent.incremental_alter_configs([resource], validate_only=dry_run,
                                                                request_timeout=timeout)[resource]
            .result(timeout + 5))

    def _group_configs(self, group_ids: list[str]) -> dict[str, dict[str, str | None]]:
        """The dynamic configs of each group (one DescribeConfigs for all of them; {} for none)."""
        if not group_ids:
            return {}
        resources = [ConfigResource(ResourceType.GROUP, g) for g in group_ids]
        timeout = self._t.timeout_s

        def read() -> list[Any]:
            futures = self._t.confluent.describe_configs(resources, request_timeout=timeout)
            return [futures[r].result(timeout + 5) for r in resources]

        with self.requires("read the configs of groups that do not exist",
                           *(("DESCRIBE_CONFIGS", "GROUP", g) for g in group_ids)):
            answers = self._t.retrying(read)
        return {g: converters.group_config(g, entries).dynamic for g, entries in zip(group_ids, answers, strict=True)}
