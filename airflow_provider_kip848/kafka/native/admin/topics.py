"""Topics: created, listed and deleted (what the change lock holds is a topic)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from confluent_kafka.admin import NewTopic

from airflow_provider_kip848.kafka.native.admin.base import NativeBase


class NativeTopics(NativeBase):
    """Topic creation, existence and deletion."""

    def create_topic(self, topic: str, *, partitions: int = 1, config: Mapping[str, str] | None = None) -> bool:
        """Create ``topic`` (replication factor: the brokers' default); False when it already exists."""
        return self.create_topics([topic], partitions=partitions, config=config)[topic]

    def create_topics(self, topics: Iterable[str], *, partitions: int = 1,
                      config: Mapping[str, str] | None = None) -> dict[str, bool]:
        """Every one of ``topics`` in one CreateTopics request; topic -> False when it already existed. All or
        nothing: when one is refused, the ones this call created are deleted again before the refusal is
        raised (a caller such as the change lock never holds half of what it asked for)."""
        names = list(dict.fromkeys(topics))
        if not names:
            return {}
        news = [NewTopic(t, num_partitions=partitions, replication_factor=-1, config=dict(config or {}))
                for t in names]
        futures = self._t.confluent.create_topics(news, request_timeout=self._t.timeout_s)
        created: dict[str, bool] = {}
        refusal: BaseException | None = None
        for t in names:
            try:
                with self.requires(f"create the topic {t}", ("CREATE", "TOPIC", t)):
                    self._t.result(futures[t])
            except Exception as exc:  # noqa: BLE001 - TOPIC_ALREADY_EXISTS is an answer, not a failure
                if "TOPIC_ALREADY_EXISTS" in str(exc) or "already exists" in str(exc):
                    created[t] = False
                elif refusal is None:
                    refusal = exc
                continue
            created[t] = True
        if refusal is not None:
            for t in (t for t, new in created.items() if new):
                self.delete_topic(t)
            raise refusal
        return created

    def topic_exists(self, topic: str) -> bool:
        """Whether the cluster's metadata lists ``topic``."""
        return topic in self._metadata().topics

    def topic_partition_counts(self, topics: Iterable[str]) -> dict[str, int | None]:
        """Each topic's partition count from one metadata read; None for a topic the cluster does not have."""
        known = self._metadata().topics
        return {t: (len(known[t].partitions) if t in known and known[t].error is None else None) for t in topics}

    def delete_topic(self, topic: str) -> None:
        """Delete ``topic`` (already gone is fine) and wait until the metadata no longer lists it."""
        futures = self._t.confluent.delete_topics([topic], request_timeout=self._t.timeout_s)
        try:
            with self.requires(f"delete the topic {topic}", ("DELETE", "TOPIC", topic)):
                self._t.result(futures[topic])
        except Exception as exc:  # noqa: BLE001 - already gone is fine
            if "UNKNOWN_TOPIC" not in str(exc):
                raise
        deadline = time.monotonic() + self._t.timeout_s
        while self.topic_exists(topic) and time.monotonic() < deadline:  # deletion is asynchronous on the brokers
            time.sleep(0.1)
