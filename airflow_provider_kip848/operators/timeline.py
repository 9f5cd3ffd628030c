"""``KafkaGroupTimelineOperator``: watch a group through a change window and return its timeline.

It runs beside a migration's own steps (upstream: the snapshot, so it starts
before anything stops), takes its first look in the worker, then looks every
second from the triggerer (no worker slot held) until the group has settled on
the target protocol and every stalled partition moves again, or until
``max_minutes``. Its result feeds the run report's downtime section
(:mod:`airflow_provider_kip848.changecontrol.downtime`). It changes nothing.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.kafka.api import observe_group
from airflow_provider_kip848.kafka.arguments import parse_number, require_choice, require_group_id
from airflow_provider_kip848.kafka.errors import InvalidArgument, Kip848Error
from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.timeline import Timeline
from airflow_provider_kip848.operators.base import KafkaAdminBaseOperator, check_group_id_arg
from airflow_provider_kip848.triggers.timeline import KafkaGroupTimelineTrigger

TARGET_TYPES = ("consumer", "streams", "classic")


class KafkaGroupTimelineOperator(KafkaAdminBaseOperator):
    """Watch ``group_id`` until it settles on ``target_type`` (see the module docstring).

    :param target_type: ``consumer`` or ``streams`` (a migration), ``classic`` (a way back).
    :param expected_members: members the settled group must have (default: any, all on the target).
    :param max_minutes: the watch ends here at the latest (status ``timeout``: the report shows what was open).
    :param look_interval: seconds between looks (the precision of every time the report gives).
    :param linger_seconds: after settling, keep looking this long (a late rebalance is counted).
    :param way_back_type: the type a run's way back returns the group to (``classic``): the watch also ends
        once the group went to the target and back and settled there, instead of running to ``max_minutes``.
    :returns: ``{group_id, status, summary, timeline}`` (``summary``: ``TimelineSummary.to_dict()``).
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "group_id", "target_type", "expected_members",
                       "max_minutes")
    supported_backends = ("native",)

    def __init__(self, *, group_id: str, target_type: str, expected_members: int | str | None = None,
                 max_minutes: float | str = 60, look_interval: float = 1.0, linger_seconds: float = 5.0,
                 chunk_seconds: float = 300.0, way_back_type: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_group_id_arg(group_id)
        self.group_id, self.target_type = group_id, target_type
        self.expected_members, self.max_minutes = expected_members, max_minutes
        if look_interval <= 0 or linger_seconds < 0 or chunk_seconds <= 0:
            raise InvalidArgument("look_interval and chunk_seconds must be > 0 and linger_seconds >= 0.")
        self.look_interval, self.linger_seconds, self.chunk_seconds = look_interval, linger_seconds, chunk_seconds
        if way_back_type is not None:
            require_choice(way_back_type, "way_back_type", TARGET_TYPES)
        self.way_back_type = way_back_type

    def _checked(self) -> tuple[GroupType, int | None, float]:
        require_group_id(self.group_id)
        target = GroupType(require_choice(self.target_type, "target_type", TARGET_TYPES))
        expected = parse_number(self.expected_members, "expected_members", minimum=1, integer=True, optional=True)
        minutes = parse_number(self.max_minutes, "max_minutes")
        if minutes is None or minutes <= 0:
            raise InvalidArgument(f"max_minutes must be > 0, not {self.max_minutes!r}.")
        return target, None if expected is None else int(expected), float(minutes)

    def run(self, context: Any) -> Any:
        target, expected, minutes = self._checked()
        timeline = Timeline(target_type=target, expected_members=expected)
        timeline.add(observe_group(self.native_hook.get_conn(), self.group_id))  # the first look, right away
        self._defer(timeline, time.time() + minutes * 60)

    def _defer(self, timeline: Timeline, end_at: float) -> None:
        self.defer(trigger=KafkaGroupTimelineTrigger(
            kafka_conn_id=self.kafka_conn_id, group_id=self.group_id, target_type=timeline.target_type.value,
            timeline=timeline.to_dict(), end_at=end_at, look_interval=self.look_interval,
            chunk_s=self.chunk_seconds, linger_s=self.linger_seconds, way_back_type=self.way_back_type),
            method_name="execute_complete", timeout=timedelta(seconds=max(end_at - time.time(), 0) + 600))

    def execute_complete(self, context: Any, event: dict[str, Any] | None = None, **_: Any) -> dict[str, Any]:
        event = event or {}
        try:
            timeline = Timeline.from_dict(event.get("timeline") or {})
        except Kip848Error as exc:
            raise AirflowFailException(f"Watching group {self.group_id}: no timeline in the event ({exc}).") from exc
        status = event.get("status")
        if status == "chunk":
            minutes = self._checked()[2]
            started = timeline.first_at or time.time()
            self._defer(timeline, started + minutes * 60)
        summary = timeline.summary()
        if status == "error":
            raise AirflowFailException(f"Watching group {self.group_id} failed: {event.get('message')} "
                                       f"({summary.looks} look(s) taken).")
        if status not in ("settled", "timeout"):
            raise AirflowFailException(f"Watching group {self.group_id}: unexpected event {status!r}.")
        self.log.info("Group %s %s after %d look(s) (%d unknown): settle %s s, rebalances seen %d, longest stall %s",
                      self.group_id, status, summary.looks, summary.unknown_looks, summary.settle_s,
                      summary.rebalances_seen, summary.longest_gap.to_dict() if summary.longest_gap else None)
        return {"group_id": self.group_id, "status": status, "summary": summary.to_dict(),
                "timeline": timeline.to_dict()}
