"""The platform watched from the triggerer: a wait's looks at its application's instances, off the event loop.

Why in the triggerer: a deferred wait holds no worker slot, and waking a worker
every few seconds to ask the platform would cost a task start each time (a
scheduler loop, a queue, a task process: seconds each under Celery), more than
poking. A look is one read of the controller's status (a ``status`` command
over supervisorctl, systemctl or SSH, a Kubernetes API read): never a stop, a
start or a roll, and the triggerer rebuilds the controller from the
deployment's registry by its name, as a worker does (the trigger's kwargs
carry names, never commands).

How it keeps the triggerer well: each look runs in a thread of a small pool of
its own (:data:`LOOK_THREADS`, so slow commands never take the threads the
broker polls use), one look at a time per wait (a hung command is waited for,
its own timeout ends it; none piles up), each given
:attr:`~airflow_provider_kip848.hooks.platform_watch.PlatformWatch.timeout_s`
before it is reported late. A triggerer that cannot build the controller (no
registry file there, a kind not installed) says so at once
(``unwatched``): the wait goes on in a worker, never unwatched in silence.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from airflow_provider_kip848.controllers import ControllerError, NamedController
from airflow_provider_kip848.hooks.platform_watch import PlatformWatch
from airflow_provider_kip848.kafka.rules.conditions import TaskLog

if TYPE_CHECKING:  # the backend loads at the first poll (kafka/native/__init__.py)
    from airflow_provider_kip848.kafka.native.admin import KafkaAdmin

#: threads of the looks of every waiting trigger of this triggerer process (a look blocks on a command or an API)
LOOK_THREADS = 8
_LOOKS = ThreadPoolExecutor(max_workers=LOOK_THREADS, thread_name_prefix="kip848-platform-look")


@dataclass(frozen=True)
class Finding:
    """What ended a probe: ``lost`` (the platform shows what fails the wait: ``message`` names the instances and
    their state), ``error`` (the controller refused in a way a retry would repeat) or ``unwatched`` (this process
    cannot build the controller: ``message`` says why)."""

    kind: Literal["lost", "error", "unwatched"]
    message: str


class PlatformProbe:
    """Looks at the platform every ``watch.every_s`` seconds until a look finds what fails the wait.

    :meth:`start` runs it as a task of the running loop; the task's result is the :class:`Finding` (it never ends
    otherwise; cancel it when the wait ends). ``looks`` and ``failed`` count the looks answered and those that
    failed or came late (logged), for the wait's result."""

    def __init__(self, watch: PlatformWatch, log: TaskLog, counted: object = None) -> None:
        self.watch, self.log = watch, log
        before = counted if isinstance(counted, dict) else {}  # the looks of the wait's earlier deferrals
        self.looks, self.failed = int(before.get("looks") or 0), int(before.get("failed") or 0)
        self.spent = float(before.get("look_s") or 0.0)  # seconds the looks took (their cost, for the result)
        self.task: asyncio.Task[Finding] | None = None
        self._pending: asyncio.Future[str | None] | None = None

    def start(self) -> asyncio.Task[Finding]:
        self.task = asyncio.get_running_loop().create_task(self._run(), name="kip848-platform-probe")
        return self.task

    def stop(self) -> None:
        """Cancel the probe (the wait ended); a look under way finishes in its thread and is not waited for."""
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def stats(self) -> dict[str, object]:
        return {"looks": self.looks, "failed": self.failed, "look_s": round(self.spent, 2),
                "every_s": self.watch.every_s, "where": "triggerer"}

    async def _run(self) -> Finding:
        loop = asyncio.get_running_loop()
        try:
            named = await loop.run_in_executor(_LOOKS, self.watch.resolve)
        except Exception as exc:  # noqa: BLE001 - a registry, kind or argument this process cannot use: said
            return Finding("unwatched", f"the triggerer cannot build controller {self.watch.controller!r}: "
                                        f"{type(exc).__name__}: {exc}")
        try:
            while True:
                began = loop.time()
                found = await self._look(loop, named)
                if found is not None:
                    return found
                await asyncio.sleep(max(0.0, self.watch.every_s - (loop.time() - began)))
        finally:
            self._close(named)

    async def _look(self, loop: asyncio.AbstractEventLoop, named: NamedController) -> Finding | None:
        began = loop.time()
        pending = self._pending = loop.run_in_executor(_LOOKS, self.watch.look, named)
        done, _ = await asyncio.wait({pending}, timeout=self.watch.timeout_s)
        if not done:
            self.failed += 1
            self.log.warning("The platform (%s) has not answered a look within %g s; waiting for it (its command's "
                             "own timeout ends it) before the next.", self.watch.describe(), self.watch.timeout_s)
            await asyncio.wait({pending})
        self.spent += loop.time() - began
        exc = pending.exception()
        if exc is None:
            self.looks += 1
            message = pending.result()
            return Finding("lost", message) if message else None
        if isinstance(exc, ControllerError) and not exc.retriable:
            return Finding("error", str(exc))
        self.failed += 1
        self.log.warning("A look at the platform (%s) failed, asking again in %g s: %s", self.watch.describe(),
                         self.watch.every_s, exc)
        return None

    def _close(self, named: NamedController) -> None:
        """Release the controller (an SSH session) in a look thread, after a look under way ends."""
        pending = self._pending
        if pending is not None and not pending.done():
            pending.add_done_callback(lambda _: _LOOKS.submit(named.close))
        else:
            _LOOKS.submit(named.close)


async def close_after_poll(poll: asyncio.Future[Any] | None, admin: KafkaAdmin) -> None:  # Any: any poll's result
    """Close ``admin`` once no poll uses it: at once, or (the wait ended on the platform's word while a poll was
    under way) when that poll's thread ends, without waiting for it here. Shared by the group and move triggers,
    whose broker polls race this module's probe."""
    if poll is None or poll.done():
        await asyncio.to_thread(admin.close)
        return
    loop = asyncio.get_running_loop()
    poll.add_done_callback(lambda _: loop.run_in_executor(None, admin.close))


__all__ = ["LOOK_THREADS", "Finding", "PlatformProbe", "close_after_poll"]
