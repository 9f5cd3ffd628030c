"""Reads for many groups at once: one request per coordinator (or partition leader), all in flight together.

An inventory of thousands of groups cannot afford a round trip per group.
Kafka's group APIs take many groups per request: ``FindCoordinator`` v4+
(batched coordinator keys), ``DescribeGroups``, ``ConsumerGroupDescribe``,
``StreamsGroupDescribe`` and ``OffsetFetch`` v8+ (many groups, answered by
their coordinator), and ``ListOffsets`` (every partition a broker leads). So
:class:`BatchReader` sends one FindCoordinator for all groups, then one request
per coordinator and API (in chunks of :data:`CHUNK` groups), all at once on
kafka-python's event loop, and waits for them together.

Failures are per group and per node, never for the whole batch:

* A retriable per-group answer (a coordinator loading or moving) is asked
  again, of the coordinator found anew, until the deadline.
* A node that does not answer within the wait is *unresponsive* for the rest
  of this reader's life: its groups are not sent to it again (each retry
  would wait a whole request timeout), they are looked up again in case the
  group moved, and at the deadline they are reported failed with the reason.
* ``GROUP_ID_NOT_FOUND`` "is not a <type> group" means the group changed type
  since the listing (a conversion): the describe of the other types is tried.
  "not found" means it is gone.

Nothing here decides what a failure means for the caller; it returns what
was answered, what failed (with why) and what is gone.

Why over 500 lines: nearly all of it is one class, :class:`BatchReader`, whose methods are the steps of one
inventory read: they share one deadline, one request count, the coordinators found once and the answers of the
step before. Split by request type, each part would reach back into that state; side by side, the chunking and
retry rules of every step read the same way.
"""

from __future__ import annotations

import gc
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kafka import errors as kerr
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError as KafkaPythonError
from kafka.protocol.admin import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.admin.configs import ListConfigResourcesRequest
from kafka.protocol.consumer import OffsetFetchRequest, OffsetSpec
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.structs import TopicPartition as KafkaPythonTopicPartition

from airflow_provider_kip848.kafka.model import (
    BrokerVersion,
    ClusterFeatures,
    GroupListing,
    GroupState,
    GroupType,
    TopicPartition,
    normalize_state,
)
from airflow_provider_kip848.kafka.native import converters
from airflow_provider_kip848.kafka.native.protocol import ConsumerGroupDescribeRequest, StreamsGroupDescribeRequest
from airflow_provider_kip848.kafka.native.transport import Transport
from airflow_provider_kip848.kafka.translate import GROUP_ID_NOT_FOUND, translate_kafka_python

#: group ids per describe or OffsetFetch request: bounds one response's size (a group with many members
#: and partitions answers kilobytes) while keeping the requests per coordinator few
CHUNK = 1000
#: the describe request of each group type; "offsets" is OffsetFetch (any type)
CLASSIC, CONSUMER, STREAMS, OFFSETS = "classic", "consumer", "streams", "offsets"
DESCRIBE_KINDS = (CLASSIC, CONSUMER, STREAMS)
#: requests sent to one node at a time (kafka-python pauses a connection at 5 in flight)
MAX_IN_FLIGHT = 4
#: ConfigResource.Type.GROUP in Kafka's protocol
GROUP_RESOURCE_TYPE = 32
#: the least time a request waits for its answer, even past the deadline: the first attempt of each step
#: always gets a real chance (a deadline spent waiting on one dead node must not fail every other group)
MIN_WAIT_S = 2.0


