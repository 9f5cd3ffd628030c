"""The cluster and its features: who the brokers are, which release each runs, and the finalized feature levels
(``kafka-metadata-quorum``, ``kafka-features``)."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from kafka.admin import UpdateFeatureType
from kafka.protocol.metadata import ApiVersionsRequest

from airflow_provider_kip848.kafka.model import (
    AdvertisedApis,
    BrokerVersion,
    ClusterFeatures,
    ClusterInfo,
    FeatureUpdate,
)
from airflow_provider_kip848.kafka.native import converters
from airflow_provider_kip848.kafka.native.admin.base import NativeBase
from airflow_provider_kip848.kafka.native.api_versions import advertised_apis
from airflow_provider_kip848.kafka.translate import feature_refusal


class NativeFeatures(NativeBase):
    """The cluster's brokers and features, and feature updates."""

    def describe_cluster(self) -> ClusterInfo:
        """Cluster id, controller and brokers (``kafka-metadata-quorum``/``DescribeCluster``).

        librdkafka sends DescribeCluster to the broker its metadata names as the controller, and once that node
        dies it waits for it until its next metadata refresh (minutes): one attempt of the whole request timeout
        failed a restore during a failover. So each attempt takes a quarter of the timeout, and after one that
        timed out, a metadata request (any live broker answers it) names a live controller for the next."""
        deadline = time.monotonic() + self._t.timeout_s
        attempt = max(2.0, self._t.timeout_s / 4)

        def ask() -> Any:
            while True:
                per = max(0.5, min(attempt, deadline - time.monotonic()))
                try:
                    return self._t.confluent.describe_cluster(request_timeout=per).result(per + 5)
                except KafkaException as exc:
                    err = exc.args[0] if exc.args else None
                    timed_out = isinstance(err, KafkaError) and err.code() == KafkaError._TIMED_OUT
                    if not timed_out or time.monotonic() + 0.5 >= deadline:
                        raise
                try:  # refresh the metadata: a live broker names the controller
                    self._t.confluent.list_topics(timeout=max(0.5, min(attempt, deadline - time.monotonic())))
                except KafkaException:
                    pass

        return converters.cluster_info(self._t.retrying(ask))

    def broker_versions(self) -> list[BrokerVersion]:
        """Each broker's release line, from the ``metadata.version`` range it supports (see :class:`BrokerVersion`)."""
        versions = []
        for broker in self.describe_cluster().brokers:
            response = self._t.send(
                lambda: ApiVersionsRequest(client_software_name="airflow-provider-kip848",
                                           client_software_version="0", min_version=3),
                node_id=broker.node_id,
            )
            versions.append(converters.broker_version(broker.node_id, response))
        return versions

    def advertised_apis(self) -> tuple[AdvertisedApis, ...]:
        """What each address of the connection's ``client_bootstrap_servers`` (default: its bootstrap servers)
        advertises in ApiVersions, asked directly (:mod:`~airflow_provider_kip848.kafka.native.api_versions`)."""
        return advertised_apis(self.settings)

    def describe_features(self) -> ClusterFeatures:
        """Supported ranges and finalized levels of every feature (``kafka-features describe``)."""
        return converters.cluster_features(self._t.kafka_python_call("describe_features"))

    def _send_feature_update(self, plan: FeatureUpdate, *, dry_run: bool, unsafe: bool) -> None:
        kind = UpdateFeatureType.UPGRADE
        if plan.action in ("downgrade", "disable"):
            kind = UpdateFeatureType.UNSAFE_DOWNGRADE if unsafe else UpdateFeatureType.SAFE_DOWNGRADE
        result = self._t.kafka_python_call("update_features", {plan.feature: (kind, plan.to_level)},
                                           validate_only=dry_run)
        outcome = result.get(plan.feature, "OK")
        if outcome != "OK":
            raise feature_refusal(plan.feature, plan, outcome)
