"""A local node's broker properties: listeners, quorum, replication, and the tuning tests run with.

Two deliberate differences from a production broker, both here:

* the ``fast`` tuning lowers the group coordinator's session/heartbeat minimums
  and initial rebalance delays, so tests do not wait on production timeouts,
  trims an idle broker's threads, and runs the JVM with the serial collector
  and C1 only (less CPU per broker). The ``production`` tuning keeps every
  broker default (benchmarks use it);
* replication follows the node count (internal topics on min(n, 3) replicas).

Everything else is what ``kafka-server-start`` reads from a ``server.properties`` a platform team would write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from airflow_provider_kip848.kafka.settings import jaas_escape, java_properties_text
from kip848_harness.kafka_state import ClusterState, NodeState

Tuning = Literal["fast", "production"]


#: Replication settings of a cluster of ``n`` nodes: internal topics (and new topics) on min(n, 3)
#: replicas, writes acknowledged by one in-sync replica, so that losing one node of three loses nothing
#: and blocks nothing.
def replication_config(nodes: int) -> dict[str, str]:
    rf = str(min(nodes, 3))
    return {
        "num.partitions": "1",
        "default.replication.factor": rf,
        "min.insync.replicas": "1",
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": "1",
    }


#: A single-node cluster's replication settings (kept for callers that read them).
SINGLE_NODE_CONFIG: dict[str, str] = replication_config(1)

#: The ``fast`` tuning: production defaults in comments. Names checked against
#: ``kafka-configs --describe --all --entity-type brokers`` on 4.2.1 and 4.3.1.
FAST_TUNING: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",  # 3000
    "group.min.session.timeout.ms": "1000",  # 6000 (classic protocol)
    "group.consumer.min.session.timeout.ms": "2000",  # 45000
    "group.consumer.session.timeout.ms": "6000",  # 45000
    "group.consumer.min.heartbeat.interval.ms": "100",  # 5000
    "group.consumer.heartbeat.interval.ms": "500",  # 5000
    "group.streams.min.session.timeout.ms": "2000",  # 45000
    "group.streams.session.timeout.ms": "6000",  # 45000
    "group.streams.min.heartbeat.interval.ms": "100",  # 5000
    "group.streams.heartbeat.interval.ms": "500",  # 5000
    "group.streams.initial.rebalance.delay.ms": "0",  # 3000
    "offsets.topic.num.partitions": "10",  # 50: creating 50 partitions costs seconds per fresh broker
    # An idle test broker's CPU (a run keeps a few alive for most of an hour): 3.9% of a core with Kafka's defaults
    # for the three below, 2.3% with them (bench/idle_broker.py, one node, 1.7x). The controller's no-op record every
    # 500 ms is replicated and published like any metadata change; eight request handlers and three network threads
    # each wake several times a second to poll empty queues. A test broker serves a few clients at a time.
    "metadata.max.idle.interval.ms": "5000",  # 500
    "num.io.threads": "2",  # 8
    "num.network.threads": "2",  # 3
}

#: Garbage collector and JIT per tuning. ``fast`` (tests, the demo) spends the least CPU on a shared machine: the
#: serial collector (no concurrent GC threads) and C1 only (no C2 compile bursts in each new JVM's first minutes;
#: a test broker moves kilobytes). ``production`` keeps a broker's own choice (G1, low pauses) for benchmarks.
BROKER_JVM_OPTIONS: dict[str, tuple[str, ...]] = {
    "fast": ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"),
    "production": ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"),
}


def sasl_config(sasl_users: Mapping[str, str], super_users: Sequence[str]) -> dict[str, str]:
    """The SASL_PLAINTEXT listener's mechanisms (SCRAM-SHA-256/512, PLAIN with ``sasl_users``' passwords) and the
    StandardAuthorizer; the PLAINTEXT listener's ANONYMOUS principal stays a super user, so the harness keeps
    working."""
    plain_users = " ".join(f'user_{u}="{jaas_escape(p)}"' for u, p in sasl_users.items())
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    return {
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": scram,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": scram,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": ";".join(["User:ANONYMOUS", *(f"User:{u}" for u in super_users)]),
    }


def server_properties(state: ClusterState, node: NodeState, *, data_dir: Path, tuning: Tuning,
                      overrides: Mapping[str, str], sasl_users: Mapping[str, str],
                      super_users: Sequence[str]) -> str:
    """``node``'s server.properties: combined broker+controller; one node uses a dynamic quorum
    (``controller.quorum.bootstrap.servers``), several a static one (``controller.quorum.voters``: every node a
    voter); the tuning, then ``overrides`` on top."""
    host = state.host
    listeners = f"PLAINTEXT://{host}:{node.port},CONTROLLER://{host}:{node.controller_port}"
    advertised = f"PLAINTEXT://{host}:{node.port}"
    protocol_map = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    if node.sasl_port:
        listeners += f",SASL_PLAINTEXT://{host}:{node.sasl_port}"
        advertised += f",SASL_PLAINTEXT://{host}:{node.sasl_port}"
        protocol_map += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
    if len(state.nodes) == 1:
        quorum = {"controller.quorum.bootstrap.servers": f"{host}:{node.controller_port}"}
    else:
        quorum = {"controller.quorum.voters": ",".join(f"{n.node_id}@{host}:{n.controller_port}"
                                                       for n in state.nodes)}
    config: dict[str, str] = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        **quorum,
        "listeners": listeners,
        "advertised.listeners": advertised,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": protocol_map,
        "log.dirs": str(data_dir),
        **replication_config(len(state.nodes)),
    }
    if node.sasl_port:
        config.update(sasl_config(sasl_users, super_users))
    if tuning == "fast":
        config.update(FAST_TUNING)
    config.update(overrides)
    return f"# generated by kip848_harness ({tuning} tuning)\n" + java_properties_text(config)


__all__ = ["BROKER_JVM_OPTIONS", "FAST_TUNING", "SINGLE_NODE_CONFIG", "Tuning", "replication_config", "sasl_config",
           "server_properties"]
