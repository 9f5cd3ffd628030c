"""A change lock kept in the cluster: one run at a time changes a group (or a feature).

Two migrations of the same group at once (a manual trigger while the
scheduled run is in its window, two Airflow deployments, a rerun of a run
that is still waiting) would interleave snapshots, stops and restores. An
Airflow pool or ``max_active_runs`` only serialises runs of one DAG in one
Airflow; the lock must live where every runner meets: the cluster.

The lock is a topic, ``kip848-lock.<resource>``: CreateTopics is atomic on
the controller, so exactly one creator wins and every other one gets
TOPIC_ALREADY_EXISTS. The winner writes one record (the holder: DAG, run,
who triggered it, host, when) so a refused run can say who holds the lock.
Release deletes the topic, only when the caller holds it. A lock left by a
run that ended without releasing it (its worker died) is stale: the caller
decides (``is_stale``, e.g. "that Airflow run is no longer running") and a
stale lock is taken over, the takeover recorded in the result.

Needs CREATE, DESCRIBE, READ, WRITE and DELETE on topics ``kip848-lock.``
(a prefixed ACL). Imports nothing from Airflow, and talks to the cluster only
through the public :class:`~airflow_provider_kip848.kafka.api.ClusterAdmin`
interface (topics) and the connection's client settings (the holder record).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from airflow_provider_kip848.kafka import errors
from airflow_provider_kip848.kafka.api import ClusterAdmin
from airflow_provider_kip848.kafka.documents import load_strict

#: librdkafka's own log lines of the holder record's producer and consumer (connection chatter) go nowhere.
_LIBRDKAFKA_LOG = logging.getLogger("kip848.lock.librdkafka")
_LIBRDKAFKA_LOG.setLevel(logging.CRITICAL)
#: The lock topic's config: one partition holding one record, kept until the lock is released.
_TOPIC_CONFIG = {"retention.ms": "-1", "cleanup.policy": "delete"}

LOCK_TOPIC_PREFIX = "kip848-lock."
_LEGAL = re.compile(r"[^a-zA-Z0-9._-]")


def lock_topic(resource: str) -> str:
    """The lock topic of ``resource`` (e.g. ``group:orders-app``): readable, legal, unique, < 249 chars."""
    if not resource or not str(resource).strip():
        raise errors.Kip848Error("A change lock needs a resource name (e.g. group:<group id>).")
    slug = _LEGAL.sub("_", resource.replace(":", "."))[:180]
    digest = hashlib.sha256(resource.encode()).hexdigest()[:10]
    return f"{LOCK_TOPIC_PREFIX}{slug}.{digest}"


@dataclass(frozen=True)
class LockHolder:
    """Who holds a lock. ``owner`` identifies the holder (one Airflow run): re-acquiring with the same
    owner (a retried task of the same run) succeeds."""

    owner: str
    resource: str = ""
    dag_id: str | None = None
    run_id: str | None = None
    triggered_by: str | None = None
    #: the task that took the lock (a DAG's ``lock`` task, a fleet move); None in records written before it
    task_id: str | None = None
    host: str = field(default_factory=socket.gethostname)
    acquired_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    token: str = field(default_factory=lambda: uuid.uuid4().hex)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LockHolder:  # Any: JSON read back (XCom, a file, a response)
        fields: dict[str, Any] = {k: data.get(k) for k in cls.__dataclass_fields__ if k in data}
        return cls(**fields)

    def describe(self) -> str:
        who = f"DAG {self.dag_id} run {self.run_id}" if self.dag_id else self.owner
        task = f" task {self.task_id}" if self.task_id else ""
        by = f", triggered by {self.triggered_by}" if self.triggered_by else ""
        return f"{who}{task}{by} (on {self.host} since {self.acquired_at})"


@dataclass(frozen=True)
class LockResult:
    resource: str
    topic: str
    holder: LockHolder
    reentered: bool = False
    took_over_from: LockHolder | None = None

    def to_dict(self) -> dict[str, object]:
        return {"held": True, "resource": self.resource, "topic": self.topic, "holder": self.holder.to_dict(),
                "reentered": self.reentered,
                "took_over_from": self.took_over_from.to_dict() if self.took_over_from else None}


class ChangeLock:
    """The lock on one resource, through a :class:`~airflow_provider_kip848.kafka.api.ClusterAdmin`."""

    def __init__(self, admin: ClusterAdmin, resource: str, *, holder_wait_s: float = 10.0) -> None:
        self.admin = admin
        self.resource = resource
        self.topic = lock_topic(resource)
        self.holder_wait_s = holder_wait_s

    # -- reading -------------------------------------------------------------

    def holder(self) -> LockHolder | None:
        """The current holder, None when the lock is free. A lock whose holder record is not readable
        yet (its creator is writing it) is reported after ``holder_wait_s`` as an unknown holder."""
        if not self._exists():
            return None
        record = self._read_holder(self.holder_wait_s)
        if record is None:
            if not self._exists():
                return None
            return LockHolder(owner="(unknown: the lock topic has no holder record)", resource=self.resource,
                              acquired_at="?", host="?", token="")
        return record

    # -- acquire / release ---------------------------------------------------

    def acquire(self, holder: LockHolder, *, is_stale: Callable[[LockHolder], bool] | None = None) -> LockResult:
        """Take the lock for ``holder``; raise :class:`ResourceLocked` naming the current holder."""
        holder = replace(holder, resource=self.resource)
        for _ in range(3):
            if self._create():
                self._write_holder(holder)
                return LockResult(self.resource, self.topic, holder)
            current = self.holder()
            if current is None:
                continue  # released in between: try again
            if current.owner == holder.owner:
                return LockResult(self.resource, self.topic, current, reentered=True)
            if is_stale is not None and current.token and is_stale(current):
                # check again right before deleting: a fresh holder that replaced the stale one stays
                again = self.holder()
                if again is not None and again.token == current.token:
                    self._delete()
                    if self._create():
                        self._write_holder(holder)
                        return LockResult(self.resource, self.topic, holder, took_over_from=current)
                continue
            raise errors.ResourceLocked(
                f"{self.resource} is locked by {current.describe()}: another change of it is in progress",
                remedy=(f"Wait for that run to finish (it releases the lock), then rerun. If that run is dead "
                        f"and did not release it, delete the lock topic {self.topic} "
                        f"(kafka-topics --delete --topic {self.topic}) and rerun."),
                holder=current.to_dict(),
            )
        raise errors.ResourceLocked(f"{self.resource}: the lock changed hands three times while acquiring it",
                                    remedy="Rerun; another run is acquiring and releasing it right now.")

    @classmethod
    def acquire_all(cls, admin: ClusterAdmin, resources: list[str], holder: LockHolder, *,
                    is_stale: Callable[[LockHolder], bool] | None = None) -> list[LockResult]:
        """The locks of several resources for one holder (an application's groups): the free ones created in
        one CreateTopics request and their holder records written by one producer, the others taken as
        :meth:`acquire` takes one (re-entered, a stale holder taken over, or :class:`ResourceLocked` naming
        the holder; the locks taken before it stay with ``holder``, as with one :meth:`acquire` per resource,
        and are released with the run's other locks)."""
        locks = [cls(admin, r) for r in dict.fromkeys(resources)]
        created = admin.create_topics([lock.topic for lock in locks], partitions=1, config=_TOPIC_CONFIG)
        ours = [lock for lock in locks if created.get(lock.topic)]
        holders = {lock.topic: replace(holder, resource=lock.resource) for lock in ours}
        if ours:
            try:
                _write_holders(admin, holders)
            except errors.Kip848Error:
                for lock in ours:  # a lock without its holder record would block everyone: none is left
                    lock._delete()
                raise
        return [LockResult(lock.resource, lock.topic, holders[lock.topic]) if lock.topic in holders
                else lock.acquire(holder, is_stale=is_stale) for lock in locks]

    def release(self, owner: str) -> bool:
        """Delete the lock if ``owner`` holds it; False when it is free or held by someone else."""
        current = self.holder()
        if current is None or current.owner != owner:
            return False
        self._delete()
        return True

    # -- the topic -------------------------------------------------------------

    def _create(self) -> bool:
        return self.admin.create_topic(self.topic, partitions=1, config=_TOPIC_CONFIG)

    def _exists(self) -> bool:
        return self.admin.topic_exists(self.topic)

    def _delete(self) -> None:
        self.admin.delete_topic(self.topic)

    def _write_holder(self, holder: LockHolder) -> None:
        _write_holders(self.admin, {self.topic: holder})

    def _read_holder(self, wait_s: float) -> LockHolder | None:
        consumer = Consumer({**self.admin.settings.confluent_config(),
                             "group.id": f"kip848-lock-reader-{uuid.uuid4().hex}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest", "logger": _LIBRDKAFKA_LOG})
        try:
            consumer.assign([TopicPartition(self.topic, 0, 0)])
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None or msg.error() or msg.value() is None:
                    continue
                try:
                    return LockHolder.from_dict(load_strict((msg.value() or b"").decode("utf-8", "replace"),
                                                            json_only=True, source="the lock's holder record"))
                except (ValueError, TypeError):
                    return LockHolder(owner="(unreadable holder record)", resource=self.resource, token="")
            return None
        finally:
            consumer.close()


def _write_holders(admin: ClusterAdmin, holders: dict[str, LockHolder]) -> None:
    """Each lock topic's holder record, by one producer (acks=all: the record is on every in-sync replica
    before the lock counts as taken)."""
    producer = Producer({**admin.settings.confluent_config(), "acks": "all", "enable.idempotence": True,
                         "logger": _LIBRDKAFKA_LOG})
    failures: list[Any] = []
    for topic, holder in holders.items():
        producer.produce(topic, value=json.dumps(holder.to_dict()).encode(), key=b"holder",
                         on_delivery=lambda err, _msg: failures.append(err) if err else None)
    remaining = producer.flush(admin.request_timeout_s)
    if remaining or failures:
        raise errors.KafkaConnectionError(f"Could not write the holder of lock(s) {', '.join(holders)}: "
                                          f"{failures[0] if failures else 'not delivered in time'}")
