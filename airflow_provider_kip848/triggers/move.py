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

With a ``platform_watch`` (a stage that knows its application's instances: the
arrival stages after a start or roll, the Empty stage after the stop), the
trigger also looks at the platform through the whole stage, racing its broker
polls, exactly as the single-group trigger does
(:class:`~airflow_provider_kip848.triggers.platform.PlatformProbe`: the
controller rebuilt from the registry by name, the kwargs carry no command): an
instance of the start lost (or, during Empty, one running again) fires
``instance_lost`` at once, naming it, whatever the broker shows.
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
from airflow_provider_kip848.hooks.platform_watch import PlatformWatch
from airflow_provider_kip848.kafka import native
from airflow_provider_kip848.kafka.api import evaluate_condition
from airflow_provider_kip848.kafka.rules.conditions import UNAVAILABLE_LIMIT_S, advance_staged, pending_condition
from airflow_provider_kip848.triggers.platform import Finding, PlatformProbe, close_after_poll


class MoveTriggerEvent(TypedDict):
    """The one event a :class:`KafkaMoveTrigger` fires; ``status`` says which (see the trigger)."""

    status: Literal["met", "timeout", "remove_members_due", "error", "instance_lost", "platform_unwatched"]
    waits: list[dict[str, Any]]  # Any: each group's entry is the engine's (position, memory, met), JSON
    polls: int
    carry: dict[str, object]  #: the waiting task's state, handed back whole
    group_id: NotRequired[str]  #: timeout, error: the group whose condition ended the wait
    step: NotRequired[str | None]  #: timeout, error: its step
    summary: NotRequired[str]  #: timeout: what was seen last
    message: NotRequired[str]  #: error: why
    members: NotRequired[list[dict[str, object]] | None]  #: error: the members a failure names
    found: NotRequired[str]  #: instance_lost: the instances and their state; platform_unwatched: why
    platform: NotRequired[dict[str, object]]  #: with a platform watch: the looks (``{looks, failed, every_s}``)


