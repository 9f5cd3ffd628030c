"""``KafkaApplicationStopOperator`` / ``KafkaApplicationStartOperator``: the downtime's two hands.

An offline migration stops every instance of the application, waits for its
group to be Empty, and starts it again on another protocol. The provider does
not own deployments: both operators call the application controller named in
the DAG's Params (:mod:`airflow_provider_kip848.controllers`).

The start operator takes one last look at the group before it starts anything:
a member that appeared since the Empty wait means an instance of the old
application is still running, and a member of another protocol would be
refused (or, worse, the group would not convert). Declared source topics are
checked to exist too: a streams group whose source topic is missing sits in
NOT_READY with empty assignments, which would only surface as a timeout.

Both take ``when_failed``: the way back of a DAG runs only when one of the
named tasks failed (its wait for the new protocol ran out), and is skipped
otherwise; give such a task ``trigger_rule="all_done"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_provider_kip848.changecontrol.report import task_states
from airflow_provider_kip848.controllers import load_controller
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.arguments import topic_list
from airflow_provider_kip848.kafka.errors import GroupNotEmpty, GroupNotFound
from airflow_provider_kip848.kafka.rules.offsets import require_empty


def last_look(hook: KafkaGroupAdminHook, group_ids: Sequence[str], protocol: str,
              source_topics: str | Sequence[str] | None = None) -> None:
    """Before an application starts on ``protocol``: each of its groups is still Empty (or gone) and every
    declared source topic exists; otherwise :class:`AirflowFailException` says what is in the way."""
    if protocol not in ("classic", "consumer", "streams"):
        raise AirflowFailException(f"group_protocol must be classic, consumer or streams, not {protocol!r}")
    topics = topic_list(source_topics, "source_topics") or []
    for group_id in group_ids:
        try:
            require_empty(hook.describe_group(group_id))
        except GroupNotFound:
            pass
        except GroupNotEmpty as exc:
            raise AirflowFailException(f"Not starting the application on {protocol}: {exc}") from exc
    counts = hook.get_conn().topic_partition_counts(topics) if topics else {}
    missing = sorted(t for t, n in counts.items() if n is None)
    if missing:
        raise AirflowFailException(
            f"Not starting the application on {protocol}: source topic(s) {', '.join(missing)} do not exist. "
            "Create them (or correct source_topics), then rerun.")


class _ApplicationOperator(BaseOperator):
    template_fields: tuple[str, ...] = ("controller", "controller_args")
    ui_color = "#fdf1e6"

    def __init__(self, *, controller: str, controller_args: dict[str, Any] | str | None = None,
                 when_failed: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.controller, self.controller_args = controller, controller_args
        self.when_failed = tuple(when_failed)

    def _skip_unless_failed(self, context: Any) -> None:
        if not self.when_failed:
            return
        states = task_states(context)
        if not any(states.get(task) == "failed" for task in self.when_failed):
            raise AirflowSkipException(f"none of {', '.join(self.when_failed)} failed: nothing to go back from")

    def _controller(self):  # noqa: ANN202 - an ApplicationController
        args = self.controller_args or {}
        if not isinstance(args, dict):
            raise AirflowFailException(f"controller_args must be a mapping, not {type(args).__name__}")
        return load_controller(self.controller, args)


def instances_gone(stop_task_id: str) -> str:
    """The template that tells a :class:`~airflow_provider_kip848.sensors.group.KafkaGroupEmptySensor` whether
    the stop task's controller confirmed every instance gone (``instances_gone`` in its result; False when the
    task did not run or its controller cannot confirm)."""
    return f"{{{{ (ti.xcom_pull(task_ids='{stop_task_id}') or {{}}).get('instances_gone', False) }}}}"


class KafkaApplicationStopOperator(_ApplicationOperator):
    """Stop every instance of the application through its controller; returns what the controller stopped
    (with ``instances_gone`` when the controller confirmed that no instance is left: see
    :func:`instances_gone`)."""

    def execute(self, context: Any) -> dict[str, Any]:
        self._skip_unless_failed(context)
        result = self._controller().stop()
        self.log.info("Stopped: %s", result)
        if result.get("instances_gone") is True:
            self.log.info("The controller confirmed every instance gone: the group is emptied at once.")
        return result


class KafkaApplicationStartOperator(_ApplicationOperator):
    """Start the application with ``group.protocol=<group_protocol>`` once the group is still Empty (or gone)
    and every declared source topic exists.

    :param kafka_conn_id: the cluster of the group.
    :param group_id: the application's group (a Streams ``application.id``).
    :param group_protocol: ``classic``, ``consumer`` or ``streams`` (templated).
    :param source_topics: comma-separated or a list; None or empty: not checked.
    """

    template_fields = (*_ApplicationOperator.template_fields, "kafka_conn_id", "group_id", "group_protocol",
                       "source_topics")

    def __init__(self, *, kafka_conn_id: str, group_id: str, group_protocol: str,
                 source_topics: str | Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_conn_id, self.group_id, self.group_protocol = kafka_conn_id, group_id, group_protocol
        self.source_topics = source_topics

    def execute(self, context: Any) -> dict[str, Any]:
        self._skip_unless_failed(context)
        protocol = str(self.group_protocol)
        with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
            last_look(hook, [self.group_id], protocol, self.source_topics)
        result = self._controller().start(protocol)
        self.log.info("Started on %s: %s", protocol, result)
        return result
