"""Lock topic names: legal Kafka topic names, readable, unique per resource, short enough."""

from __future__ import annotations

import re

import pytest

from airflow_provider_kip848.kafka.errors import Kip848Error
from airflow_provider_kip848.kafka.lock import LockHolder, lock_topic


def test_lock_topic_is_a_legal_unique_topic_name():
    names = {r: lock_topic(r) for r in ("group:orders", "group:orders app/1", "group:orders_app_1", "group:" + "x" * 400,
                                         "feature:streams.version", "group:ünïcode")}
    for name in names.values():
        assert re.fullmatch(r"[a-zA-Z0-9._-]+", name) and len(name) <= 249, name
        assert name.startswith("kip848-lock.")
    assert names["group:orders"].startswith("kip848-lock.group.orders.")
    assert len(set(names.values())) == len(names), "resources that sanitise alike still get their own lock"
    with pytest.raises(Kip848Error, match="needs a resource name"):
        lock_topic(" ")


def test_holder_round_trip_and_description():
    holder = LockHolder(owner="d/r", dag_id="d", run_id="r", triggered_by="alice", host="w1", acquired_at="T")
    assert LockHolder.from_dict({**holder.to_dict(), "unknown_field": 1}) == holder
    assert holder.describe() == "DAG d run r, triggered by alice (on w1 since T)"