class KafkaMoveTrigger(BaseTrigger):
    """Fires one :class:`MoveTriggerEvent`:

    * ``{"status": "met", "waits": [...]}`` once every group passed every condition; each group's ``met``
      lists ``{step, started_at, ended_at, summary}`` per condition (when it began and first held);
    * ``"timeout"`` when a group's condition has not held within its ``timeout_s`` (``group_id``, ``step``,
      ``summary``: what was seen last);
    * ``"remove_members_due"`` at ``remove_members_at`` (epoch s) while a group still waits for Empty, so the
      worker can force the members left behind out (audited, after asking the platform);
    * ``"error"`` on a non-retriable failure, a member that came back, or a coordinator unavailable for
      ``unavailable_limit_s`` s in a row (``group_id``, ``step``, ``message``, ``members``);
    * with ``platform_watch`` (:meth:`PlatformWatch.to_dict`): ``"instance_lost"`` as soon as a look at the
      platform finds what fails the stage (``found``: the instances and their state; ``group_id``, ``step``: the
      first condition still pending), ``"platform_unwatched"`` when the triggerer cannot build the controller
      (the worker then pokes the rest of the stage, watching it), ``"error"`` when the controller refuses a look
      in a way a retry would repeat.

    Every event carries ``waits`` (each group's position, memory and ``met`` so far) and ``carry`` (the
    waiting task's state, handed back whole). After a retriable failure the client is dropped and rebuilt.
    """

    def __init__(self, *, kafka_conn_id: str,
                 waits: list[dict[str, Any]],  # Any: the engine's wait entries (rules.conditions), JSON
                 poll_interval: float = 5.0, remove_members_at: float | None = None, polls_before: int = 0,
                 unavailable_limit_s: float = UNAVAILABLE_LIMIT_S, carry: dict[str, object] | None = None,
                 platform_watch: dict[str, object] | None = None) -> None:
        super().__init__()
        self.kafka_conn_id = kafka_conn_id
        self.waits = [dict(w) for w in waits]
        self.poll_interval = float(poll_interval)
        self.remove_members_at = remove_members_at
        self.polls_before = int(polls_before)
        self.unavailable_limit_s = float(unavailable_limit_s)
        self.carry = dict(carry or {})
        #: the platform's instances watched through the stage (a registry name and a baseline, never a command)
        self.platform_watch = dict(platform_watch) if platform_watch is not None else None

    def serialize(self) -> tuple[str, dict[str, object]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"kafka_conn_id": self.kafka_conn_id, "waits": self.waits, "poll_interval": self.poll_interval,
             "remove_members_at": self.remove_members_at, "polls_before": self.polls_before,
             "unavailable_limit_s": self.unavailable_limit_s, "carry": self.carry,
             "platform_watch": self.platform_watch},
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

    def _platform_event(self, found: Finding, waits: list[dict[str, Any]], polls: int,
                        probe: PlatformProbe) -> TriggerEvent:
        """What a look at the platform ended the stage with, on the first group still waiting."""
        pending = next((e for e in waits if pending_condition(e) is not None), waits[0] if waits else {})
        spec = pending_condition(pending) or {}
        if found.kind == "error":
            error = self._error(waits, polls, f"the platform could not be asked: {found.message}",
                                group_id=pending.get("group_id"), step=spec.get("step"))
            error.payload["platform"] = probe.stats()
            return error
        event = MoveTriggerEvent(status="instance_lost" if found.kind == "lost" else "platform_unwatched",
                                 waits=waits, polls=polls, carry=self.carry, found=found.message,
                                 platform=probe.stats())
        if pending:
            event["group_id"], event["step"] = pending["group_id"], spec.get("step")
        return self._event(event)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        waits = [dict(w, met=list(w.get("met") or []), wait=dict(w.get("wait") or {})) for w in self.waits]
        try:
            watch = PlatformWatch.from_dict(self.platform_watch)
            conn = await KafkaGroupAdminHook.aget_connection(self.kafka_conn_id)
            settings = settings_from_connection(conn)
        except Exception as exc:  # noqa: BLE001 - a missing/bad connection or watch ends the wait with the reason
            yield self._error(waits, self.polls_before, f"{type(exc).__name__}: {exc}")
            return
        probe = PlatformProbe(watch, self.log) if watch is not None else None
        watching = probe.start() if probe is not None else None
        admin = native.KafkaAdmin(settings)
        polls = self.polls_before
        poll: asyncio.Future[str | Exception] | None = None
        try:
            while True:
                polls += 1
                for entry in waits:
                    polling = poll = asyncio.ensure_future(asyncio.to_thread(
                        advance_staged, entry, partial(evaluate_condition, admin), self.unavailable_limit_s,
                        self.log, time.time))
                    racing: set[asyncio.Future[Any]] = {polling} if watching is None else {polling, watching}
                    await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
                    if watching is not None and probe is not None and watching.done():  # the platform's word
                        yield self._platform_event(watching.result(), waits, polls, probe)
                        return
                    outcome = polling.result()
                    if isinstance(outcome, Exception):
                        spec = pending_condition(entry) or {}
                        yield self._error(waits, polls, str(outcome), group_id=entry["group_id"],
                                          step=spec.get("step"), members=getattr(outcome, "members", None))
                        return
                    if outcome == "broken":
                        await asyncio.to_thread(admin.close)
                        admin = native.KafkaAdmin(settings)
                        break
                if all(pending_condition(e) is None for e in waits):
                    yield self._event(MoveTriggerEvent(status="met", waits=waits, polls=polls, carry=self.carry))
                    return
                due = self._due(waits, polls)
                if due is not None:
                    yield due
                    return
                if watching is not None:  # sleep, but wake for the platform's word
                    await asyncio.wait({watching}, timeout=self.poll_interval)
                else:
                    await asyncio.sleep(self.poll_interval)
        finally:
            if probe is not None:
                probe.stop()
            await close_after_poll(poll, admin)


__all__ = ["KafkaMoveTrigger", "MoveTriggerEvent"]
