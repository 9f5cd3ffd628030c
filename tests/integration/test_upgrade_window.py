"""The bug window of the online classic -> consumer upgrade on a real Kafka 4.4.0 broker (KAFKA-21581 / KAFKA-21584,
fixed in 4.3.3 / 4.4.1 / 4.5.0, none released), and the roll's guard (engine/upgrade_window.py) waiting it out.

The broker keeps a new classic group at generation 0 for 30 s (``group.initial.rebalance.delay.ms=30000``): two
real classic consumers (confluent-kafka under supervisord) have joined, the first rebalance has not completed.

- Without the guard, a real consumer-protocol member joining then is refused with a fatal error: the coordinator's
  ``ConsumerGroup.fromClassicGroup`` throws ``NoSuchElementException`` (its log), the client gets
  ``UNKNOWN_SERVER_ERROR`` as fatal, and the group stays classic. The guard's verdict on the same group at that
  moment is ``wait`` naming KAFKA-21581.
- With the guard, the provider's roll by instance (roll_application, as the rolling upgrade DAG and the fleet's
  online path run it) of the same kind of application, begun inside the window, stops the first instance, waits
  until the group is Stable at generation >= 1, then starts it on the consumer protocol: the group converts and
  both instances end on the consumer protocol. Without the guard this roll starts the first instance inside the
  window and fails (the instance dies of the fatal error: checked by hand, see the commit).

Pinned to 4.4.0 (not the session's version): the test shows a fact of that release.
"""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Consumer, KafkaError

from airflow_provider_kip848.controllers.registry import resolve_controller
from airflow_provider_kip848.engine.instance_roll import RollLimits, roll_application
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.errors import GroupNotFound
from airflow_provider_kip848.kafka.model import GroupState, GroupType, MemberProtocol
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.native.group_log import upgrade_window_facts
from airflow_provider_kip848.kafka.rules.upgrade_window import Window, upgrade_window
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import create_topics, produce
from kip848_harness.kafka_cluster import LocalKafka
from kip848_harness.supervised import SupervisedConsumerApp
from tests.conftest import RecordingTI, set_kafka_connection, start_or_fail, wait_until

VERSION = "4.4.0"
DELAY_MS = 30000
CONN = "kafka_upgrade_window"


@pytest.fixture(scope="module")
def slow_first_rebalance(tmp_path_factory, pytestconfig):
    broker = LocalKafka(tmp_path_factory.mktemp("kafka-window"), version=VERSION, die_with_parent=True,
                        overrides={"group.initial.rebalance.delay.ms": str(DELAY_MS)})
    start_or_fail(broker, pytestconfig)
    yield broker
    broker.stop()


def _settings(broker: LocalKafka) -> ClientSettings:
    return ClientSettings(broker.bootstrap_servers, request_timeout_ms=5000)


def _verdict(admin: KafkaAdmin, settings: ClientSettings, group: str):
    def describe(g: str):
        try:
            return admin.describe_group(g)
        except GroupNotFound:
            return None
    return upgrade_window(upgrade_window_facts(settings, describe, group))


def _app(broker, supervisor, group, tmp_path) -> SupervisedConsumerApp:
    topic = f"{group}-t"
    create_topics(broker.bootstrap_servers, {topic: 3})
    produce(broker.bootstrap_servers, topic, (f"v{i}" for i in range(30)), keys=(str(i) for i in range(30)))
    app = SupervisedConsumerApp(supervisor, group, tmp_path / "supervised", bootstrap_servers=broker.bootstrap_servers,
                                group_id=group, topics=[topic], instances=2)
    app.install("classic")
    return app


def _at_generation_0(admin: KafkaAdmin, group: str) -> None:
    wait_until(lambda: (d := admin.describe_group(group)).state is GroupState.PREPARING_REBALANCE
               and len(d.members) == 2, timeout=60, what="2 classic members in the first rebalance")


def test_a_consumer_member_joining_a_generation_0_classic_group_is_refused_fatally_on_4_4_0(
        slow_first_rebalance, supervisor, unique, tmp_path):
    broker, group = slow_first_rebalance, unique("window-bug")
    settings = _settings(broker)
    app = _app(broker, supervisor, group, tmp_path)
    joiner = None
    try:
        app.start("classic")
        with KafkaAdmin(settings) as admin:
            _at_generation_0(admin, group)
            verdict = _verdict(admin, settings, group)
            assert verdict.window is Window.WAIT and "KAFKA-21581" in verdict.reason, verdict
            joined_at = time.monotonic()
            joiner = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                               "group.protocol": "consumer", "client.id": "upgrader", "auto.offset.reset": "earliest"})
            joiner.subscribe([f"{group}-t"])
            fatal = None
            while fatal is None and time.monotonic() - joined_at < 20:
                msg = joiner.poll(0.5)
                error = None if msg is None else msg.error()
                if error is not None and (error.fatal() or error.code() == KafkaError._FATAL):
                    fatal = error
            print(f"consumer-protocol member refused {time.monotonic() - joined_at:.1f} s after joining: {fatal}")
            assert fatal is not None and "ConsumerGroupHeartbeat fatal error" in fatal.str(), fatal
            described = admin.describe_group(group)
            assert described.type is GroupType.CLASSIC, described  # not converted
        log = broker.node_log_path().read_text(errors="replace")
        assert f"groupId='{group}'" in log and "java.util.NoSuchElementException" in log, "the coordinator's error"
        assert "ConsumerGroup.fromClassicGroup" in log
    finally:
        if joiner is not None:
            joiner.close()
        app.remove()


def test_the_roll_waits_until_the_classic_group_is_stable_at_generation_1(
        slow_first_rebalance, supervisor, controllers, unique, tmp_path, monkeypatch, caplog):
    broker, group = slow_first_rebalance, unique("window-roll")
    settings = _settings(broker)
    set_kafka_connection(monkeypatch, CONN, broker.bootstrap_servers, request_timeout_ms=5000)
    app = _app(broker, supervisor, group, tmp_path)
    name = controllers.add(group, "command", app.target(by_instance=True))
    log = logging.getLogger(f"upgrade-window.{group}")
    caplog.set_level(logging.INFO, logger=log.name)
    try:
        app.start("classic")
        with KafkaAdmin(settings) as admin:
            _at_generation_0(admin, group)
        began = time.monotonic()
        result = roll_application(resolve_controller(name), KafkaGroupAdminHook(kafka_conn_id=CONN), [group],
                                  "consumer", RollLimits(first_instance_s=120, instance_s=120, poll_s=0.5),
                                  context={"ti": RecordingTI()}, task_id="roll_application",
                                  audit_log=str(tmp_path / "audit.jsonl"), log=log)
        waits = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"Upgrade window of {group}")]
        first = result["instances"][0]
        print(f"roll: {time.monotonic() - began:.1f} s; the guard waited {first['upgrade_window']['seconds']} s "
              f"({len(waits)} looks not open)")
        # the window was met (the roll reached the first start inside the first rebalance) and waited out
        assert waits and "wait" in waits[0] and "KAFKA-21581" in waits[0], waits
        window = first["upgrade_window"]["groups"][group]
        assert window["window"] == "open" and window["generation"] >= 1, window
        assert result["mode"] == "by_instance" and len(result["instances"]) == 2, result
        with KafkaAdmin(settings) as admin:
            wait_until(lambda: (d := admin.describe_group(group)).type is GroupType.CONSUMER and len(d.members) == 2
                       and all(m.protocol is MemberProtocol.CONSUMER for m in d.members), timeout=60,
                       what="both instances on the consumer protocol")
    finally:
        app.remove()
