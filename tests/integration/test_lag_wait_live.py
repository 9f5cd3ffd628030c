"""The lag wait on a live application (issue 32, item 1): a producer writes throughout, so the lag never stays at 0.

On the session broker, a real consumer process and a real producer: the wait ends by the baseline rule (the
run's snapshot before) and, without a snapshot, by the not-growing rule, both in poke mode and through the
deferrable trigger; once the consumer is killed (records still arriving) neither rule passes. The rules on
recorded polls are in tests/unit/test_lag_rules.py.
"""

from __future__ import annotations

import asyncio

import pytest
from airflow.sdk.exceptions import AirflowSensorTimeout, TaskDeferred

from airflow_provider_kip848.kafka.api import take_snapshot
from airflow_provider_kip848.sensors.group import KafkaGroupLagSensor
from kip848_harness.clients import ConsumerProcess, create_topics
from tests.conftest import wait_until
from tests.e2e.helpers import Feeder

#: a short window and poll, so each wait is a few seconds (the DAGs' defaults: 30 s and 5 s)
# The waits below are run by calling execute() in the test, where no triggerer runs: they poke (deferrable=False;
# the default is the deployment's [kip848] default_deferrable, True).
FAST = {"poll_interval": 0.5, "lag_window_seconds": 3}


async def _first_event(trigger):
    async for event in trigger.run():
        return event
    return None


def _deferred(sensor: KafkaGroupLagSensor, context: dict) -> dict:
    """The sensor's deferred path: execute (defers), the trigger runs to its first event, execute_complete."""
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(context)
    event = asyncio.run(_first_event(deferred.value.trigger))
    return sensor.execute_complete(context, event=event.payload)


def test_the_lag_wait_ends_on_a_live_application_by_its_rule_and_never_on_a_killed_one(
        kafka_conn, native, bootstrap, unique, tmp_path, context):
    topic, group = unique("live-lag"), unique("live-lag-group")
    create_topics(bootstrap, {topic: 2})
    feeder = Feeder(bootstrap, topic, lambda: False, every_s=0.02, limit=1_000_000)  # ~50 records/s throughout
    feeder.start()
    consumer = ConsumerProcess.start(bootstrap, group, [topic], protocol="consumer", client_id="live",
                                     log_file=str(tmp_path / "live.log"))
    try:
        wait_until(lambda: len(native.group_offsets(group).committed) == 2, timeout=60,
                   what="the consumer committed on both partitions")
        before = tmp_path / "before.json"
        before.write_text(take_snapshot(native, group).to_json())

        by_baseline = KafkaGroupLagSensor(task_id="lag", deferrable=False, group_id=group, baseline_snapshot=str(before), timeout=60,
                                          **FAST).execute(context)
        assert by_baseline["detail"]["rule"] == "baseline", by_baseline
        assert "caught up by the baseline rule" in by_baseline["summary"]
        assert feeder.is_alive() and feeder.error is None  # records kept arriving while it judged

        growing = KafkaGroupLagSensor(task_id="lag", group_id=group, timeout=60, deferrable=True, **FAST)
        assert "no baseline" in growing.condition.describe()
        result = _deferred(growing, context)
        assert result["mode"] == "deferred" and result["detail"]["rule"] == "not_growing", result
        assert "caught up by the not-growing rule" in result["summary"]

        consumer.kill()  # a crash: its committed offsets stay where they were while records keep arriving
        with pytest.raises(AirflowSensorTimeout, match="no commit on"):
            KafkaGroupLagSensor(task_id="lag", deferrable=False, group_id=group, timeout=8, **FAST).execute(context)
        dead = KafkaGroupLagSensor(task_id="lag", group_id=group, baseline_snapshot=str(before), timeout=8,
                                   deferrable=True, **FAST)
        with pytest.raises(AirflowSensorTimeout, match="did not reach lag back at the level before the change"):
            _deferred(dead, context)
    finally:
        consumer.stop()
        feeder.stop()
