"""A Kafka Streams application's topology checked against the cluster's topics, before its migration stops it.

A streams group (KIP-1071) validates the application's topology on the
broker: a missing source topic, a missing or wrongly partitioned internal
topic, or co-partitioned topics with unequal partition counts leave the group
NOT_READY with empty assignments. Found after the stop, that costs the
downtime and the way back; found before, nothing. Before the migration the
group is classic, and a classic group's description carries no topology: the
broker cannot tell which topics the application needs. Kafka 4.4 brokers can
serve a topology (KIP-1331: StreamsGroupDescribe v1 with
``group.streams.topology.description.plugin.class`` set), but only a streams
group's, which its Kafka Streams 4.4 members send: never before this
migration, so the checks never ask them, and say so when nothing else gave one. The application can:
its ``Topology#describe()`` (a ``TopologyDescription``, whose ``toString()`` is
parsed here), given by its controller or by the run.

What the description tells, and what the checks derive from it (the same
rules as Kafka Streams' own ``RepartitionTopics``, ``ChangelogTopics`` and
co-partitioning):

* every source topic of every sub-topology (global ones included) must exist;
* a topic that one sub-topology writes and another reads, named as Kafka
  Streams names its internal topics (``...-repartition``, and the foreign-key
  join's ``...subscription-registration...-topic`` /
  ``...subscription-response...-topic``), is internal: on the cluster it is
  ``<application.id>-<name>``, and it must exist (the running classic
  application created it; missing, it was deleted, and the records in flight
  between the sub-topologies with it);
* a sub-topology runs one task per partition of its widest source topic; a
  repartition topic without an explicit count gets the widest of the
  sub-topologies writing into it, or, when it is co-partitioned with external
  topics, their count;
* each state store of a (non-global) sub-topology is backed by the changelog
  ``<application.id>-<store>-changelog`` with exactly one partition per task;
* two source nodes of one sub-topology are joined (stream-table,
  stream-stream, table-table) when a state store is used both by processors
  that only the one reaches and by processors that only the other reaches:
  their topics must be co-partitioned (equal partition counts).

What the description cannot tell, and the checks therefore never decide
(they warn, saying so, and leave it to the approver):

* an explicit repartition count (``Repartitioned.numberOfPartitions``): a
  repartition topic whose count differs from the derived one is a warning;
* whether a store's changelog is disabled (``withLoggingDisabled``) or its
  source topic serves as its changelog (``topology.optimization``): a missing
  changelog is a warning;
* topics behind a pattern source or a dynamic sink (``TopicNameExtractor``);
* the co-partition groups Kafka Streams registers itself: joins are found
  from the stores they share, as above.

Pure: :func:`parse_topology` turns the text into a :class:`Topology`,
:func:`needed_topics` says which topics to read, and :func:`check_topology`
judges their partition counts into :class:`~.preflight.Check` results.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.rules.preflight import FAIL, PASS, WARN, Check

#: the names Kafka Streams gives its internal topics between sub-topologies (generated or from ``Named``)
INTERNAL_TOPIC = re.compile(r"(-repartition|subscription-(registration|response)(-\d+)?-topic)$", re.IGNORECASE)
#: why the brokers are not asked for the topology before a classic group's migration: a Kafka 4.4 broker with
#: ``group.streams.topology.description.plugin.class`` set (e.g. ``org.apache.kafka.server.streams.
#: InMemoryTopologyDescriptionPlugin``) serves a streams group's topology (StreamsGroupDescribe v1, KIP-1331;
#: ``kafka-streams-groups --describe --topology``), which only the group's Kafka Streams 4.4 members send: a
#: classic group has none, on any release
BROKERS_CANNOT_SERVE = ("none from the brokers: they serve a topology (KIP-1331, Kafka 4.4 with "
                        "group.streams.topology.description.plugin.class) only for a streams group, sent by its "
                        "Kafka Streams 4.4 members, and this group is classic until the restart")
#: the check names, in the order they are reported (``topology_description`` alone when there is no topology)
CHECKS = ("topology_source_topics", "topology_repartition_topics", "topology_changelog_topics",
          "topology_co_partitioning")
NO_TOPOLOGY = "topology_description"

_SUBTOPOLOGY = re.compile(r"^Sub-topology:\s*(?P<id>\d+)(?P<global>\s+for global store.*)?$")
_SOURCE = re.compile(r"^Source:\s*(?P<name>\S+)\s+\(topics:\s*(?P<topics>.*)\)$")
_PROCESSOR = re.compile(r"^Processor:\s*(?P<name>\S+)\s+\(stores:\s*\[(?P<stores>[^\]]*)\]\)$")
_SINK = re.compile(r"^Sink:\s*(?P<name>\S+)\s+\((?:topic:\s*(?P<topic>[^)\s]+)"
                   r"|extractor class:\s*(?P<extractor>.*))\)$")
_EDGE = re.compile(r"^(?P<arrow>-->|<--)\s*(?P<names>.*)$")


@dataclass(frozen=True)
class Node:
    """One node of a sub-topology: a source (its topics, or the pattern it subscribes to), a processor (its
    stores) or a sink (its topic; None for a dynamic sink, whose topic extractor the description names)."""

    kind: str
    name: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    stores: tuple[str, ...] = ()
    successors: tuple[str, ...] = ()
    extractor: str | None = None


@dataclass(frozen=True)
class Subtopology:
    id: int
    nodes: tuple[Node, ...]
    #: a global store's sub-topology: it generates no task, its store needs no changelog (its topic is one)
    global_store: bool = False

    def of_kind(self, kind: str) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.kind == kind)

    @property
    def source_topics(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t for n in self.of_kind("source") for t in n.topics))

    @property
    def sink_topics(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n.topics[0] for n in self.of_kind("sink") if n.topics))

    @property
    def stores(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for n in self.nodes for s in n.stores))

    def reach(self, start: str) -> frozenset[str]:
        """The nodes reachable from ``start`` (itself included) through the successor edges."""
        by_name = {n.name: n for n in self.nodes}
        seen, todo = set(), [start]
        while todo:
            name = todo.pop()
            if name in seen or name not in by_name:
                continue
            seen.add(name)
            todo.extend(by_name[name].successors)
        return frozenset(seen)

    def joined_sources(self) -> tuple[tuple[str, ...], ...]:
        """Pairs of source nodes (their topics) joined in this sub-topology: a store used by processors only
        the one reaches and by processors only the other reaches. A merge reaches the same processors from
        both and is not a join."""
        sources = self.of_kind("source")
        reach = {s.name: self.reach(s.name) for s in sources}
        stores_of = {n.name: set(n.stores) for n in self.nodes}
        pairs = []
        for i, a in enumerate(sources):
            for b in sources[i + 1:]:
                only_a = {s for name in reach[a.name] - reach[b.name] for s in stores_of.get(name, ())}
                only_b = {s for name in reach[b.name] - reach[a.name] for s in stores_of.get(name, ())}
                if only_a & only_b:
                    pairs.append(tuple(dict.fromkeys((*a.topics, *b.topics))))
        return tuple(pairs)


@dataclass(frozen=True)
class Topology:
    """A parsed ``TopologyDescription``; ``source`` says where it came from (the controller, the run)."""

    subtopologies: tuple[Subtopology, ...]
    source: str = ""

    @property
    def internal_topics(self) -> tuple[str, ...]:
        """The topics (as the description names them, without the application id) written by one
        sub-topology and read by another, named as Kafka Streams names its internal topics."""
        read = {t for s in self.subtopologies for t in s.source_topics}
        written = {t for s in self.subtopologies for t in s.sink_topics}
        return tuple(sorted(t for t in read & written if INTERNAL_TOPIC.search(t)))


def parse_topology(text: object, source: str = "") -> Topology:
    """Parse a Kafka Streams ``TopologyDescription.toString()``; anything else is refused, naming the line."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument(f"The topology description{f' ({source})' if source else ''} is empty or not text.",
                              remedy="Give the application's Topology#describe() output, as Kafka Streams prints "
                                     "it (it starts with 'Topologies:').")
    subtopologies: list[Subtopology] = []
    current: dict[str, Any] | None = None
    nodes: list[dict[str, Any]] = []

    def close() -> None:
        if current is not None:
            subtopologies.append(Subtopology(current["id"], tuple(Node(**n) for n in nodes), current["global"]))

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line == "Topologies:":
            continue
        if m := _SUBTOPOLOGY.match(line):
            close()
            current, nodes = {"id": int(m["id"]), "global": bool(m["global"])}, []
            continue
        if current is None:
            raise _bad_line(number, raw, source, "expected 'Sub-topology: <n>' first")
        if m := _EDGE.match(line):
            if not nodes:
                raise _bad_line(number, raw, source, "an edge before any node")
            if m["arrow"] == "-->":
                names = [n.strip() for n in m["names"].split(",") if n.strip()]
                nodes[-1]["successors"] = tuple(n for n in names if n != "none")
            continue
        node = _node(line)
        if node is None:
            raise _bad_line(number, raw, source, "not a Source, Processor, Sink or edge line")
        nodes.append(node)
    close()
    if not subtopologies:
        raise InvalidArgument(f"The topology description{f' ({source})' if source else ''} has no sub-topology.",
                              remedy="Give the application's Topology#describe() output, as Kafka Streams prints "
                                     "it (it starts with 'Topologies:').")
    ids = [s.id for s in subtopologies]
    if len(set(ids)) != len(ids):
        raise InvalidArgument(f"The topology description{f' ({source})' if source else ''} lists a sub-topology "
                              "twice.", remedy="Give one application's Topology#describe() output, unedited.")
    return Topology(tuple(subtopologies), source)


