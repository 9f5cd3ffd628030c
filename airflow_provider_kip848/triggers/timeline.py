"""``KafkaGroupTimelineTrigger``: look at a group every second through a change window, in the triggerer.

The looks fold into a :class:`~airflow_provider_kip848.kafka.timeline.Timeline`
(bounded: per-partition stalls and a thinned plot series), so watching a group
for an hour holds no worker slot and the result fits an event. The trigger
hands the timeline back to its task every ``chunk_s`` seconds (the task defers
again at once): a triggerer that restarts then loses at most one chunk of looks,
and the lost stretch shows as one unknown look, never as progress.

It ends with ``settled`` once the group is Stable on the target protocol, every
partition that stalled has moved again, and ``linger_s`` more seconds of looks
saw it stay so (or, when the run took its way back, the same on
``way_back_type`` after the group went to the target and back); with
``timeout`` at ``end_at`` (the report then shows what was still open); with
``error`` on a failure a retry cannot mend (bad connection, missing permission).
Retriable read failures are unknown looks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.connection import settings_from_connection
from airflow_provider_kip848.kafka.api import observe_group
from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.timeline import GroupObservation, Timeline


def settled_for(timeline: Timeline, now: float, linger_s: float, way_back_type: str | None = None) -> bool:
    """True when the group has been Stable on the target (every member on its protocol, as many as expected)
    for ``linger_s`` seconds of looks and no partition is still stalled; or, with ``way_back_type``, when it
    went to the target and back (two type changes) and has been settled on ``way_back_type`` as long."""
    if any(g.open for g in timeline.gap_tracker.gaps().values()):
        return False
    on, since = timeline.settled_on()
    if on is None or since is None or now - since < linger_s:
        return False
    if on == timeline.target_type.value:
        return timeline.last_state_is_stable_on_target()
    return way_back_type is not None and on == way_back_type and timeline.type_changes >= 2


class KafkaGroupTimelineTrigger(BaseTrigger):
    """Looks at ``group_id`` every ``look_interval`` seconds into a timeline (see the module docstring).

    Events: ``{"status": "settled" | "timeout" | "chunk" | "error", "timeline": Timeline.to_dict(), ...}``.
    """

    def __init__(self, *, kafka_conn_id: str, group_id: str, target_type: str, timeline: dict[str, Any],
                 end_at: float, look_interval: float = 1.0, chunk_s: float = 300.0, linger_s: float = 5.0,
                 way_back_type: str | None = None) -> None:
        super().__init__()
        self.kafka_conn_id = kafka_conn_id
        self.group_id = group_id
        self.target_type = target_type
        self.timeline = dict(timeline)
        self.end_at = float(end_at)
        self.look_interval = float(look_interval)
        self.chunk_s = float(chunk_s)
        self.linger_s = float(linger_s)
        self.way_back_type = way_back_type

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"kafka_conn_id": self.kafka_conn_id, "group_id": self.group_id, "target_type": self.target_type,
                 "timeline": self.timeline, "end_at": self.end_at, "look_interval": self.look_interval,
                 "chunk_s": self.chunk_s, "linger_s": self.linger_s, "way_back_type": self.way_back_type})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        timeline = Timeline.from_dict(self.timeline)
        if timeline.target_type is not GroupType(self.target_type):
            yield TriggerEvent({"status": "error", "message": "timeline and target type differ",
                                "timeline": timeline.to_dict()})
            return
        if timeline.last_at is not None and time.time() - timeline.last_at > 3 * self.look_interval:
            # a triggerer restart (or a slow hand-over) lost looks: say so, never bridge it as progress
            timeline.add(GroupObservation.unknown(time.time(), "no looks while the trigger was handed over"))
        try:
            conn = await KafkaGroupAdminHook.aget_connection(self.kafka_conn_id)
            settings = settings_from_connection(conn)
        except Exception as exc:  # noqa: BLE001 - a missing/bad connection ends the watch with the reason
            yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}",
                                "timeline": timeline.to_dict()})
            return
        admin = KafkaAdmin(settings)
        chunk_started = time.time()
        try:
            while True:
                try:
                    look = await asyncio.to_thread(observe_group, admin, self.group_id)
                except Exception as exc:  # noqa: BLE001 - observe_group raises only what a retry cannot mend
                    yield TriggerEvent({"status": "error", "message": str(exc), "timeline": timeline.to_dict()})
                    return
                if not look.known:  # a new client next time: the coordinator may have moved
                    await asyncio.to_thread(admin.close)
                    admin = KafkaAdmin(settings)
                timeline.add(look)
                now = time.time()
                status = ("settled" if settled_for(timeline, now, self.linger_s, self.way_back_type) else
                          "timeout" if now >= self.end_at else
                          "chunk" if now - chunk_started >= self.chunk_s else None)
                if status is not None:
                    yield TriggerEvent({"status": status, "group_id": self.group_id, "timeline": timeline.to_dict()})
                    return
                await asyncio.sleep(self.look_interval)
        finally:
            await asyncio.to_thread(admin.close)
