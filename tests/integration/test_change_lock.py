"""The change lock of several resources at once (an application's groups), on a real broker.

The fleet's move takes its groups' locks in one CreateTopics request; what it must keep from one
``acquire`` per group: a free lock is ours with a readable holder record, a lock we hold is re-entered,
a lock held by another run refuses naming that run, a stale one is taken over. ``create_topics`` is all
or nothing: a refused topic leaves none of the others behind.
"""

from __future__ import annotations

import pytest

from airflow_provider_kip848.kafka.errors import Kip848Error, ResourceLocked
from airflow_provider_kip848.kafka.lock import ChangeLock, LockHolder


def test_several_locks_in_one_call_keep_the_rules_of_one(native, unique):
    a, b, c = (f"group:{unique('lock')}" for _ in range(3))
    run1, run2 = LockHolder(owner="fleet/run-1", dag_id="fleet", run_id="run-1"), LockHolder(owner="fleet/run-2")

    taken = ChangeLock.acquire_all(native, [a, b], run1)
    assert [(t.resource, t.reentered, t.took_over_from) for t in taken] == [(a, False, None), (b, False, None)]
    for resource in (a, b):  # each holder record is on its own lock, naming its resource
        held = ChangeLock(native, resource).holder()
        assert held is not None and (held.owner, held.resource) == ("fleet/run-1", resource)

    again = ChangeLock.acquire_all(native, [a, b], run1)  # a retried task of the same run
    assert [t.reentered for t in again] == [True, True]

    with pytest.raises(ResourceLocked, match="run-1"):  # another run: refused, naming the holder
        ChangeLock.acquire_all(native, [c, b], run2)
    assert ChangeLock(native, b).holder().owner == "fleet/run-1"

    stale = ChangeLock.acquire_all(native, [a], run2, is_stale=lambda holder: holder.owner == "fleet/run-1")
    assert stale[0].took_over_from is not None and stale[0].took_over_from.owner == "fleet/run-1"
    assert ChangeLock(native, a).holder().owner == "fleet/run-2"
    for resource, owner in ((a, "fleet/run-2"), (b, "fleet/run-1"), (c, "fleet/run-2")):
        assert ChangeLock(native, resource).release(owner), resource
        assert ChangeLock(native, resource).holder() is None


def test_creating_topics_is_all_or_nothing(native, unique):
    good = unique("lock-good")
    with pytest.raises(Kip848Error):  # a name the broker refuses (a space): the whole call is refused
        native.create_topics([good, "kip848 not a topic name"])
    assert not native.topic_exists(good)
    assert native.create_topics([good, good]) == {good: True}
    assert native.create_topics([good]) == {good: False}
    native.delete_topic(good)
