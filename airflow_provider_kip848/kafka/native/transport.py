"""The native backend's plumbing: two clients, retries, coordinator lookup, and out-of-band errors.

Which client answers what, and why:

* confluent-kafka (librdkafka): cluster description, configs, committed
  offsets, log offsets, offset commits, topics. Public, typed APIs.
* kafka-python 3.0: feature flags, the unfiltered ``ListGroups`` (with each
  group's type), classic ``DescribeGroups`` with raw ``userData``,
  ``LeaveGroup``, ``DeleteGroups``, per-broker ``ApiVersions``, and raw
  requests no Python client ships (:mod:`.protocol`).

Both are created lazily (constructing a :class:`Transport` never touches the
network) and kafka-python's is closed by :meth:`Transport.close`. Every call
goes through :meth:`Transport.retrying`, which rides out retriable broker
answers (a coordinator loading, a leader moving) until the request timeout and
turns everything else into the provider's errors (:mod:`..translate`).

A group coordinator moves when its broker dies or restarts. kafka-python 3.0
caches each group's coordinator and never drops it, so a long-lived client
(a waiting trigger) would keep asking a dead node or one that answers
NOT_COORDINATOR. Every retriable failure therefore drops the cached
coordinators before the retry, and per-group error codes inside a response
(``COORDINATOR_LOAD_IN_PROGRESS`` for one group of a DescribeGroups answer)
are raised inside the retried call: they are retried, never read as a group's
state or member count.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kafka import errors as kerr
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError as KafkaPythonError

from airflow_provider_kip848.kafka import errors
from airflow_provider_kip848.kafka.model import coordinator_partition
from airflow_provider_kip848.kafka.native.quiet import QUIET_LOGGER
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.kafka.translate import (
    confluent_retriable,
    redact,
    translate_confluent,
    translate_kafka_python,
)

T = TypeVar("T")

#: librdkafka's out-of-band reports that one broker could not be reached (refused, unresolvable)
_BROKER_UNREACHABLE = (ConfluentError._TRANSPORT, ConfluentError._RESOLVE)
#: ... and that none could (every broker down); a call that succeeds makes all of them history
_CONNECTION_ERRORS = (ConfluentError._ALL_BROKERS_DOWN, *_BROKER_UNREACHABLE)

#: kafka-python loggers and the level the provider sets when the user has not configured them.
#: kafka-python logs every connect/disconnect at INFO and warns about its own event-loop timing; while
#: a broker restarts it logs each refused reconnect and metadata refresh at ERROR (dozens a minute in
#: a waiting trigger's log), which the provider reports once, as a retriable error with the remedy.
QUIETER_LOGGERS = (("kafka", logging.WARNING), ("kafka.net.selector", logging.ERROR),
                   ("kafka.net", logging.CRITICAL), ("kafka.cluster", logging.CRITICAL))


def quiet_client_loggers() -> None:
    """Lower kafka-python's chatter, only where the user has not configured those loggers.

    Called when the first kafka-python client is created, not at import: importing the
    provider changes no logging configuration.
    """
    for name, level in QUIETER_LOGGERS:
        if logging.getLogger(name).level == logging.NOTSET:
            logging.getLogger(name).setLevel(level)




class Transport:
    """The clients of one :class:`~.admin.KafkaAdmin`, and how their calls are retried and translated."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self._kp_admin: KafkaAdminClient | None = None
        #: errors librdkafka reports out of band (an authentication failure arrives here,
        #: while the request future only times out)
        self._client_errors: list[ConfluentError] = []
        #: credentials checked once (SASL/SSL): a refused login is reported at once, not after a request timeout
        self._credentials_checked = not (settings.uses_sasl or settings.uses_ssl)

    @property
    def timeout_s(self) -> float:
        """The connection's request timeout, in seconds."""
        return self.settings.request_timeout_ms / 1000

    def close(self) -> None:
        if self._kp_admin is not None:
            self._kp_admin.close()
            self._kp_admin = None

    def forget_coordinators(self) -> None:
        """Drop the group coordinators kafka-python cached; the next request asks FindCoordinator again.

        kafka-python 3.0 keeps them in ``ClusterMetadata._coordinators`` and offers no public way to
        drop one; after NOT_COORDINATOR, a dead node or a timeout the cached node may be wrong.
        """
        # a private attribute: if a kafka-python release renames it, nothing is dropped (and nothing breaks)
        cluster = getattr(getattr(self._kp_admin, "_manager", None), "cluster", None)
        coordinators = getattr(cluster, "_coordinators", None)
        if isinstance(coordinators, dict):
            coordinators.clear()

    # -- clients -----------------------------------------------------------

    @functools.cached_property
    def confluent(self) -> AdminClient:
        """confluent-kafka's AdminClient (librdkafka keeps its own connections and threads)."""

        def on_error(err: ConfluentError) -> None:
            if len(self._client_errors) < 50:
                self._client_errors.append(err)

        config: dict[str, Any] = {**self.settings.confluent_config(), "logger": QUIET_LOGGER, "error_cb": on_error}
        return AdminClient(config)

    @property
    def kafka_python(self) -> KafkaAdminClient:
        """kafka-python's admin client, created on first use after the credentials check."""
        if self._kp_admin is None:
            quiet_client_loggers()
            # kafka-python retries a refused login until its bootstrap timeout and then only says
            # "unable to bootstrap"; librdkafka names the authentication failure within a second.
            self.check_credentials()
            try:
                self._kp_admin = KafkaAdminClient(**self.settings.kafka_python_config())
            except KafkaPythonError as exc:
                raise translate_kafka_python(exc, self.settings) from exc
        return self._kp_admin

    # -- out-of-band errors ------------------------------------------------

    def reported_connection_error(self) -> errors.Kip848Error | None:
        """An authentication failure, or all brokers down, as librdkafka reported it out of band since the last call
        that succeeded. One broker unreachable (a node killed, its connection refused) is not "cannot reach any
        broker": the others answer, and a request that timed out meanwhile is a timeout, which names it."""
        if (auth := self.auth_error()) is not None:
            return auth
        if any(e.code() == ConfluentError._ALL_BROKERS_DOWN for e in self._client_errors):
            return errors.KafkaConnectionError(f"Cannot reach any broker at {self.settings.bootstrap_servers}.")
        return None

    def _unreachable_brokers(self) -> list[str]:
        """What librdkafka reported of single brokers it could not reach since the last call that succeeded."""
        seen = [redact(e.str(), self.settings) for e in self._client_errors if e.code() in _BROKER_UNREACHABLE]
        return list(dict.fromkeys(seen))[-3:]

    def _forget_connection_errors(self) -> None:
        """A call succeeded: a broker answered, so what was reported of unreachable brokers before is history."""
        if self._client_errors:
            self._client_errors[:] = [e for e in self._client_errors if e.code() not in _CONNECTION_ERRORS]

    def auth_error(self) -> errors.AuthenticationFailed | None:
        if "confluent" in self.__dict__:
            self.confluent.poll(0)  # error callbacks are served by poll()
        for err in self._client_errors:
            if err.code() in (ConfluentError._AUTHENTICATION, ConfluentError.SASL_AUTHENTICATION_FAILED,
                              ConfluentError._SSL):
                return errors.AuthenticationFailed(
                    f"The brokers at {self.settings.bootstrap_servers} refused this connection's credentials: "
                    f"{redact(err.str(), self.settings)}."
                )
        return None

    def check_credentials(self) -> None:
        """On a secured connection, raise :class:`AuthenticationFailed` before the first request if the
        brokers refuse the login (a request would only time out, after ``request_timeout_ms``)."""
        if self._credentials_checked:
            return
        refused = self._probe_connection()
        if refused is not None:
            raise refused
        self._credentials_checked = True

    def _probe_connection(self) -> errors.Kip848Error | None:
        """None once librdkafka gets metadata; an AuthenticationFailed as soon as it reports one; a
        (retriable) KafkaConnectionError when no broker answered within the request timeout."""
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            try:
                self.confluent.list_topics(timeout=0.5)
                return None
            except KafkaException:
                pass
            if (auth := self.auth_error()) is not None:
                return auth
        return self.reported_connection_error() or errors.KafkaConnectionError(
            f"No broker at {self.settings.bootstrap_servers} answered within {self.settings.request_timeout_ms} ms.")

    # -- calls ---------------------------------------------------------------

    def requires(self, action: str, *needs: tuple[str, str, str | None]) -> AbstractContextManager[None]:
        """An authorization failure inside names the permission ``action`` needs (see :func:`errors.requires`)."""
        return errors.requires(action, *needs, principal=self.settings.sasl_username)

    def retrying(self, call: Callable[[], T]) -> T:
        """Run ``call``, retrying retriable broker errors with backoff until the request timeout.

        A coordinator still loading after a broker restart, or a leader that
        moved, answers with a retriable error; the Java Admin client retries
        those, and so do we, instead of failing the task.
        """
        self.check_credentials()
        deadline = time.monotonic() + self.timeout_s
        backoff = 0.1
        while True:
            try:
                answer = call()
            except KafkaPythonError as exc:
                if getattr(exc, "retriable", False):
                    self.forget_coordinators()
                if getattr(exc, "retriable", False) and time.monotonic() + backoff < deadline:
                    time.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
                    continue
                raise translate_kafka_python(exc, self.settings) from exc
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if (auth := self.auth_error()) is not None:
                    raise auth from exc
                if err is not None and confluent_retriable(err) and time.monotonic() + backoff < deadline:
                    time.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
                    continue
                raise self._confluent_failure(exc) from exc
            self._forget_connection_errors()
            return answer

    def _confluent_failure(self, exc: KafkaException) -> errors.Kip848Error:
        """A confluent-kafka failure as the provider's error: a timeout is named by what librdkafka reported out of
        band (credentials refused, no broker reachable) when it did."""
        error = translate_confluent(exc, self.settings)
        if isinstance(error, errors.OperationTimedOut):
            reported = self.reported_connection_error()
            if reported is not None:
                return reported
            if unreachable := self._unreachable_brokers():
                return errors.OperationTimedOut(f"{error.what.rstrip('.')} (meanwhile unreachable: "
                                                f"{'; '.join(unreachable)}).", remedy=error.remedy)
        return error

    def kafka_python_call(  # Any: forwards to kafka-python's untyped admin methods
            self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call a kafka-python admin method, retried and translated."""
        return self.retrying(lambda: getattr(self.kafka_python, method)(*args, **kwargs))

    def send(self, request_factory: Callable[[], Any], *, node_id: int | None = None, group_id: str | None = None,
             # Any: kafka-python's and confluent-kafka's objects are untyped
             errors: Callable[[Any], Iterable[tuple[int, str | None]]] | None = None) -> Any:
        """Send a raw request (to ``node_id``, or to ``group_id``'s coordinator) through kafka-python.

        ``errors(response)`` lists the per-group (or per-member) error codes of the answer: a retriable
        one is raised inside the retried call, so it is asked again (of the coordinator found anew)
        instead of being read as a fact. Other codes are left to the caller.
        """
        admin = self.kafka_python

        async def send() -> Any:
            node = node_id
            if group_id is not None:
                node = await admin._find_coordinator_id(group_id)
            response = await admin._manager.send(request_factory(), node_id=node)
            raise_retriable(errors(response) if errors is not None else ())
            return response

        return self.for_group(group_id, lambda: self.retrying(lambda: admin._manager.run(send)))

    def find_coordinator(self, group_id: str) -> int:
        """The node id of ``group_id``'s coordinator (FindCoordinator; needs DESCRIBE on the group)."""
        admin = self.kafka_python

        async def find() -> int:
            node_id: int = await admin._find_coordinator_id(group_id)
            return node_id

        coordinator: int = self.for_group(group_id, lambda: self.retrying(lambda: admin._manager.run(find)))
        return coordinator

    def for_group(self, group_id: str | None, call: Callable[[], T]) -> T:
        """Run ``call``; a coordinator that stayed unavailable is reported with the group's
        ``__consumer_offsets`` partition and the node leading it (where the broker-side evidence is)."""
        try:
            return call()
        except errors.CoordinatorUnavailable as exc:
            if group_id is None or exc.group_id is not None:
                raise
            raise self.coordinator_unavailable(group_id, exc) from exc

    def coordinator_unavailable(self, group_id: str,
                                exc: errors.CoordinatorUnavailable) -> errors.CoordinatorUnavailable:
        partition = leader = None
        try:
            topic = self.confluent.list_topics("__consumer_offsets", timeout=min(self.timeout_s, 5)).topics.get(
                "__consumer_offsets")
            if topic is not None and topic.partitions:
                partition = coordinator_partition(group_id, len(topic.partitions))
                leader = topic.partitions[partition].leader
        except KafkaException:
            pass
        where = (f"__consumer_offsets partition {partition}" + (f", led by node {leader}" if leader is not None
                                                                  and leader >= 0 else ", no leader")
                 if partition is not None else "its __consumer_offsets partition (not known now)")
        return errors.CoordinatorUnavailable(
            f"The coordinator of group {group_id!r} ({where}) kept answering {exc.error or 'errors'} for "
            f"{self.settings.request_timeout_ms} ms: the group's state cannot be read now",
            remedy=(f"Retry in a few seconds (a coordinator moving after a broker restart takes seconds). If it "
                    f"lasts, the partition fails to load: read the log of node {leader if leader is not None else '?'}"
                    " for errors loading it (\"Failed to load\", \"is not a streams group\": KAFKA-20254 on "
                    "Kafka 4.2.0)."),
            group_id=group_id, partition=partition, leader=leader, error=exc.error)

    def coordinator_id(self, group_id: str) -> int | None:
        """Like :meth:`find_coordinator`, None when it cannot be found (a description still stands)."""
        try:
            return self.find_coordinator(group_id)
        except errors.Kip848Error:
            return None

    def result(self, future: Any) -> Any:  # Any: kafka-python's and confluent-kafka's objects are untyped
        """The result of a confluent-kafka future, translated.

        Not retried: a future's answer is final (asking it again returns the same error), and sending the
        request again is the caller's choice, since some are not idempotent (a second CreateTopics after a
        lost answer reads as "already exists", which the change lock must not take for another run's lock).
        A retriable error leaves with ``retriable=True``, so the task is retried.
        """
        try:
            return future.result(self.timeout_s + 5)
        except KafkaException as exc:
            raise (self.auth_error() or self._confluent_failure(exc)) from exc


def raise_retriable(errors: Iterable[tuple[int, str | None]]) -> None:
    """Raise the first retriable Kafka error among ``(code, message)`` pairs (kafka-python's class for it)."""
    for code, message in errors:
        if code:
            error = kerr.for_code(code)
            if getattr(error, "retriable", False):
                raise error(message or "")