def _node(line: str) -> dict[str, Any] | None:
    """A Source, Processor or Sink line as :class:`Node` fields (None: not one)."""
    if m := _SOURCE.match(line):
        topics = m["topics"].strip()
        if topics.startswith("[") and topics.endswith("]"):
            return {"kind": "source", "name": m["name"], "topics": _names(topics[1:-1])}
        return {"kind": "source", "name": m["name"], "pattern": topics}  # a pattern is printed bare
    if m := _PROCESSOR.match(line):
        return {"kind": "processor", "name": m["name"], "stores": _names(m["stores"])}
    if m := _SINK.match(line):
        return {"kind": "sink", "name": m["name"], "topics": (m["topic"],) if m["topic"] else (),
                "extractor": m["extractor"]}
    return None


def _names(listed: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in listed.split(",") if n.strip())


def _bad_line(number: int, raw: str, source: str, why: str) -> InvalidArgument:
    where = f" ({source})" if source else ""
    return InvalidArgument(f"The topology description{where} cannot be read at line {number}: {raw.strip()!r} "
                           f"({why}).", remedy="Give the application's Topology#describe() output, as Kafka "
                                               "Streams prints it, unedited.")


@dataclass(frozen=True)
class TopicNeed:
    """A topic the topology needs on the cluster: its name there, its role (``source``, ``repartition``,
    ``changelog``), the partition count it must have (None: the description cannot tell) and why."""

    topic: str
    role: str
    partitions: int | None = None
    basis: str = ""
    subtopology: int | None = None


