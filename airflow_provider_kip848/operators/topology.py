"""``KafkaStreamsTopologyCheckOperator``: a Streams application's topics checked against its topology, before the stop.

The streams group validates the topology on the broker only once the
application runs on ``group.protocol=streams``: a missing source or internal
topic, or joined topics with unequal partition counts, leave it NOT_READY, and
the migration pays the downtime and the way back. This task judges the same
things while the application still runs on classic, where a refusal costs
nothing (:mod:`airflow_provider_kip848.kafka.rules.topology` says what is
derived from the description and what it cannot tell).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.kafka.arguments import parse_flag
from airflow_provider_kip848.kafka.rules.preflight import FAIL, WARN
from airflow_provider_kip848.kafka.rules.topology import check_topology, needed_topics, parse_topology
from airflow_provider_kip848.operators.base import KafkaAdminBaseOperator, check_flag_arg, check_group_id_arg


class TopologyCheck(TypedDict):
    """One check of :func:`~airflow_provider_kip848.kafka.rules.topology.check_topology`, as the XCom shows it."""

    name: str
    status: str
    evidence: str
    remedy: str


class TopologyCheckResult(TypedDict):
    """What :class:`KafkaStreamsTopologyCheckOperator` returns (and pushes as ``report`` before failing)."""

    application_id: str
    topology_source: str | None  #: ``topology`` (the Param) or ``controller``; None: no topology, not checked
    passed: bool
    failures: list[str]
    warnings: list[str]
    checks: list[TopologyCheck]
    topics: dict[str, int | None]  #: each needed topic's partition count (None: it does not exist)


class KafkaStreamsTopologyCheckOperator(KafkaAdminBaseOperator[TopologyCheckResult]):
    """Check the cluster's topics against a Kafka Streams application's topology; fail on any hard failure.

    :param application_id: the application's ``application.id`` (its internal topics carry it as a prefix).
    :param topology: the application's ``Topology#describe()`` text, given by the run (templated; the DAG's
        ``topology_description`` Param). Given, it is what is checked.
    :param controller_result: the ``controller`` task's XCom (templated): its ``topology``, as the application's
        controller reports it, when the run gives none.
    :param fail_on_warn: treat warnings as failures.
    :returns: ``{application_id, topology_source, passed, failures, warnings, checks: [{name, status, evidence,
        remedy}], topics: {topic: partitions or None}}``; on a failure the same is pushed as XCom ``report`` and
        the task fails, naming each failed check, its evidence and its remedy. No topology from either: one
        warning, ``topology_description``, says it was not checked.
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "application_id", "topology", "controller_result")
    ui_color = "#fff4e5"
    supported_backends = ("native",)

    def __init__(self, *, application_id: str, topology: str | None = None,
                 controller_result: Mapping[str, Any] | str | None = None,  # Any: the controller task's XCom
                 fail_on_warn: bool = False, **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        check_group_id_arg(application_id)
        check_flag_arg(fail_on_warn, "fail_on_warn")
        self.application_id, self.topology = application_id, topology
        self.controller_result, self.fail_on_warn = controller_result, fail_on_warn

    def _given(self) -> tuple[str | None, str]:
        """The topology text and where it came from: the run's, else the controller's, else none."""
        if self.topology not in (None, "", "None"):
            return str(self.topology), "the run's topology_description Param"
        reported = (self.controller_result or {}).get("topology") if isinstance(self.controller_result, Mapping) \
            else None
        if reported and reported.get("description"):
            return reported["description"], str(reported.get("source") or "the controller")
        return None, ""

    def run(self, context: Context) -> TopologyCheckResult:
        check_group_id_arg(self.application_id)
        text, source = self._given()
        topology = parse_topology(text, source) if text is not None else None  # bad text: refused, named
        partitions: dict[str, int | None] = {}
        if topology is not None:
            partitions = self.native_hook.get_conn().topic_partition_counts(
                needed_topics(topology, self.application_id))
        checks = check_topology(topology, self.application_id, partitions)
        for c in checks:
            self.log.info("[%s] %s: %s", c.status.upper(), c.name, c.evidence)
            if c.remedy and c.status in (FAIL, WARN):
                self.log.info("    -> %s", c.remedy)
        failed = [c for c in checks if c.status == FAIL or (c.status == WARN and parse_flag(self.fail_on_warn,
                                                                                              "fail_on_warn"))]
        result = TopologyCheckResult(
            application_id=self.application_id, topology_source=source or None, passed=not failed,
            failures=[c.name for c in checks if c.status == FAIL],
            warnings=[c.name for c in checks if c.status == WARN],
            checks=[TopologyCheck(name=c.name, status=c.status, evidence=c.evidence, remedy=c.remedy) for c in checks],
            topics=partitions)
        if failed:
            context["ti"].xcom_push(key="report", value=result)
            raise AirflowFailException(f"Topology of {self.application_id} refused: " + "; ".join(
                f"{c.name}: {c.evidence}. {c.remedy}" for c in failed))
        return result
