"""``KafkaMoveTrigger``: follow an application's groups through several conditions, and fire once.

A move waits for its groups more than once in a row: after the start, each
group must be migrated and then have its lag drained; an application has
several groups. One trigger per condition and group costs a task round trip
each (defer, trigger fires, the task is scheduled, queued and started again:
seconds each, and a worker slot while it runs). This trigger follows every
group of the application through its own list of conditions: a group moves
to its next condition as soon as one holds (in the same poll), groups advance
independently, and the trigger fires once, when every group has passed every
condition, or at the first condition that fails, times out, or needs the
worker (members left behind are due to be forced out).

The conditions, their verdicts and the failover handling are the sensors'
(:func:`~airflow_provider_kip848.kafka.api.evaluate_condition`,
:func:`~airflow_provider_kip848.kafka.rules.conditions.follow`,
:func:`~airflow_provider_kip848.kafka.rules.conditions.follow_failure`); only
the bookkeeping of several groups and conditions is new here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from functools import partial
from typing import Any, Literal, NotRequired, TypedDict

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.connection import settings_from_connection
from airflow_provider_kip848.kafka.api import evaluate_condition
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.rules.conditions import UNAVAILABLE_LIMIT_S, advance_staged, pending_condition


class MoveTriggerEvent(TypedDict):
    """The one event a :class:`KafkaMoveTrigger` fires; ``status`` says which (see the trigger)."""

    status: Literal["met", "timeout", "remove_members_due", "error"]
    waits: list[dict[str, Any]]  # Any: each group's entry is the engine's (position, memory, met), JSON
    polls: int
    carry: dict[str, object]  #: the waiting task's state, handed back whole
    group_id: NotRequired[str]  #: timeout, error: the group whose condition ended the wait
    step: NotRequired[str | None]  #: timeout, error: its step
    summary: NotRequired[str]  #: timeout: what was seen last
    message: NotRequired[str]  #: error: why
    members: NotRequired[list[dict[str, object]] | None]  #: error: the members a failure names


class KafkaMoveTrigger(BaseTrigger):
    """Fires one :class:`MoveTriggerEvent`:

    * ``{"status": "met", "waits": [...]}`` once every group passed every condition; each group's ``met``
      lists ``{step, started_at, ended_at, summary}`` per condition (when it began and first held);
    * ``"timeout"`` when a group's condition has not held within its ``timeout_s`` (``group_id``, ``step``,
      ``summary``: what was seen last);
    * ``"remove_members_due"`` at ``remove_members_at`` (epoch s) while a group still waits for Empty, so the
      worker can force the members left behind out (audited, after asking the platform);
    * ``"error"`` on a non-retriable failure, a member that came back, or a coordinator unavailable for
      ``unavailable_limit_s`` s in a row (``group_id``, ``step``, ``message``, ``members``).

    Every event carries ``waits`` (each group's position, memory and ``met`` so far) and ``carry`` (the
    waiting task's state, handed back whole). After a retriable failure the client is dropped and rebuilt.
    """

    def __init__(self, *, kafka_conn_id: str,
                 waits: list[dict[str, Any]],  # Any: the engine's wait entries (rules.conditions), JSON
                 poll_interval: float = 5.0, remove_members_at: float | None = None, polls_before: int = 0,
                 unavailable_limit_s: float = UNAVAILABLE_LIMIT_S, carry: dict[str, object] | None = None) -> None:
        super().__init__()
        self.kafka_conn_id = kafka_conn_id
        self.waits = [dict(w) for w in waits]
        self.poll_interval = float(poll_interval)
        self.remove_members_at = remove_members_at
        self.polls_before = int(polls_before)
        self.unavailable_limit_s = float(unavailable_limit_s)
        self.carry = dict(carry or {})

    def serialize(self) -> tuple[str, dict[str, object]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"kafka_conn_id": self.kafka_conn_id, "waits": self.waits, "poll_interval": self.poll_interval,
             "remove_members_at": self.remove_members_at, "polls_before": self.polls_before,
             "unavailable_limit_s": self.unavailable_limit_s, "carry": self.carry},
        )

    def _event(self, event: MoveTriggerEvent) -> TriggerEvent:
        return TriggerEvent(event)

    def _error(self, waits: list[dict[str, Any]], polls: int, message: str, *, group_id: str | None = None,
               step: str | None = None, members: list[dict[str, object]] | None = None) -> TriggerEvent:
        """An error event; ``group_id``, ``step`` and ``members`` when one group's condition ended the wait."""
        event = MoveTriggerEvent(status="error", waits=waits, polls=polls, carry=self.carry, message=message)
        if group_id is not None:
            event["group_id"], event["step"], event["members"] = group_id, step, members
        return self._event(event)

    def _due(self, waits: list[dict[str, Any]], polls: int) -> TriggerEvent | None:
        """The timeout or removal event due now, if any."""
        now = time.time()
        for entry in waits:
            spec = pending_condition(entry)
            if spec is not None and now >= float(entry["step_started"]) + float(spec["timeout_s"]):
                return self._event(MoveTriggerEvent(status="timeout", waits=waits, polls=polls, carry=self.carry,
                                                    group_id=entry["group_id"], step=spec["step"],
                                                    summary=entry.get("last") or "never evaluated"))
        emptying = [e for e in waits if (spec := pending_condition(e)) is not None
                    and spec["condition"]["kind"] == "empty"]
        if self.remove_members_at is not None and now >= self.remove_members_at and emptying:
            return self._event(MoveTriggerEvent(status="remove_members_due", waits=waits, polls=polls,
                                                carry=self.carry))
        return None

    async def run(self) -> AsyncIterator[TriggerEvent]:
        waits = [dict(w, met=list(w.get("met") or []), wait=dict(w.get("wait") or {})) for w in self.waits]
        try:
            conn = await KafkaGroupAdminHook.aget_connection(self.kafka_conn_id)
            settings = settings_from_connection(conn)
        except Exception as exc:  # noqa: BLE001 - a missing/bad connection ends the wait with the reason
            yield self._error(waits, self.polls_before, f"{type(exc).__name__}: {exc}")
            return
        admin = KafkaAdmin(settings)
        polls = self.polls_before
        try:
            while True:
                polls += 1
                for entry in waits:
                    outcome = await asyncio.to_thread(advance_staged, entry, partial(evaluate_condition, admin),
                                                      self.unavailable_limit_s, self.log, time.time)
                    if isinstance(outcome, Exception):
                        spec = pending_condition(entry) or {}
                        yield self._error(waits, polls, str(outcome), group_id=entry["group_id"],
                                          step=spec.get("step"), members=getattr(outcome, "members", None))
                        return
                    if outcome == "broken":
                        await asyncio.to_thread(admin.close)
                        admin = KafkaAdmin(settings)
                        break
                if all(pending_condition(e) is None for e in waits):
                    yield self._event(MoveTriggerEvent(status="met", waits=waits, polls=polls, carry=self.carry))
                    return
                due = self._due(waits, polls)
                if due is not None:
                    yield due
                    return
                await asyncio.sleep(self.poll_interval)
        finally:
            await asyncio.to_thread(admin.close)


__all__ = ["KafkaMoveTrigger", "MoveTriggerEvent"]