@dataclass(frozen=True)
class TopologyNeeds:
    """What the topology needs of the cluster, derived with the cluster's actual partition counts."""

    sources: tuple[TopicNeed, ...]
    repartition: tuple[TopicNeed, ...]
    changelogs: tuple[TopicNeed, ...]
    #: topics that must have equal partition counts (a join's sources), as named on the cluster
    co_partitioned: tuple[tuple[str, ...], ...]
    #: what the description leaves unknown (pattern sources, dynamic sinks)
    unknown: tuple[str, ...] = field(default_factory=tuple)


def _full(topology: Topology, application_id: str) -> dict[str, str]:
    """Every topic of the description -> its name on the cluster (internal topics carry the application id)."""
    internal = set(topology.internal_topics)
    names = {t for s in topology.subtopologies for t in (*s.source_topics, *s.sink_topics)}
    return {t: (f"{application_id}-{t}" if t in internal else t) for t in names}


def needed_topics(topology: Topology, application_id: str) -> tuple[str, ...]:
    """Every topic whose partition count the checks read: sources, internal topics, changelogs."""
    full = _full(topology, application_id)
    sources = [full[t] for s in topology.subtopologies for t in s.source_topics]
    changelogs = [f"{application_id}-{store}-changelog" for s in topology.subtopologies if not s.global_store
                  for store in s.stores]
    return tuple(dict.fromkeys((*sources, *changelogs)))


