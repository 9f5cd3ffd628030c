"""``SparkStandaloneDriverTrigger``: follow a cluster-mode Spark driver on a standalone master, in the triggerer.

A wave validation in cluster mode runs its driver on a Spark worker; the task
that submitted it defers to this trigger, so no Airflow worker slot is held
while Spark works. The trigger asks the master's REST server
(``GET /v1/submissions/status/<id>``) every ``poll_interval`` seconds, in a
thread (the triggerer's event loop never blocks), and fires once the driver
reaches a terminal state: ``finished`` (FINISHED: the driver's process exited
0), ``failed`` (FAILED, KILLED, ERROR: with that state), ``timeout``, or
``error`` (the master does not know the driver, or its REST server stayed
unreachable for ``unavailable_limit_s`` seconds in a row; a short outage, a
master restart, is ridden out). A user who kills the deferred task kills the
driver too (:meth:`on_kill`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, Literal, TypedDict

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_kip848.spark.standalone import RestSubmissionClient, SparkRestError

#: consecutive polls on which the master does not know the driver before the wait ends with an error
NOT_FOUND_LIMIT = 3


class SparkDriverEvent(TypedDict):
    """The one event a :class:`SparkStandaloneDriverTrigger` fires; ``status`` says how the driver ended."""

    status: Literal["finished", "failed", "timeout", "error"]
    submission_id: str
    driver_state: str | None  #: the master's last word (FINISHED, FAILED, KILLED, ERROR ...); None: not known
    message: str
    polls: int
    carry: dict[str, Any]  # Any: the deferring task's own state, handed back as it gave it (JSON)


class SparkStandaloneDriverTrigger(BaseTrigger):
    """Fires one :class:`SparkDriverEvent`: ``{"status": "finished" | "failed" | "timeout" | "error",
    "submission_id", "driver_state", "message", "polls", "carry"}``; ``carry`` is the deferring task's state,
    handed back in the event (some runners, e.g. ``dag.test``, resume a task with the event only)."""

    def __init__(self, *, rest_url: str, submission_id: str, poll_interval: float = 5.0,
                 timeout_at: float | None = None, unavailable_limit_s: float = 300.0,
                 carry: dict[str, Any] | None = None,  # Any: the deferring task's own state (JSON)
                 ) -> None:
        super().__init__()
        self.rest_url = rest_url
        self.submission_id = submission_id
        self.poll_interval = float(poll_interval)
        self.timeout_at = timeout_at
        self.unavailable_limit_s = float(unavailable_limit_s)
        self.carry = dict(carry or {})

    def serialize(self) -> tuple[str, dict[str, object]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"rest_url": self.rest_url, "submission_id": self.submission_id, "poll_interval": self.poll_interval,
                 "timeout_at": self.timeout_at, "unavailable_limit_s": self.unavailable_limit_s,
                 "carry": self.carry})

    def _event(self, status: Literal["finished", "failed", "timeout", "error"], polls: int,
               state: str | None = None, message: str = "") -> TriggerEvent:
        return TriggerEvent(SparkDriverEvent(status=status, submission_id=self.submission_id, driver_state=state,
                                             message=message, polls=polls, carry=self.carry))

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            client = RestSubmissionClient(self.rest_url)
        except SparkRestError as exc:
            yield self._event("error", 0, message=str(exc))
            return
        polls = not_found = 0
        unreachable_since: float | None = None
        last: str | None = None
        while True:
            polls += 1
            try:
                status = await asyncio.to_thread(client.status, self.submission_id)
            except SparkRestError as exc:
                if not exc.retriable:
                    yield self._event("error", polls, message=str(exc))
                    return
                unreachable_since = unreachable_since or time.time()
                if time.time() - unreachable_since >= self.unavailable_limit_s:
                    yield self._event("error", polls, last, f"the master's REST server did not answer for "
                                                            f"{self.unavailable_limit_s:g} s: {exc}")
                    return
                self.log.warning("Driver %s: %s; polling again in %g s.", self.submission_id, exc, self.poll_interval)
            else:
                unreachable_since = None
                if status.state is None:
                    not_found += 1
                    if not_found >= NOT_FOUND_LIMIT:
                        why = status.message or "no state"
                        yield self._event("error", polls, None,
                                          f"the master does not know driver {self.submission_id} ({why})")
                        return
                else:
                    not_found = 0
                    if status.terminal:
                        yield self._event("finished" if not status.failed else "failed", polls, status.state,
                                          status.message)
                        return
                    if status.state != last:
                        self.log.info("Driver %s: %s on %s", self.submission_id, status.state, status.worker)
                    last = status.state
            if self.timeout_at is not None and time.time() >= self.timeout_at:
                yield self._event("timeout", polls, last, "the driver did not end in time")
                return
            await asyncio.sleep(self.poll_interval)

    async def on_kill(self) -> None:
        """The user killed the deferred task: kill the driver, so it does not go on validating for nobody."""
        client = RestSubmissionClient(self.rest_url, timeout=10)
        accepted = await asyncio.to_thread(client.kill, self.submission_id)
        self.log.info("Kill of driver %s %s by the master.", self.submission_id,
                      "accepted" if accepted else "not accepted")
