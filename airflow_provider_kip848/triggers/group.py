"""``KafkaGroupConditionTrigger``: poll a group until a condition holds, in the triggerer.

The trigger owns no Airflow state: it is rebuilt from :meth:`serialize`'s
class path and kwargs (JSON), reads the connection asynchronously, and runs
the same :func:`~airflow_provider_kip848.kafka.api.evaluate_condition` as the
sensor's poke mode, in a thread so the triggerer's event loop never blocks.
A broker that restarts or is briefly unreachable while it waits is ridden
out (logged, polled again with a new client); bad input, a member that came
back after being forced out, or a coordinator that never becomes available
end the wait with an error event.

With a ``platform_watch`` (a wait that knows its application's instances), the
trigger also looks at the platform through the whole wait
(:class:`~airflow_provider_kip848.triggers.platform.PlatformProbe`, every few
seconds, beside the broker polls): an instance lost since the start (or, for
Empty, one running again) ends the wait at once with an ``instance_lost``
event naming it, whatever the broker shows.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, Literal, NotRequired, TypedDict

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.connection import settings_from_connection
from airflow_provider_kip848.hooks.platform_watch import PlatformWatch
from airflow_provider_kip848.kafka import native
from airflow_provider_kip848.kafka.api import evaluate_condition
from airflow_provider_kip848.kafka.rules.conditions import (
    UNAVAILABLE_LIMIT_S,
    ConditionResult,
    GroupCondition,
    WaitState,
    follow,
    follow_failure,
)
from airflow_provider_kip848.triggers.platform import Finding, PlatformProbe, close_after_poll


class GroupWaitCarry(TypedDict, total=False):
    """The waiting sensor's state, handed through the triggerer and back in every event (some runners, e.g.
    ``dag.test``, resume a task with the event only, so nothing may live only in the ``defer()`` kwargs)."""

    started: float  #: when the wait began (epoch s)
    wait: dict[str, object]  #: :meth:`WaitState.to_dict` (the polls' shared memory)
    notes: list[str]  #: what the result's ``notes`` say so far
    condition: dict[str, object]  #: :meth:`GroupCondition.to_dict`, as built when the wait began
    watch: dict[str, object] | None  #: :meth:`PlatformWatch.to_dict` of the wait (None: the platform not watched)
    platform: dict[str, object]  #: the trigger's looks at the platform: ``{looks, failed, every_s, where}``


class GroupConditionMet(TypedDict):
    """The condition held (``met_at``: when it was seen to hold, epoch s)."""

    status: Literal["met"]
    group_id: str
    condition: dict[str, object]
    summary: str
    detail: dict[str, object]
    polls: int
    met_at: float
    carry: GroupWaitCarry


class GroupConditionTimeout(TypedDict):
    """``timeout_at`` passed; ``summary``: what was seen last."""

    status: Literal["timeout"]
    group_id: str
    condition: dict[str, object]
    summary: str
    polls: int
    carry: GroupWaitCarry


class GroupMembersRemovalDue(TypedDict):
    """``remove_members_at`` passed: the worker forces the members left behind out (logged with the task)."""

    status: Literal["remove_members_due"]
    group_id: str
    summary: str
    polls: int
    carry: GroupWaitCarry


class GroupConditionError(TypedDict):
    """A non-retriable failure; ``members``: those a failure names (a member that came back)."""

    status: Literal["error"]
    message: str
    polls: NotRequired[int]
    members: NotRequired[list[dict[str, object]] | None]
    carry: GroupWaitCarry


class GroupInstanceLost(TypedDict):
    """A look at the platform found what fails the wait (``found``: the instances and their state, as the
    controller says), or the controller cannot be built in the triggerer (status ``platform_unwatched``:
    ``found`` says why; the worker then watches it)."""

    status: Literal["instance_lost", "platform_unwatched"]
    group_id: str
    found: str
    polls: int
    carry: GroupWaitCarry


#: Every event :class:`KafkaGroupConditionTrigger` fires; ``status`` says which.
GroupConditionEvent = (GroupConditionMet | GroupConditionTimeout | GroupMembersRemovalDue | GroupConditionError
                       | GroupInstanceLost)


class KafkaGroupConditionTrigger(BaseTrigger):
    """Fires one :data:`GroupConditionEvent`: ``{"status": "met"}`` when the condition holds (``met_at``: when
    it was seen to hold, epoch s), ``"timeout"`` at ``timeout_at`` (epoch s), ``"remove_members_due"`` at
    ``remove_members_at`` (so the sensor can force-empty the group in a worker, where the action is logged with
    the task), or ``"error"`` on a non-retriable failure, a member that came back after being forced out, or a
    coordinator unavailable for ``unavailable_limit_s`` seconds in a row. With ``platform_watch``
    (:meth:`PlatformWatch.to_dict`): ``"instance_lost"`` as soon as a look at the platform finds an instance lost
    (or, for Empty, running again), ``"platform_unwatched"`` when the triggerer cannot build the controller, and
    ``"error"`` when the controller refuses a look in a way a retry would repeat.

    After a retriable failure the trigger drops its client and builds a new one: a long wait must
    not keep asking a coordinator that moved away, nor a connection to a dead node.
    """

    def __init__(
        self,
        *,
        kafka_conn_id: str,
        group_id: str,
        condition: dict[str, object],
        poll_interval: float = 5.0,
        timeout_at: float | None = None,
        remove_members_at: float | None = None,
        polls_before: int = 0,
        unavailable_limit_s: float = UNAVAILABLE_LIMIT_S,
        carry: GroupWaitCarry | None = None,
        platform_watch: dict[str, object] | None = None,
    ) -> None:
        super().__init__()
        self.kafka_conn_id = kafka_conn_id
        self.group_id = group_id
        self.condition = dict(condition)
        self.poll_interval = float(poll_interval)
        self.timeout_at = timeout_at
        self.remove_members_at = remove_members_at
        self.polls_before = int(polls_before)
        self.unavailable_limit_s = float(unavailable_limit_s)
        #: state of the waiting task handed back in every event (the resumed task gets only the event
        #: from some runners, e.g. dag.test, so nothing may live only in the defer() kwargs); its
        #: ``wait`` is the :class:`WaitState` the polls share
        self.carry: GroupWaitCarry = GroupWaitCarry(**(carry or {}))
        #: the platform's instances watched through the wait (names and the baseline, never a command)
        self.platform_watch = dict(platform_watch) if platform_watch is not None else None

    def serialize(self) -> tuple[str, dict[str, object]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "kafka_conn_id": self.kafka_conn_id,
                "group_id": self.group_id,
                "condition": self.condition,
                "poll_interval": self.poll_interval,
                "timeout_at": self.timeout_at,
                "remove_members_at": self.remove_members_at,
                "polls_before": self.polls_before,
                "unavailable_limit_s": self.unavailable_limit_s,
                "carry": self.carry,
                "platform_watch": self.platform_watch,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        condition = GroupCondition.from_dict(self.condition)
        carry = GroupWaitCarry(**self.carry)
        wait = WaitState.from_dict(carry.get("wait"))
        try:
            watch = PlatformWatch.from_dict(self.platform_watch)
            conn = await KafkaGroupAdminHook.aget_connection(self.kafka_conn_id)
            settings = settings_from_connection(conn)
        except Exception as exc:  # noqa: BLE001 - a missing/bad connection or watch ends the wait with the reason
            failed = GroupConditionError(status="error", message=f"{type(exc).__name__}: {exc}", carry=carry)
            yield TriggerEvent(failed)
            return
        probe = PlatformProbe(watch, self.log, carry.get("platform")) if watch is not None else None
        watching = probe.start() if probe is not None else None
        admin = native.KafkaAdmin(settings)
        polls = self.polls_before
        last = ""
        poll: asyncio.Future[ConditionResult] | None = None
        try:
            while True:
                polls += 1
                result = None
                poll = asyncio.ensure_future(asyncio.to_thread(evaluate_condition, admin, self.group_id, condition))
                racing: set[asyncio.Future[Any]] = {poll} if watching is None else {poll, watching}
                await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
                if watching is not None and watching.done():  # the platform's word ends the wait, poll or not
                    yield self._platform_event(watching.result(), polls, carry, wait, probe)
                    return
                try:
                    result = follow(condition, poll.result(), wait, time.time())
                except Exception as exc:  # noqa: BLE001 - decided by follow_failure
                    try:
                        follow_failure(exc, wait, time.time(), self.unavailable_limit_s)
                    except Exception as fatal:  # noqa: BLE001 - ends the wait with the reason
                        error = GroupConditionError(status="error", message=str(fatal), polls=polls,
                                                    members=getattr(fatal, "members", None),
                                                    carry=self._carry(carry, wait, probe))
                        yield TriggerEvent(error)
                        return
                    self.log.warning("Group %s: %s Polling again in %g s with a new client.", self.group_id, exc,
                                     self.poll_interval)
                    await asyncio.to_thread(admin.close)
                    admin = native.KafkaAdmin(settings)
                carry = self._carry(carry, wait, probe)
                if result is not None and result.met:
                    met = GroupConditionMet(status="met", group_id=self.group_id, condition=condition.to_dict(),
                                            summary=result.summary, detail=result.detail, polls=polls,
                                            met_at=time.time(), carry=carry)
                    yield TriggerEvent(met)
                    return
                now = time.time()
                if self.timeout_at is not None and now >= self.timeout_at:
                    timeout = GroupConditionTimeout(status="timeout", group_id=self.group_id,
                                                    summary=last or "never evaluated", polls=polls,
                                                    condition=condition.to_dict(), carry=carry)
                    yield TriggerEvent(timeout)
                    return
                if self.remove_members_at is not None and now >= self.remove_members_at:
                    due = GroupMembersRemovalDue(status="remove_members_due", group_id=self.group_id,
                                                 summary=last, polls=polls, carry=carry)
                    yield TriggerEvent(due)
                    return
                if result is not None and result.summary != last:
                    last = result.summary
                    self.log.info("Group %s: %s (waiting for %s)", self.group_id, last, condition.describe())
                if watching is not None:  # sleep, but wake for the platform's word
                    await asyncio.wait({watching}, timeout=self.poll_interval)
                else:
                    await asyncio.sleep(self.poll_interval)
        finally:
            if probe is not None:
                probe.stop()
            await close_after_poll(poll, admin)

    @staticmethod
    def _carry(carry: GroupWaitCarry, wait: WaitState, probe: PlatformProbe | None) -> GroupWaitCarry:
        out = GroupWaitCarry(**carry)
        out["wait"] = wait.to_dict()
        if probe is not None:
            out["platform"] = probe.stats()
        return out

    def _platform_event(self, found: Finding, polls: int, carry: GroupWaitCarry, wait: WaitState,
                        probe: PlatformProbe | None) -> TriggerEvent:
        carried = self._carry(carry, wait, probe)
        if found.kind == "error":
            return TriggerEvent(GroupConditionError(status="error", message=f"the platform could not be asked: "
                                                                            f"{found.message}", polls=polls,
                                                    carry=carried))
        status: Literal["instance_lost", "platform_unwatched"] = (
            "instance_lost" if found.kind == "lost" else "platform_unwatched")
        return TriggerEvent(GroupInstanceLost(status=status, group_id=self.group_id, found=found.message,
                                              polls=polls, carry=carried))