def derive_needs(topology: Topology, application_id: str, partitions: Mapping[str, int | None]) -> TopologyNeeds:
    """The topics the topology needs and the partition counts Kafka Streams would give them, from the actual
    counts of the topics that exist (``partitions``: topic on the cluster -> count, None when missing)."""
    full = _full(topology, application_id)
    internal = {full[t] for t in topology.internal_topics}
    tasks_s = [s for s in topology.subtopologies if not s.global_store]
    groups: list[tuple[str, ...]] = []
    for s in tasks_s:
        for pair in s.joined_sources():
            groups.append(tuple(full[t] for t in pair))
    groups = _merge_groups(groups)
    writers = {full[t]: [s for s in tasks_s if t in s.sink_topics] for t in topology.internal_topics}
    required: dict[str, int | None] = {}
    bases: dict[str, str] = {}

    def count(topic: str, seen: frozenset[str]) -> int | None:
        actual = partitions.get(topic)
        if actual is not None:
            return actual
        return repartition_count(topic, seen) if topic in internal else None

    def tasks(s: Subtopology, seen: frozenset[str]) -> int | None:
        counts = [count(full[t], seen) for t in s.source_topics]
        return max(counts) if counts and None not in counts else None  # type: ignore[type-var]

    def repartition_count(topic: str, seen: frozenset[str] = frozenset()) -> int | None:
        if topic in required:
            return required[topic]
        if topic in seen:  # a cycle: a topology cannot have one, but the text could claim one
            return None
        group = next((g for g in groups if topic in g), ())
        external = [partitions.get(t) for t in group if t not in internal]
        if external:  # co-partitioned with external topics: their count (Kafka Streams' co-partitioning)
            known = {c for c in external if c is not None}
            result = known.pop() if len(known) == 1 and None not in external else None
            basis = f"co-partitioned with {', '.join(t for t in group if t not in internal)}"
        else:
            counts = [tasks(s, seen | {topic}) for s in writers.get(topic, [])]
            result = max(counts) if counts and None not in counts else None  # type: ignore[type-var]
            basis = "the widest source of sub-topolog" + (
                "y " if len(writers.get(topic, [])) == 1 else "ies ") + ", ".join(
                str(s.id) for s in writers.get(topic, []))
        required[topic], bases[topic] = result, basis
        return result

    sources = [TopicNeed(full[t], "source", None, f"read by sub-topology {s.id}", s.id)
               for s in topology.subtopologies for t in s.source_topics if full[t] not in internal]
    repartition = [TopicNeed(t, "repartition", repartition_count(t), bases.get(t, ""))
                   for t in sorted(internal)]
    changelogs = []
    for s in tasks_s:
        n = tasks(s, frozenset())
        for store in s.stores:
            changelogs.append(TopicNeed(f"{application_id}-{store}-changelog", "changelog", n,
                                        f"one per task of sub-topology {s.id}", s.id))
    return TopologyNeeds(tuple(dict.fromkeys(sources)), tuple(repartition), tuple(changelogs), tuple(groups),
                         _unknown(topology))


def _unknown(topology: Topology) -> tuple[str, ...]:
    """The topics the description does not name: pattern sources and dynamic sinks."""
    return tuple([f"sub-topology {s.id} reads the pattern {n.pattern}"
                  for s in topology.subtopologies for n in s.of_kind("source") if n.pattern]
                 + [f"sub-topology {s.id} writes through {n.extractor}"
                    for s in topology.subtopologies for n in s.of_kind("sink") if n.extractor])


