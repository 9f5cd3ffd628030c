"""``KafkaGroupMetricsOperator``: one sample of the brokers' group metrics at a named point of a change.

The guides ask to watch group counts by protocol, streams groups by state and
rebalance rates before, during and after a migration. A DAG puts one of these
on a side branch at each point (it never gates the change): with the
connection's ``metrics_url`` it records a sample, without one it says so, and
an exporter that does not answer is recorded as unknown (a warning), never as
zeros. The report charts the samples (``changecontrol.monitoring``).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator, Context

from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.errors import Kip848Error


class KafkaGroupMetricsOperator(BaseOperator):
    """Sample the cluster's group-coordinator metrics (``KafkaAdminBaseHook.group_metrics``).

    :param point: the point of the change this sample stands for (``before``, ``during``, ``after`` ...).
    :returns: ``{label, sample: {...} | None, note}``: ``sample`` None when the connection names no
        metrics URL or the exporter did not answer (``note`` says which).
    """

    template_fields = ("kafka_conn_id", "point")
    ui_color = "#eef3fb"

    def __init__(self, *, kafka_conn_id: str, point: str, **kwargs: Any) -> None:  # Any: passed to BaseOperator
        # a side branch: it samples after its upstream ran, whether that succeeded or failed, and not on a
        # path the run did not take (a dry run, a rejected plan)
        kwargs.setdefault("trigger_rule", "none_skipped")
        super().__init__(**kwargs)
        self.kafka_conn_id, self.point = kafka_conn_id, point

    def execute(self, context: Context) -> dict[str, object]:
        try:
            with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
                sample = hook.group_metrics()
        except Kip848Error as exc:  # monitoring never stops a change; the report shows the gap
            self.log.warning("Group metrics at %r unknown: %s", self.point, exc)
            return {"label": self.point, "sample": None, "note": f"unknown: {exc}"}
        if sample is None:
            self.log.info("The connection names no metrics_url: no group metrics at %r.", self.point)
            return {"label": self.point, "sample": None, "note": "no metrics_url on the connection"}
        data = sample.to_dict()
        self.log.info("Group metrics at %r: groups by protocol %s, streams groups by state %s", self.point,
                      data["groups_by_protocol"], data["streams_groups_by_state"])
        return {"label": self.point, "sample": data, "note": ""}
