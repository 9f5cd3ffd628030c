"""The roll by instance (engine/instance_roll.py) on the 3-node cluster while the group's coordinator pauses, then
dies: its waits (the static members' leave, the first-instance gate, each later instance's new member) read the
coordinator, and a coordinator that cannot answer is "unknown", never "joined" nor "failed".

An application of two real consumer instances under a real supervisord is rolled classic -> consumer, instance by
instance. As the first instance's roll begins the coordinator's node is killed (SIGKILL) and another node takes the
group over; as the second's begins the new coordinator's node is paused (SIGSTOP) until the roll has read the group
as unknown twice (its log says so), then resumed. The roll must wait through both (a describe that cannot answer is
unknown: neither a failure nor "no members") and end as the cluster ends: every instance restarted once, each
instance's own new member awaited on the consumer protocol (the second's is not the first's), no committed offset
lost. One failure is allowed, and checked: a real instance that dies in the failover (librdkafka treats the
``GROUP_ID_NOT_FOUND`` a coordinator answers before it has loaded the just-converted group as fatal; two CI runs
and one run here of five saw the process exit) stops the roll, named as the platform shows it, with its log showing
the exit. Tried: with a retriable describe error raised, the roll fails here. (Read as "no members" instead, the roll
still ends right in most runs: the paused node loses the group within its broker session, so the members known
before the second start are usually read after the move; the rule is held by the code's reading, not this test.)
"""

from __future__ import annotations

import logging

from airflow_provider_kip848.controllers.registry import resolve_controller
from airflow_provider_kip848.engine.instance_roll import InstanceRollFailed, RollLimits, roll_application
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.model import GroupType, MemberProtocol
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import create_topics, produce
from kip848_harness.faults import coordinator_node, kill_coordinator
from kip848_harness.supervised import SupervisedConsumerApp
from tests.conftest import RecordingTI, set_kafka_connection, wait_until

CONN = "kafka_cluster_roll"


def _admin(cluster) -> KafkaAdmin:
    return KafkaAdmin(ClientSettings(cluster.bootstrap_servers, request_timeout_ms=5000))


class _Faults(logging.Handler):
    """Faults injected at the roll's own steps, read from its log: the coordinator's node killed as the first
    instance's roll begins ("Rolling instance <first>"), paused as the second's begins and resumed after the roll
    has read the group as unknown twice ("Members of <group> unknown for now")."""

    def __init__(self, cluster, group: str, instances: list[str]) -> None:
        super().__init__(logging.INFO)
        self.cluster, self.group, self.instances = cluster, group, instances
        self.killed: int | None = None
        self.paused: int | None = None
        self.unknown_while_paused = 0
        self.resumed = False

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(f"Rolling instance {self.instances[0]} "):
            self.killed = kill_coordinator(self.cluster, self.group)
        elif message.startswith(f"Rolling instance {self.instances[1]} "):
            self.paused = coordinator_node(self.cluster.bootstrap_servers, self.group)
            self.cluster.pause_node(self.paused)
        elif message.startswith(f"Members of {self.group} unknown for now") and self.paused is not None \
                and not self.resumed:
            self.unknown_while_paused += 1
            if self.unknown_while_paused == 2:
                self.cluster.resume_node(self.paused)
                self.resumed = True


def _died_in_the_failover(exc: InstanceRollFailed, app: SupervisedConsumerApp, group: str, faults: _Faults) -> None:
    """The roll failed because an instance it had rolled died: true on the platform and in the instance's log."""
    assert faults.killed is not None, "the coordinator was killed first"
    assert "an instance rolled earlier has died since its new member joined" in exc.what, exc.what
    dead = [r for r in exc.rolled if r["instance"] in exc.what.split("as the platform says:")[1]]
    assert dead, (exc.what, exc.rolled)
    running = app.pids()
    tails = app.log_tails()
    for record in dead:
        process = record["instance"].split(":")[1]
        assert running.get(process) != int(record["at_join"]["incarnation"]), (process, running, exc.what)
        number = int(process.rsplit("_", 1)[1])
        assert any("Fatal error" in line or "Traceback" in line or "KafkaException" in line
                   for line in tails[number]), tails[number]
    print(f"the roll stopped on an instance that died in the failover: {exc.what}; logs: {tails}")


