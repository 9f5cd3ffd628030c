"""An application instance's incarnation, kept from its own start: what a roll compares every later look with.

A platform's later look can show a process that is not the one the start created (supervisord restarted it at once
after a crash, a pod was replaced, a crash loop shows STARTING with no pid): judged against that look, a crash right
after the join would pass unseen (issue 46). So the facts of the start are recorded once (``origin``: its
incarnation, restart count and whether it ran), a later look only fills in what the start's view lacked, and every
look after the join is judged against it. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_kip848.controllers import Instance


def is_up(instance: Instance | None) -> bool:
    """Running and not said to be unready: RUNNING, not STARTING or BACKOFF (a way back may take it down only to
    bring it back: one that was up and does not come back stops the way back)."""
    return instance is not None and instance.running and instance.ready is not False


def follow_origin(origin: dict[str, Any], now: Instance | None) -> None:  # Any: JSON (the roll's record)
    """Complete ``origin`` (the instance's facts from its start) from a look that found nothing changed: the first
    incarnation and restart count the platform shows, and whether it was seen up (ready) since."""
    if now is None or since_start(origin, now) is not None:
        return
    if origin.get("incarnation") is None and now.incarnation:
        origin["incarnation"] = now.incarnation
    if origin.get("restarts") is None and now.restarts is not None:
        origin["restarts"] = now.restarts
    if now.ready is True:
        origin["ran"] = True


def since_start(origin: Mapping[str, Any], now: Instance | None) -> str | None:  # Any: JSON (the roll's record)
    """How ``now`` is no longer the process its start created (None: as far as the platform tells, it still is):
    gone, not running, another incarnation, more restarts, or starting again after it ran."""
    if now is None:
        return "is no longer listed by the platform"
    first = origin.get("incarnation")
    if not now.running:
        return f"is not running ({now.describe()}; its start's incarnation {first or 'not shown'})"
    if first and now.incarnation and now.incarnation != first:
        return f"was replaced since its start (incarnation {first} -> {now.incarnation}; {now.state or 'running'})"
    counted = origin.get("restarts")
    if counted is not None and now.restarts is not None and now.restarts > counted:
        return (f"restarted {now.restarts - counted} time(s) since its start (incarnation {first or 'not shown'} "
                f"-> {now.incarnation or 'not shown yet'}; {now.state or 'running'})")
    if origin.get("ran") and now.ready is False:
        return (f"is starting again ({now.state or 'not ready'}) after it ran (incarnation {first or 'not shown'} "
                f"-> {now.incarnation or 'not shown yet'})")
    return None


__all__ = ["follow_origin", "is_up", "since_start"]