_collector_lock = threading.Lock()
_collector_pauses = 0
_collector_was_enabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while the block runs, then as it was before.

    A batched read of tens of thousands of groups allocates hundreds of thousands of objects (decoded
    answers, descriptions, offsets, entries) that all live until it returns: none is garbage, yet each
    collection the allocations trigger scans them again (65,000 groups: some 2,000 collections, a third
    of the inventory's time). Reference counting still frees everything else at once; cycles wait for
    the next collection after the block. Safe across threads and nested use: the collector is enabled
    again when the last paused block ends, and only if it was enabled when the first one began.
    """
    global _collector_pauses, _collector_was_enabled
    with _collector_lock:
        if _collector_pauses == 0:
            _collector_was_enabled = gc.isenabled()
            gc.disable()
        _collector_pauses += 1
    try:
        yield
    finally:
        with _collector_lock:
            _collector_pauses -= 1
            if _collector_pauses == 0 and _collector_was_enabled:
                gc.enable()


def _error_name(code: int) -> str:
    name: str = kerr.for_code(code).__name__
    return name


def _retriable(code: int) -> bool:
    return bool(getattr(kerr.for_code(code), "retriable", False))


@dataclass
class GroupAnswers:
    """What a batched per-group read returned: ``answers`` (group id -> (kind, node that answered, raw
    answer)), ``failed``
    (group id -> why, after retries until the deadline) and ``gone`` (the coordinator does not have it)."""

    answers: dict[str, tuple[str, int, Any]] = field(default_factory=dict)  # Any: kafka-python's answers are untyped
    failed: dict[str, str] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)


class BatchReader:
    """Batched reads through one :class:`Transport`'s kafka-python client, retried until ``deadline``.

    ``requests`` counts the requests sent per API (what makes the batching visible to a test or a bench).
    """

    def __init__(self, transport: Transport, deadline: float) -> None:
        self._t = transport
        self.deadline = deadline
        self.requests: Counter[str] = Counter()
        #: node id -> why it is not asked again (it did not answer within the wait)
        self.unresponsive: dict[int, str] = {}
        #: brokers that answered ListGroups: FindCoordinator and Metadata go to them
        self.alive: list[int] = []
        #: group id -> the node that answered a request for it without an error (its coordinator a moment
        #: ago): the next per-group read of this reader sends it there first, without a FindCoordinator
        self.answered_by: dict[str, int] = {}

    # -- plumbing ------------------------------------------------------------------------------

    @property
    def _client(self) -> KafkaAdminClient:
        return self._t.kafka_python

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def _wait_s(self) -> float:
        return min(self._t.timeout_s, max(self.remaining(), MIN_WAIT_S))

    def exchange(  # Any: kafka-python's and confluent-kafka's objects are untyped
            self, requests: Sequence[tuple[int | None, Any]]) -> list[Any]:
        """Send every ``(node, request)`` and wait for all answers; a failure is returned in the answer's
        place (an exception), and a node that let a request time out is marked unresponsive.

        kafka-python pauses a connection with :data:`MAX_IN_FLIGHT` requests outstanding (later sends fail
        at once), so each node gets at most that many at a time, the next sent as one is answered; all
        nodes are served together.
        """
        manager = self._client._manager
        end = time.monotonic() + self._wait_s()
        answers: list[Any] = [None] * len(requests)
        queues: dict[int | None, list[int]] = defaultdict(list)
        for i, (node, request) in enumerate(requests):
            queues[node].append(i)
            self.requests[type(request).__name__.removesuffix("Request")] += 1

        async def node_pipeline(queue: list[int]) -> None:
            """One node's requests, at most MAX_IN_FLIGHT at a time (a slow node delays only its own)."""
            while queue:
                wave, queue[:] = queue[:MAX_IN_FLIGHT], queue[MAX_IN_FLIGHT:]
                futures = []
                for i in wave:
                    node, request = requests[i]
                    try:
                        futures.append((i, manager.send(request, node_id=node)))
                    except KafkaPythonError as exc:
                        answers[i] = exc
                for i, future in futures:
                    try:
                        answers[i] = await manager.wait_for(future, max(1, int(1000 * (end - time.monotonic()))))
                    except KafkaPythonError as exc:
                        answers[i] = exc

        async def exchange() -> None:
            pipelines = [manager.call_soon(node_pipeline, queue) for queue in queues.values()]
            for pipeline in pipelines:
                await pipeline

        try:
            manager.run(exchange)
        except KafkaPythonError as exc:  # the client itself failed (no broker reachable)
            raise translate_kafka_python(exc, self._t.settings) from exc
        for (node, request), answer in zip(requests, answers, strict=True):
            if node is not None and isinstance(answer, (kerr.KafkaTimeoutError, kerr.RequestTimedOutError)):
                self.unresponsive.setdefault(node, f"node {node} did not answer "
                                                   f"{type(request).__name__.removesuffix('Request')} "
                                                   f"({type(answer).__name__})")
        return answers

    def _pause(self, backoff: float) -> float:
        time.sleep(min(backoff, self.remaining()))
        return min(backoff * 2, 1.0)

    def _any_alive(self) -> int | None:
        for node in self.alive:
            if node not in self.unresponsive:
                return node
        return None

    # -- ListGroups ----------------------------------------------------------------------------

    def list_groups(self) -> tuple[dict[str, GroupListing], dict[int, str]]:
        """Every group listed by every broker (ListGroups, all brokers at once), and the brokers that did
        not answer before the deadline (node -> why): the groups they coordinate are missing."""
        listed: dict[str, GroupListing] = {}
        backoff = 0.1
        while True:
            brokers = sorted(b.node_id for b in self._client._manager.cluster.brokers())
            answers = self.exchange([(b, ListGroupsRequest(min_version=0)) for b in brokers])
            unanswered: dict[int, str] = {}
            for broker, answer in zip(brokers, answers, strict=True):
                if isinstance(answer, Exception):
                    unanswered[broker] = f"ListGroups: {type(answer).__name__} {answer}".strip()
                elif answer.error_code:
                    unanswered[broker] = f"ListGroups: {_error_name(answer.error_code)}"
                else:
                    for g in answer.groups:
                        listed[g.group_id] = GroupListing(
                            g.group_id, GroupType.parse(getattr(g, "group_type", None)),
                            normalize_state(getattr(g, "group_state", None)), g.protocol_type or "")
            self.alive = [b for b in brokers if b not in unanswered]
            retry = [b for b in unanswered if b not in self.unresponsive]  # refused, not silent: ask again
            if not retry or self.remaining() <= 0:
                return listed, unanswered
            backoff = self._pause(backoff)

    # -- ListConfigResources: the groups that have group configs ------------------------------------

    def config_groups(self) -> tuple[set[str] | None, str | None]:
        """The id of every group that has group configs, whether or not the group exists (ListConfigResources
        v1 for GROUP resources, KIP-1142, Kafka 4.1+; one request to a broker that answered ListGroups), or None
        and why it is not known (a broker too old, DESCRIBE_CONFIGS on the cluster refused, no answer)."""
        node = self._any_alive()
        if node is None:
            return None, "no broker answered ListGroups, so none was asked which groups have configs"
        backoff = 0.1
        while True:
            answer = self.exchange([(node, ListConfigResourcesRequest(resource_types=[GROUP_RESOURCE_TYPE],
                                                                      min_version=1))])[0]
            if isinstance(answer, Exception):
                if isinstance(answer, kerr.IncompatibleBrokerVersion | kerr.UnsupportedVersionError):
                    return None, (f"broker {node} does not list config resources by type (ListConfigResources v1, "
                                  "KIP-1142, Kafka 4.1+)")
                return None, f"ListConfigResources: {type(answer).__name__} {answer}".strip()
            if answer.error_code:
                if _retriable(answer.error_code) and self.remaining() > 0:
                    backoff = self._pause(backoff)
                    continue
                return None, f"ListConfigResources: {_error_name(answer.error_code)}"
            return {r.resource_name for r in answer.config_resources
                    if getattr(r, "resource_type", GROUP_RESOURCE_TYPE) == GROUP_RESOURCE_TYPE}, None

    # -- ApiVersions: broker releases and features -----------------------------------------------

    def broker_facts(self) -> tuple[list[BrokerVersion], ClusterFeatures | None, dict[int, str]]:
        """Each answering broker's release and the cluster's features (ApiVersions v3+ to every live broker at
        once), and the brokers that did not answer (node -> why): their release is unknown."""
        brokers = sorted(b.node_id for b in self._client._manager.cluster.brokers())
        request = ApiVersionsRequest(client_software_name="airflow-provider-kip848", client_software_version="0",
                                     min_version=3)
        asked = [b for b in brokers if b not in self.unresponsive]
        answers = self.exchange([(b, request) for b in asked])
        versions: list[BrokerVersion] = []
        features: ClusterFeatures | None = None
        missing = {b: self.unresponsive[b] for b in brokers if b in self.unresponsive}
        for broker, answer in zip(asked, answers, strict=True):
            if isinstance(answer, Exception) or answer.error_code:
                missing[broker] = f"node {broker} did not answer ApiVersions" + (
                    f" ({type(answer).__name__})" if isinstance(answer, Exception) else "")
                continue
            versions.append(converters.broker_version(broker, answer))
            if features is None:
                features = converters.cluster_features(_feature_dict(answer))
        return versions, features, missing

    # -- FindCoordinator -------------------------------------------------------------------------

    def coordinators(self, group_ids: Iterable[str]) -> tuple[dict[str, int], dict[str, tuple[str, bool]]]:
        """group id -> coordinator node (one FindCoordinator v4 for all), and group id -> (error, retriable)."""
        ids = list(group_ids)
        found: dict[str, int] = {}
        errors: dict[str, tuple[str, bool]] = {}
        if not ids:
            return found, errors
        node = self._any_alive()
        (answer,) = self.exchange([(node, FindCoordinatorRequest(key_type=0, coordinator_keys=ids, min_version=4))])
        if isinstance(answer, Exception):
            return found, {g: (f"FindCoordinator: {type(answer).__name__}", True) for g in ids}
        for c in answer.coordinators:
            if c.error_code:
                errors[c.key] = (f"FindCoordinator: {_error_name(c.error_code)} {c.error_message or ''}".strip(),
                                 _retriable(c.error_code))
            else:
                found[c.key] = c.node_id
        for g in ids:
            if g not in found and g not in errors:
                errors[g] = ("FindCoordinator: no answer for this group", True)
        return found, errors

    # -- per-group requests ----------------------------------------------------------------------

    def describe(self, kinds: Mapping[str, Sequence[str]]) -> GroupAnswers:
        """Describe each group with the describe of its kind (group id -> kinds to try, in order:
        the listed type first). A group answering "not a <kind> group" is tried with the next kind."""
        return self._per_group({g: list(k) for g, k in kinds.items()}, _describe_request, _describe_rows)

    def offsets(self, group_ids: Iterable[str]) -> GroupAnswers:
        """Committed offsets of each group (OffsetFetch v8+, many groups per request per coordinator)."""
        return self._per_group({g: [OFFSETS] for g in group_ids}, _offsets_request, _offsets_rows)

    def _per_group(self, pending: dict[str, list[str]], make: Callable[[str, list[str]], Any],
                   rows: Callable[[str, Any], Iterable[tuple[str, int, str, Any]]]) -> GroupAnswers:
        """Each pending group asked of its coordinator until answered, gone, failed for good or the deadline.

        The first round sends a group that an earlier read of this reader had answered straight to the node
        that answered it (no FindCoordinator: at tens of thousands of groups one costs about a second); a
        node that is no longer its coordinator answers NOT_COORDINATOR, which is retriable, so the group is
        looked up anew in the next round like any other. Later rounds always look the groups up."""
        out = GroupAnswers()
        last_error: dict[str, str] = {}
        backoff = 0.1
        known: dict[str, int] | None = {g: self.answered_by[g] for g in pending if g in self.answered_by}
        while pending:
            retry_later = self._per_group_round(pending, make, rows, out, last_error, known or {})
            known = None
            if not pending:
                break
            if self.remaining() <= 0:
                for g in pending:
                    out.failed[g] = f"{last_error.get(g, 'no answer')} (retried until the deadline)"
                break
            if retry_later:
                backoff = self._pause(backoff)
        self.answered_by.update((g, node) for g, (_, node, _) in out.answers.items())
        return out

    def _per_group_round(self, pending: dict[str, list[str]], make: Callable[[str, list[str]], Any],
                         rows: Callable[[str, Any], Iterable[tuple[str, int, str, Any]]], out: GroupAnswers,
                         last_error: dict[str, str], known: Mapping[str, int]) -> bool:
        """One round: look the pending groups' coordinators up (those of ``known`` are sent to the node it
        names without a lookup), send each its groups, sort the answers. True when something is worth
        asking again after a pause."""
        nodes, lookup_errors = self.coordinators([g for g in pending if g not in known])
        nodes.update((g, known[g]) for g in pending if g in known)
        retry_later = False
        for g, (error, retriable) in lookup_errors.items():
            if retriable:
                last_error[g] = error
                retry_later = True
            else:
                out.failed[g] = error
                pending.pop(g, None)
        batches: dict[tuple[int, str], list[str]] = defaultdict(list)
        for g, node in nodes.items():
            if node in self.unresponsive:
                last_error[g] = f"its coordinator, {self.unresponsive[node]}"
                retry_later = True  # looked up again: the group may have moved to a live node
            else:
                batches[(node, pending[g][0])].append(g)
        requests: list[tuple[int | None, Any]] = []
        sent: list[tuple[int, str, list[str]]] = []
        for (node, kind), ids in batches.items():
            for i in range(0, len(ids), CHUNK):
                requests.append((node, make(kind, ids[i:i + CHUNK])))
                sent.append((node, kind, ids[i:i + CHUNK]))
        answers = self.exchange(requests) if requests else []
        for (node, kind, ids), answer in zip(sent, answers, strict=True):
            if isinstance(answer, Exception):
                for g in ids:
                    last_error[g] = self.unresponsive.get(node) or f"node {node}: {type(answer).__name__}"
                retry_later = True
                continue
            answered = set()
            for g, code, message, payload in rows(kind, answer):
                if g in pending:
                    answered.add(g)
                    retry_later |= self._sort_answer(g, node, kind, code, message, payload, pending, out, last_error)
            for g in ids:
                if g in pending and g not in answered:
                    last_error[g] = f"node {node} did not answer for it"
                    retry_later = True
        return retry_later

    @staticmethod
    def _sort_answer(g: str, node: int, kind: str, code: int, message: str, payload: Any,
                     pending: dict[str, list[str]], out: GroupAnswers, last_error: dict[str, str]) -> bool:
        """File one group's answer; True when it is to be asked again after a pause (a retriable error)."""
        if code == 0:
            out.answers[g] = (kind, node, payload)
            del pending[g]
        elif code == GROUP_ID_NOT_FOUND and f"not a {kind} group" in message:
            pending[g] = pending[g][1:]  # converted since the listing: try the other types
            if not pending[g]:
                out.failed[g] = f"no describe of this provider answers for it ({message})"
                del pending[g]
        elif code == GROUP_ID_NOT_FOUND:
            out.gone.add(g)
            del pending[g]
        elif _retriable(code):
            last_error[g] = f"{_error_name(code)} from node {node}" + (f": {message}" if message else "")
            return True
        else:
            out.failed[g] = _error_name(code) + (f": {message}" if message else "")
            del pending[g]
        return False

    # -- ListOffsets -----------------------------------------------------------------------------

    def log_offsets(self, tps: Iterable[TopicPartition]) -> tuple[dict[TopicPartition, int],
                                                                   dict[TopicPartition, int],
                                                                   dict[TopicPartition, str]]:
        """Log start and end (read_uncommitted) of every partition: one Metadata request, then one ListOffsets
        per leader and spec (earliest, latest), all at once. Returns starts, ends, and why a partition has none."""
        pending = set(tps)
        starts: dict[TopicPartition, int] = {}
        ends: dict[TopicPartition, int] = {}
        errors: dict[TopicPartition, str] = {}
        backoff = 0.1
        while pending:
            self._log_offsets_round(pending, starts, ends, errors)
            for tp in list(pending):
                if tp in starts and tp in ends:
                    pending.discard(tp)
                    errors.pop(tp, None)
            if not pending or self.remaining() <= 0:
                break
            backoff = self._pause(backoff)
        return starts, ends, errors

    def _log_offsets_round(self, pending: set[TopicPartition], starts: dict[TopicPartition, int],
                           ends: dict[TopicPartition, int], errors: dict[TopicPartition, str]) -> None:
        leaders, missing, no_leader = self._leaders(pending)
        for tp in missing:
            errors[tp] = "no such topic-partition"
            pending.discard(tp)
        for tp in no_leader:
            errors[tp] = "no leader"
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp, leader in leaders.items():
            if leader in self.unresponsive:
                errors[tp] = f"its leader, {self.unresponsive[leader]}"
            else:
                by_leader[leader].append(tp)
        requests: list[tuple[int | None, Any]] = []
        for leader, parts in sorted(by_leader.items()):
            for spec in (OffsetSpec.EARLIEST, OffsetSpec.LATEST):
                requests.append((leader, KafkaAdminClient._list_partition_offsets_request(
                    {KafkaPythonTopicPartition(tp.topic, tp.partition): spec for tp in parts}, 0)))
        answers = self.exchange(requests) if requests else []
        for (node, request), answer in zip(requests, answers, strict=True):
            target = starts if request.topics[0].partitions[0].timestamp == OffsetSpec.EARLIEST else ends
            if isinstance(answer, Exception):
                why = self.unresponsive.get(node) if node is not None else None
                for t in request.topics:
                    for p in t.partitions:
                        errors[TopicPartition(t.name, p.partition_index)] = \
                            why or f"node {node}: {type(answer).__name__}"
                continue
            for t in answer.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code:
                        errors[tp] = f"ListOffsets: {_error_name(p.error_code)}"
                    else:
                        target[tp] = p.offset

    def _leaders(self, tps: set[TopicPartition]) -> tuple[dict[TopicPartition, int], list[TopicPartition],
                                                          list[TopicPartition]]:
        """partition -> leader from one Metadata request; the partitions that do not exist; those without a leader."""
        topics = sorted({tp.topic for tp in tps})
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                                  allow_auto_topic_creation=False)
        (answer,) = self.exchange([(self._any_alive(), request)])
        if isinstance(answer, Exception):
            return {}, [], sorted(tps)
        known: dict[TopicPartition, int] = {}
        absent_topics = set()
        for t in answer.topics:
            if t.error_code == 3:  # UNKNOWN_TOPIC_OR_PARTITION: deleted since the commit
                absent_topics.add(t.name)
            for p in t.partitions:
                known[TopicPartition(t.name, p.partition_index)] = p.leader_id
        leaders = {tp: known[tp] for tp in tps if known.get(tp, -1) >= 0}
        missing = sorted(tp for tp in tps if tp.topic in absent_topics
                         or (tp not in known and any(k.topic == tp.topic for k in known)))
        no_leader = sorted(tps - set(leaders) - set(missing))
        return leaders, missing, no_leader