def _merge_groups(groups: Iterable[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Co-partition groups that share a topic are one group (a topic joined with two others)."""
    merged: list[set[str]] = []
    for group in groups:
        members = set(group)
        overlapping = [g for g in merged if g & members]
        for g in overlapping:
            members |= g
            merged.remove(g)
        merged.append(members)
    return [tuple(sorted(g)) for g in merged]


def _counted(topic: str, partitions: Mapping[str, int | None]) -> str:
    count = partitions.get(topic)
    return f"{topic} ({'missing' if count is None else count})"


def check_topology(topology: Topology | None, application_id: str,
                   partitions: Mapping[str, int | None]) -> tuple[Check, ...]:
    """Judge the cluster's topics against what ``topology`` needs (None: no topology was given, which the
    single check ``topology_description`` says, as a warning: never a silent pass)."""
    if topology is None:
        return (Check(NO_TOPOLOGY, WARN, "not checked: no topology from the controller or the run's "
                                         f"topology_description Param, and {BROKERS_CANNOT_SERVE}",
                      "Give the application's Topology#describe() output as the topology_description Param (or "
                      "have its controller report it): without it, missing internal topics and broken "
                      "co-partitioning are found only after the stop, by the broker (the group stays NOT_READY)."),)
    needs = derive_needs(topology, application_id, partitions)
    origin = f" (topology from {topology.source})" if topology.source else ""
    return (_sources(needs, partitions, origin), _repartition(needs, partitions), _changelogs(needs, partitions),
            _co_partitioning(needs, partitions))


def _sources(needs: TopologyNeeds, partitions: Mapping[str, int | None], origin: str) -> Check:
    topics = list(dict.fromkeys(n.topic for n in needs.sources))
    missing = [t for t in topics if partitions.get(t) is None]
    evidence = (", ".join(_counted(t, partitions) for t in topics) or "no named source topic") + origin
    if needs.unknown:
        evidence += "; not in the description: " + "; ".join(needs.unknown)
    if missing:
        return Check("topology_source_topics", FAIL, evidence,
                     f"Create {', '.join(missing)} before the migration (or correct the topology): a streams group "
                     "with a missing source topic stays NOT_READY and its members get empty assignments.")
    if needs.unknown:
        return Check("topology_source_topics", WARN, evidence,
                     "Check the topics behind the pattern or the topic extractor yourself: the description does "
                     "not name them.")
    return Check("topology_source_topics", PASS, evidence)


def _repartition(needs: TopologyNeeds, partitions: Mapping[str, int | None]) -> Check:
    if not needs.repartition:
        return Check("topology_repartition_topics", PASS, "the topology has no repartition topic")
    missing = [n for n in needs.repartition if partitions.get(n.topic) is None]
    differing = [n for n in needs.repartition if n.partitions is not None and partitions.get(n.topic) is not None
                 and partitions.get(n.topic) != n.partitions]
    parts = []
    for n in needs.repartition:
        need = f"needs {n.partitions}: {n.basis}" if n.partitions is not None else "count not derivable"
        parts.append(f"{_counted(n.topic, partitions)}, {need}")
    evidence = "; ".join(parts)
    if missing:
        names = ", ".join(n.topic for n in missing)
        return Check("topology_repartition_topics", FAIL, evidence,
                     f"Find out why {names} is gone (the running application created it; its records in flight "
                     "between sub-topologies went with it) and recreate it with the partition count above before "
                     "the migration, or reset the application (kafka-streams-application-reset) and let it "
                     "recreate its internal topics.")
    if differing:
        names = ", ".join(f"{n.topic} ({partitions.get(n.topic)}, derived {n.partitions})" for n in differing)
        return Check("topology_repartition_topics", WARN, evidence,
                     f"{names}: right only if the application sets the count itself "
                     "(Repartitioned.numberOfPartitions), which the description does not show; otherwise the "
                     "streams group will not accept it.")
    return Check("topology_repartition_topics", PASS, evidence)


def _changelogs(needs: TopologyNeeds, partitions: Mapping[str, int | None]) -> Check:
    if not needs.changelogs:
        return Check("topology_changelog_topics", PASS, "the topology has no state store outside global ones")
    wrong = [n for n in needs.changelogs if n.partitions is not None and partitions.get(n.topic) is not None
             and partitions.get(n.topic) != n.partitions]
    missing = [n for n in needs.changelogs if partitions.get(n.topic) is None]
    evidence = "; ".join(f"{_counted(n.topic, partitions)}, needs "
                         f"{n.partitions if n.partitions is not None else 'an unknown count'} ({n.basis})"
                         for n in needs.changelogs)
    if wrong:
        names = ", ".join(f"{n.topic} has {partitions.get(n.topic)}, needs {n.partitions}" for n in wrong)
        return Check("topology_changelog_topics", FAIL, evidence,
                     f"{names}: a changelog has exactly one partition per task of its sub-topology, and the "
                     "streams group refuses any other count. Fix the topic (or the source topics' counts) before "
                     "the migration.")
    if missing:
        names = ", ".join(n.topic for n in missing)
        return Check("topology_changelog_topics", WARN, evidence,
                     f"{names} missing: right only if the store's changelog is disabled (withLoggingDisabled) or "
                     "its source topic serves as its changelog (topology.optimization), which the description "
                     "does not show; otherwise the store is not backed up and its state is lost when the "
                     "instance's local state is.")
    return Check("topology_changelog_topics", PASS, evidence)


def _co_partitioning(needs: TopologyNeeds, partitions: Mapping[str, int | None]) -> Check:
    if not needs.co_partitioned:
        return Check("topology_co_partitioning", PASS, "no join between source topics of one sub-topology")
    evidence = "; ".join("joined: " + ", ".join(_counted(t, partitions) for t in g) for g in needs.co_partitioned)
    unequal = [g for g in needs.co_partitioned if len({partitions.get(t) for t in g} - {None}) > 1]
    if unequal:
        return Check("topology_co_partitioning", FAIL, evidence,
                     "Joined topics need equal partition counts (the streams group refuses them as incorrectly "
                     "partitioned): repartition the narrower topic to the wider count before the migration.")
    if any(partitions.get(t) is None for g in needs.co_partitioned for t in g):
        return Check("topology_co_partitioning", WARN, "unknown: a joined topic is missing; " + evidence,
                     "Create the missing topic (see the other topology checks); the counts are judged then.")
    return Check("topology_co_partitioning", PASS, evidence)


__all__ = ["BROKERS_CANNOT_SERVE", "CHECKS", "INTERNAL_TOPIC", "NO_TOPOLOGY", "Node", "Subtopology", "TopicNeed",
           "Topology", "TopologyNeeds", "check_topology", "derive_needs", "needed_topics", "parse_topology"]
