"""Judging an application's instances from its controller's status: pure rules, no I/O.

The group coordinator lags the platform: a crashed member stays listed (Stable,
its epoch unchanged) until its session times out, and a member forced out of the
group while its process runs comes back. So the verdicts about *instances* rest
on the platform's word:

* :func:`instance_problems`: after a start or a roll, every expected instance
  runs (and is ready when the platform says), none is gone, and none restarted
  since the baseline taken right after the start (its restart count grew, or its
  incarnation changed: a crash the platform healed, a crash loop).
* :func:`lost_instances`: the baseline's instances that died since (gone, not
  running, restarted): a fact at any moment of a wait, not only once the
  coordinator's side holds.
* :func:`appeared_instances`: the instances running now that did not run at
  the baseline (or run as another process): what an Empty wait fails on, at
  any moment of it, once the application was stopped.
* :func:`member_instance`: which instance a group member is, by
  ``group.instance.id``, ``client.id`` or host, so a member that comes back can
  be named by its instance.
"""

from __future__ import annotations

from collections.abc import Iterable

from airflow_provider_kip848.controllers.protocol import ApplicationStatus, Instance


def restarted(before: Instance, now: Instance) -> str | None:
    """How ``now`` differs from ``before`` by a restart (None: it did not restart, as far as the platform
    tells)."""
    if before.restarts is not None and now.restarts is not None and now.restarts > before.restarts:
        return f"restarted {now.restarts - before.restarts} time(s) since the start"
    if before.incarnation and now.incarnation and before.incarnation != now.incarnation:
        return f"was replaced since the start (incarnation {before.incarnation} -> {now.incarnation})"
    if before.incarnation and not now.incarnation and now.ready is False:
        # the process of the start is no longer shown and the instance is not up: a process manager shows no pid
        # for a process starting again (supervisord's STARTING, BACKOFF), so a crash loop never shows a new pid
        return (f"is no longer the process of the start (incarnation {before.incarnation}; now "
                f"{now.state or 'not ready'})")
    return None


def instance_problems(status: ApplicationStatus, *, expected: int,
                      baseline: ApplicationStatus | None = None) -> list[str]:
    """Why the application's instances do not hold (empty: they do). ``status`` must be known (an unknown
    status is not judged here: the caller says so)."""
    if not status.known:
        raise ValueError("an unknown status cannot be judged")
    problems = []
    running = {i.name: i for i in status.running}
    for instance in status.instances:
        if not instance.running:
            problems.append(f"{instance.describe()} is not running")
        elif instance.ready is False:
            problems.append(f"{instance.describe()} is not ready")
    problems += [p for p in lost_instances(status, baseline) if p not in problems]  # not running: named above
    if len(running) < expected:
        problems.append(f"{len(running)} of {expected} expected instance(s) running")
    return problems


def lost_instances(status: ApplicationStatus, baseline: ApplicationStatus | None) -> list[str]:
    """The instances that ran at the baseline and have since died: gone, no longer running, or restarted
    (empty without a known baseline). Unlike a missing or unready instance, which a start may still be
    bringing up, a lost one is a fact at any moment of a wait: a wait can fail on it at once."""
    if not status.known:
        raise ValueError("an unknown status cannot be judged")
    if baseline is None or not baseline.known:
        return []
    lost = []
    listed = {i.name: i for i in status.instances}
    for before in baseline.running:
        now = listed.get(before.name)
        if now is None:
            lost.append(f"{before.describe()} is gone")
        elif not now.running:
            lost.append(f"{now.describe()} is not running")
        elif (why := restarted(before, now)) is not None:
            lost.append(f"{now.describe()} {why}")
    return lost


def appeared_instances(status: ApplicationStatus, baseline: ApplicationStatus) -> list[str]:
    """The instances running now that were not running at ``baseline`` (a status taken once the application was
    stopped, or at the start of an Empty wait), or that run as another process than then (restarted): such an
    instance joins the group at its next poll or heartbeat. Both statuses must be known."""
    if not status.known or not baseline.known:
        raise ValueError("an unknown status cannot be judged")
    before = {i.name: i for i in baseline.running}
    found = []
    for now in status.running:
        was = before.get(now.name)
        if was is None:
            found.append(f"{now.describe()} is running")
        elif now.incarnation and (why := restarted(was, now)) is not None:  # another process (not one stopping)
            found.append(f"{now.describe()} {why}")
    return found


def member_instance(member: dict, instances: Iterable[Instance]) -> Instance | None:
    """The instance a group member (``{client_id, host, instance_id}`` as the sensors record it) is, when the
    platform's identities say so: ``group.instance.id`` first, then ``client.id``, then a unique host."""
    pool = list(instances)
    for key, attr in (("instance_id", "group_instance_id"), ("client_id", "client_id")):
        value = member.get(key)
        if value:
            found = [i for i in pool if getattr(i, attr) == value]
            if len(found) == 1:
                return found[0]
    host = str(member.get("host") or "").lstrip("/")
    if host:
        found = [i for i in pool if i.host and i.host == host]
        if len(found) == 1:
            return found[0]
    return None


__all__ = ["appeared_instances", "instance_problems", "lost_instances", "member_instance", "restarted"]