def test_the_roll_by_instance_rides_out_a_paused_then_killed_coordinator(cluster, monkeypatch, unique, tmp_path,
                                                                         controllers, supervisor):
    set_kafka_connection(monkeypatch, CONN, cluster.bootstrap_servers, request_timeout_ms=3000)  # unknown in 3 s
    topic, group = unique("roll-faults-t"), unique("roll-faults-g")
    create_topics(cluster.bootstrap_servers, {topic: 3})
    produce(cluster.bootstrap_servers, topic, (f"v{i}" for i in range(30)), keys=(str(i) for i in range(30)))
    app = SupervisedConsumerApp(supervisor, group, tmp_path / "supervised", bootstrap_servers=cluster.bootstrap_servers,
                                group_id=group, topics=[topic], instances=2)
    app.install("classic")
    name = controllers.add(group, "command", app.target(by_instance=True))
    first, second = f"{group}_0", f"{group}_1"
    faults = _Faults(cluster, group, [f"{group}:{first}", f"{group}:{second}"])
    log = logging.getLogger(f"roll-faults.{group}")
    log.setLevel(logging.INFO)
    log.addHandler(faults)
    try:
        app.start("classic")
        with _admin(cluster) as admin:
            wait_until(lambda: (d := admin.describe_group(group)).state == "Stable" and len(d.members) == 2
                       and admin.group_offsets(group).total_lag == 0, timeout=120, what="2 classic instances")
            committed = admin.group_offsets(group).committed
        before = app.pids()
        try:
            result = roll_application(
                resolve_controller(name), KafkaGroupAdminHook(kafka_conn_id=CONN), [group], "consumer",
                RollLimits(first_instance_s=300, instance_s=300, poll_s=0.5), context={"ti": RecordingTI()},
                task_id="roll_application", audit_log=str(tmp_path / "audit.jsonl"), log=log)
        except InstanceRollFailed as exc:
            # the one failure allowed: a real instance died in the failover (librdkafka takes GROUP_ID_NOT_FOUND
            # from a coordinator that has not loaded the just-converted group as fatal, and the process exits),
            # and the roll says so, naming the instance the platform shows dead. Never a guess: checked here.
            _died_in_the_failover(exc, app, group, faults)
            return
        finally:
            if faults.paused is not None and not faults.resumed:
                cluster.resume_node(faults.paused)
        assert faults.killed is not None and faults.resumed, "both faults happened during the roll"
        assert result["mode"] == "by_instance", result
        rolled = result["instances"]
        assert [r["instance"] for r in rolled] == [f"{group}:{first}", f"{group}:{second}"], result
        # each instance's own new member was awaited: the second's is not the first's, read while the coordinator
        # was failing over (a describe that could not answer taken as "no members" would make it so)
        joined = [r["joined"]["groups"][group] for r in rolled]
        assert joined[0] != joined[1], rolled
        with _admin(cluster) as admin:
            wait_until(lambda: coordinator_node(cluster.bootstrap_servers, group) != faults.killed, timeout=60,
                       what="another node coordinates the group")
            # the verdict holds on the cluster: a consumer group of the two instances (their client ids, app-0 and app-1),
            # both on the new protocol. Not their member ids: the pause outlives a member's session in some runs, and
            # a member fenced after the roll rejoins under a new id (a member forced out comes back), which a CI run
            # showed; the roll's own verdict (each instance's new member seen joining) is asserted above.
            instances = {"app-0", "app-1"}
            seen: list[object] = []

            def both_on_consumer() -> bool:
                d = admin.describe_group(group)
                seen[:] = [(d.type, d.state, [(m.member_id, m.client_id, m.protocol) for m in d.members])]
                return (d.type is GroupType.CONSUMER and len(d.members) == 2
                        and {m.client_id for m in d.members} == instances
                        and all(m.protocol is MemberProtocol.CONSUMER for m in d.members))

            try:
                wait_until(both_on_consumer, timeout=120, what="both instances on the consumer protocol")
            except TimeoutError as exc:  # what it saw goes into the failure's own line (CI prints that much)
                raise AssertionError(f"{exc}; last describe: {seen}; processes: {app.pids()}; instances' logs: "
                                     f"{app.log_tails()}; roll: {result}") from None
            after = app.pids()
            assert after[first] != before[first] and after[second] != before[second], (before, after)
            now = admin.group_offsets(group).committed
            assert all(now.get(tp, -1) >= offset for tp, offset in committed.items()), (committed, now)
    finally:
        log.removeHandler(faults)
        app.remove()