# -- requests and their rows ---------------------------------------------------------------------------------


def _describe_request(kind: str, ids: list[str]) -> Any:
    if kind == CLASSIC:
        return DescribeGroupsRequest(groups=ids, include_authorized_operations=False)
    if kind == CONSUMER:
        return ConsumerGroupDescribeRequest(group_ids=ids, include_authorized_operations=False)
    return StreamsGroupDescribeRequest(group_ids=ids, include_authorized_operations=False)


def _describe_rows(kind: str, response: Any) -> Iterable[tuple[str, int, str, Any]]:
    for g in response.groups:
        message = getattr(g, "error_message", None) or ""
        if kind == CLASSIC and g.error_code == 0 and normalize_state(g.group_state) is GroupState.DEAD:
            yield g.group_id, GROUP_ID_NOT_FOUND, "not found (Dead)", g  # brokers before 4.x answer so
        else:
            yield g.group_id, g.error_code, message, g


def offset_fetch_request(  # Any: kafka-python's and confluent-kafka's objects are untyped
        group_ids: list[str], *, require_stable: bool) -> Any:
    """OffsetFetch v8+ of every committed offset of each group (``require_stable``: see
    ``KafkaAdmin.group_offsets``; the fleet inventory reads plain, a view over many groups)."""
    group = OffsetFetchRequest.OffsetFetchRequestGroup
    return OffsetFetchRequest(groups=[group(group_id=g, topics=None) for g in group_ids],
                              require_stable=require_stable, min_version=8, max_version=9)


def _offsets_request(kind: str, ids: list[str]) -> Any:
    return offset_fetch_request(ids, require_stable=False)


def _offsets_rows(kind: str, response: Any) -> Iterable[tuple[str, int, str, Any]]:
    for g in response.groups:
        code = g.error_code or next((p.error_code for t in g.topics for p in t.partitions if p.error_code), 0)
        yield g.group_id, code, "", g


def _feature_dict(response: Any) -> dict[str, dict[str, Any]]:
    """An ApiVersions v3+ answer's features in the shape of kafka-python's ``describe_features()``."""
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    epoch = response.finalized_features_epoch
    for f in response.supported_features or []:
        out[f.name]["supported"] = (f.min_version, f.max_version)
    for f in response.finalized_features or []:
        out[f.name]["finalized"] = (f.min_version_level, f.max_version_level)
        out[f.name]["finalized_epoch"] = epoch if epoch is not None and epoch >= 0 else None
    return dict(out)
