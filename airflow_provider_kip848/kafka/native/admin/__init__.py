"""Native admin backend: every action of :class:`~...api.ClusterAdmin` with confluent-kafka and kafka-python.

One module per result family, composed here by a thin :class:`KafkaAdmin` (as confluent-kafka's ``admin/``
package is): :mod:`.groups` (listing, describes, deletion, member removal), :mod:`.offsets` (committed and log
offsets, commits), :mod:`.features` (the cluster, its brokers' releases and feature levels), :mod:`.configs`
(the brokers' ``group.*`` configs and group configs), :mod:`.topics` (what the change lock creates and deletes)
and :mod:`.inventory` (every group at once, in batches); :mod:`.base` holds the transport they share.

Which client answers what is in :mod:`..transport`; responses become the typed facts of :mod:`...model` in
:mod:`..converters`. Every method returns those facts and raises the errors of :mod:`...errors`; no client
object or client exception leaks out.
"""

from __future__ import annotations

from airflow_provider_kip848.kafka.native.admin.configs import NativeConfigs
from airflow_provider_kip848.kafka.native.admin.features import NativeFeatures
from airflow_provider_kip848.kafka.native.admin.groups import NativeGroups
from airflow_provider_kip848.kafka.native.admin.inventory import NativeInventory
from airflow_provider_kip848.kafka.native.admin.offsets import NativeOffsets
from airflow_provider_kip848.kafka.native.admin.topics import NativeTopics


class KafkaAdmin(NativeGroups, NativeOffsets, NativeInventory, NativeConfigs, NativeFeatures, NativeTopics):
    """Administrative reads and changes against one cluster.

    Clients are created lazily and closed by :meth:`close` (or the context
    manager), so constructing a ``KafkaAdmin`` never touches the network.
    """

    def __repr__(self) -> str:
        return f"KafkaAdmin({self.settings!r})"


__all__ = ["KafkaAdmin"]
