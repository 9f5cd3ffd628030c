"""Read-back after a change waits for the broker to show it (KRaft applies metadata asynchronously)."""

from __future__ import annotations

from airflow_provider_kip848.kafka.api import read_back


def test_read_back_polls_until_the_change_shows_then_returns_it():
    seen = iter([{"k": "0"}, {"k": "0"}, {"k": "2"}, {"k": "9"}])
    assert read_back(lambda: next(seen), lambda v: v.get("k") == "2", timeout_s=5, interval_s=0.01) == {"k": "2"}


def test_read_back_returns_the_last_value_after_the_timeout():
    reads = []

    def read():
        reads.append(1)
        return 1

    assert read_back(read, lambda v: v == 2, timeout_s=0.05, interval_s=0.01) == 1 and len(reads) >= 2
