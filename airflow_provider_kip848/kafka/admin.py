"""Native admin backend: confluent-kafka's AdminClient, plus kafka-python where it lacks a request.

confluent-kafka 2.16 has no feature-flag requests and its group listing drops
streams and share groups; kafka-python 3.0 sends ``DescribeFeatures`` /
``UpdateFeatures`` and an unfiltered ``ListGroups`` that carries the group
type. Each method here picks the client that can answer, and returns the
typed facts of :mod:`.model`, never a client's own objects.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from airflow_provider_kip848.kafka.errors import AuthorizationFailed, KafkaConnectionError, OperationTimedOut
from airflow_provider_kip848.kafka.model import (
    BrokerNode,
    ClusterFeatures,
    ClusterInfo,
    Feature,
    GroupListing,
    GroupType,
)
from airflow_provider_kip848.kafka.settings import ClientSettings


class KafkaAdmin:
    """Administrative reads and changes against one cluster.

    Clients are created lazily and closed by :meth:`close` (or the context
    manager), so constructing a ``KafkaAdmin`` never touches the network.
    """

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self._kp_admin: Any = None

    def __repr__(self) -> str:
        return f"KafkaAdmin({self.settings!r})"

    def __enter__(self) -> "KafkaAdmin":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._kp_admin is not None:
            self._kp_admin.close()
            self._kp_admin = None

    # -- clients -----------------------------------------------------------

    @functools.cached_property
    def _confluent(self):
        from confluent_kafka.admin import AdminClient

        return AdminClient(self.settings.confluent_config())

    @property
    def _kafka_python(self):
        if self._kp_admin is None:
            from kafka.admin import KafkaAdminClient
            from kafka.errors import KafkaError

            try:
                self._kp_admin = KafkaAdminClient(**self.settings.kafka_python_config())
            except KafkaError as exc:
                raise _translate_kafka_python(exc, self.settings) from exc
        return self._kp_admin

    def _kp_call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call a kafka-python admin method, translating its errors into this provider's.

        Retriable broker errors (a coordinator still loading after a broker
        restart, a leader moving) are retried with backoff until the request
        timeout, as the Java Admin client does, instead of failing the task.
        """
        from kafka.errors import KafkaError

        client = self._kafka_python
        deadline = time.monotonic() + self._timeout_s()
        backoff = 0.1
        while True:
            try:
                return getattr(client, method)(*args, **kwargs)
            except KafkaError as exc:
                if getattr(exc, "retriable", False) and time.monotonic() + backoff < deadline:
                    time.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
                    continue
                raise _translate_kafka_python(exc, self.settings) from exc

    def _timeout_s(self) -> float:
        return self.settings.request_timeout_ms / 1000

    # -- cluster -----------------------------------------------------------

    def describe_cluster(self) -> ClusterInfo:
        from confluent_kafka import KafkaException

        try:
            desc = self._confluent.describe_cluster(request_timeout=self._timeout_s()).result()
        except KafkaException as exc:
            raise _translate_confluent(exc, self.settings) from exc
        return ClusterInfo(
            cluster_id=desc.cluster_id,
            controller_id=desc.controller.id if desc.controller else None,
            brokers=tuple(
                BrokerNode(node_id=n.id, host=n.host, port=n.port, rack=n.rack)
                for n in sorted(desc.nodes, key=lambda n: n.id)
            ),
        )

    def describe_features(self) -> ClusterFeatures:
        """Supported ranges and finalized levels of every feature (``kafka-features describe``)."""
        raw = self._kp_call("describe_features")
        features = {}
        for name, info in raw.items():
            supported_min, supported_max = info.get("supported") or (0, 0)
            finalized = info.get("finalized")
            features[name] = Feature(
                name=name,
                supported_min=int(supported_min),
                supported_max=int(supported_max),
                finalized_level=int(finalized[1]) if finalized else 0,
                epoch=info.get("finalized_epoch"),
            )
        return ClusterFeatures(features)

    # -- groups ------------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        """Every group with its type and state, streams and share groups included."""
        rows = self._kp_call("list_groups")
        listings = [
            GroupListing(
                group_id=row["group_id"],
                type=GroupType.parse(row.get("group_type")),
                state=row.get("group_state") or "",
                protocol_type=row.get("protocol_type") or "",
            )
            for row in rows
        ]
        return sorted(listings, key=lambda g: g.group_id)


def _translate_confluent(exc: Exception, settings: ClientSettings) -> Exception:
    from confluent_kafka import KafkaError

    err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    code = err.code() if err else None
    if code in (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT):
        return OperationTimedOut(f"The cluster at {settings.bootstrap_servers} did not answer in time: {err}.")
    if code in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE):
        return KafkaConnectionError(f"Cannot reach {settings.bootstrap_servers}: {err}.")
    return exc


def _translate_kafka_python(exc: Exception, settings: ClientSettings) -> Exception:
    from kafka import errors as kerr

    if isinstance(exc, kerr.KafkaTimeoutError):
        return KafkaConnectionError(f"No broker answered at {settings.bootstrap_servers} in time ({exc}).")
    if isinstance(exc, kerr.KafkaConnectionError):
        return KafkaConnectionError(f"Cannot reach {settings.bootstrap_servers}: {exc}.")
    if isinstance(exc, kerr.RequestTimedOutError):
        return OperationTimedOut(f"The cluster at {settings.bootstrap_servers} did not answer in time: {exc}.")
    if type(exc).__name__.endswith("AuthorizationFailedError"):
        # Cluster-, Group-, Topic-, TransactionalId-AuthorizationFailedError
        resource = type(exc).__name__.removesuffix("AuthorizationFailedError").upper() or "a resource"
        return AuthorizationFailed(
            f"The principal of this connection is not authorized on {resource} for this request ({exc})."
        )
    if getattr(exc, "retriable", False):
        return OperationTimedOut(
            f"The cluster at {settings.bootstrap_servers} kept answering {type(exc).__name__} "
            f"for {settings.request_timeout_ms} ms (a broker restarting or a coordinator loading)."
        )
    return exc
