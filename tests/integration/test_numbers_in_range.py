"""Issue 45, item 4, on the real session broker: the group waits' numbers are finite and in range.

``poll_interval=0`` made the Empty wait a busy loop on a group that is not empty (a coordinator request after
another); ``NaN`` or ``Infinity`` rendered from a Param went on into ``time.sleep``/``timedelta``. A literal value
is refused when the DAG is parsed (the sensor's constructor), a templated one when it is rendered, before the
first poll, in both modes (poking and deferred), as an AirflowFailException (no retry) naming the argument; the
group is read before and after: nothing changed, and no member was forced out.
"""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.sensors.group import KafkaGroupEmptySensor, KafkaGroupLagSensor, KafkaGroupStateSensor
from kip848_harness.clients import ConsumerProcess, create_topics, produce
from tests.conftest import wait_until


@pytest.fixture
def live_group(native, bootstrap, unique, tmp_path):
    """A group with one live member (not Empty: the wait would poll it until its timeout)."""
    topic, group = unique("numbers"), unique("numbers")
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, (f"v{i}" for i in range(3)))
    member = ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id="numbers-0",
                                   log_file=str(tmp_path / "member.log"))
    try:
        wait_until(lambda: len(native.describe_group(group).members) == 1, timeout=90, what="one live member")
        yield group
    finally:
        member.stop()


def _facts(native, group: str) -> tuple:
    desc = native.describe_group(group)
    return desc.type.value, desc.state.value, sorted(m.member_id for m in desc.members)


@pytest.mark.parametrize("value", [0, 0.1, -1, float("nan"), float("inf"), 1e18])
def test_a_literal_poll_interval_out_of_range_is_refused_when_the_dag_is_parsed(value):
    with pytest.raises(InvalidArgument, match=r"poll_interval must be a number from 0\.2 to 3,600, not "):
        KafkaGroupEmptySensor(task_id="empty", group_id="orders", poll_interval=value)


@pytest.mark.parametrize("deferrable", [False, True], ids=["poked", "deferred"])
@pytest.mark.parametrize("field, rendered, fragment", [
    ("poll_interval", "0", "poll_interval must be a number from 0.2 to 3,600, not '0'"),
    ("poll_interval", "nan", "poll_interval must be a number from 0.2 to 3,600, not 'nan'"),
    ("timeout_minutes", "Infinity", "timeout_minutes must be a number from 0 to 10,080, not 'Infinity'"),
    ("remove_members_after", "1e18", "remove_members_after must be a number from 0 to 604,800, not '1e18'"),
    ("coordinator_unavailable_minutes", "nan", "coordinator_unavailable_minutes must be a number from 0 to 10,080"),
])
def test_a_templated_wait_number_out_of_range_fails_the_task_before_the_first_poll(native, kafka_conn, live_group,
                                                                                 deferrable, field, rendered,
                                                                                 fragment):
    before = _facts(native, live_group)
    sensor = KafkaGroupEmptySensor(task_id="empty", kafka_conn_id=kafka_conn, group_id=live_group,
                                   deferrable=deferrable, timeout=60, **{field: "{{ params.value }}"})
    sensor.render_template_fields({"params": {"value": rendered}})
    assert getattr(sensor, field) == rendered
    with pytest.raises(AirflowFailException) as failed:
        sensor.execute({"ti": None})
    assert fragment in str(failed.value), str(failed.value)
    assert _facts(native, live_group) == before, "the wait changed the group"


@pytest.mark.parametrize("sensor_cls, kw, fragment", [
    (KafkaGroupLagSensor, {"max_lag": "nan"}, "max_lag must be a whole number from 0 to 9,223,372,036,854,775,807"),
    (KafkaGroupLagSensor, {"lag_window_seconds": "Infinity"}, "lag_window_seconds must be a number from 1 to 604,800"),
    (KafkaGroupStateSensor, {"poll_interval": "0"}, "poll_interval must be a number from 0.2 to 3,600, not '0'"),
])
def test_the_other_waits_refuse_the_same_numbers(native, kafka_conn, live_group, sensor_cls, kw, fragment):
    before = _facts(native, live_group)
    extra = {"states": ["Stable"]} if sensor_cls is KafkaGroupStateSensor else {}
    templated = {name: "{{ params." + name + " }}" for name in kw}
    sensor = sensor_cls(task_id="wait", kafka_conn_id=kafka_conn, group_id=live_group, deferrable=False, timeout=60,
                        **templated, **extra)
    sensor.render_template_fields({"params": kw})
    with pytest.raises(AirflowFailException) as failed:
        sensor.execute({"ti": None})
    assert fragment in str(failed.value), str(failed.value)
    assert _facts(native, live_group) == before
