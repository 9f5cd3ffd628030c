"""When to stop a fleet migration, and what of a plan remains after a partial run.

The error budget is counted in applications, the unit that moves: an
application fails when any of its wave's groups failed or reported nothing.
After each wave, :meth:`ErrorBudget.judge_wave` says whether the remaining
waves may run; the canary wave has its own, stricter budget (none by default:
one failed application in the canary stops the fleet). The verdict names the
failed applications and the groups to roll back (every pending group of a
failed application, since an application moves whole).

:func:`remaining` makes a rerun resumable without re-planning: given the
groups already migrated (a fresh inventory: their type is the target, and they
are not mixed), it keeps the plan's waves and numbering, drops every
application whose groups are all migrated (named in ``skipped``) and every
wave left empty (named in ``completed_waves``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from airflow_provider_kip848.fleet.applications import MIGRATED, PENDING, TARGET_TYPE, Application
from airflow_provider_kip848.fleet.waves import Wave, WavePlan
from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.inventory import GroupInventory


@dataclass(frozen=True)
class GroupResult:
    """One group's migration in a wave: ``ok`` or not, and what happened (the error, the final state ...)."""

    group_id: str
    ok: bool
    detail: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GroupResult:  # Any: JSON read back (XCom, a file, a response)
        ok = data.get("ok")
        if not isinstance(ok, bool) or not isinstance(data.get("group_id"), str):
            raise InvalidArgument(f"a group result needs group_id (string) and ok (true/false), got {dict(data)!r}")
        return cls(data["group_id"], ok, str(data.get("detail") or ""))

    def to_dict(self) -> dict[str, object]:
        return {"group_id": self.group_id, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True)
class WaveVerdict:
    """The judgment on one wave: ``proceed`` to the next wave or stop, and why.

    ``failed_apps``: applications with a failed (or silent) group; ``failed_groups``: group id -> detail;
    ``rollback_groups``: every pending group of the failed applications, in wave order.
    """

    wave: int
    proceed: bool
    reason: str
    failed_apps: tuple[str, ...] = ()
    succeeded_apps: tuple[str, ...] = ()
    failed_groups: Mapping[str, str] | None = None
    rollback_groups: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"wave": self.wave, "proceed": self.proceed, "reason": self.reason,
                "failed_apps": list(self.failed_apps), "succeeded_apps": list(self.succeeded_apps),
                "failed_groups": dict(self.failed_groups or {}), "rollback_groups": list(self.rollback_groups)}


@dataclass(frozen=True)
class ErrorBudget:
    """How many failed applications a wave may have before the remaining waves are stopped.

    ``max_failed_apps``: at most this many (0: none may fail); ``max_failed_ratio``: at most this share of
    the wave's applications (0.0 to 1.0). Both set: both must hold; one None: only the other counts; both
    None is refused (no budget is ``max_failed_ratio=1.0``, said explicitly). ``canary_max_failed_apps``:
    the canary wave's own budget.
    """

    max_failed_apps: int | None = 0
    max_failed_ratio: float | None = None
    canary_max_failed_apps: int = 0

    def __post_init__(self) -> None:
        for name in ("max_failed_apps", "canary_max_failed_apps"):
            value = getattr(self, name)
            if value is None and name == "max_failed_apps":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgument(f"{name} must be a whole number >= 0, got {value!r}")
        ratio = self.max_failed_ratio
        if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float))
                                  or not 0.0 <= ratio <= 1.0):
            raise InvalidArgument(f"max_failed_ratio must be between 0.0 and 1.0, got {ratio!r}")
        if self.max_failed_apps is None and ratio is None:
            raise InvalidArgument("an error budget needs max_failed_apps or max_failed_ratio",
                                  remedy="Set max_failed_ratio=1.0 to never stop on failures (say it explicitly).")

    def judge_wave(self, wave: Wave, results: Iterable[GroupResult] | Mapping[str, bool]) -> WaveVerdict:
        """Judge ``wave`` from its groups' ``results`` (GroupResults, or group id -> ok).

        A pending group of the wave without a result counts as failed (its task did not run or did not
        report); a result for a group that is not pending in the wave is refused (the results are not this
        wave's)."""
        given = ([GroupResult(g, bool(ok)) for g, ok in results.items()] if isinstance(results, Mapping)
                 else list(results))
        by_group: dict[str, GroupResult] = {}
        expected = set(wave.group_ids)
        for r in given:
            if r.group_id not in expected:
                raise InvalidArgument(f"a result for {r.group_id!r}, which wave {wave.number} does not migrate")
            if r.group_id in by_group:
                raise InvalidArgument(f"two results for {r.group_id!r} in wave {wave.number}")
            by_group[r.group_id] = r
        failed_groups: dict[str, str] = {}
        failed_apps: list[str] = []
        rollback: list[str] = []
        for app in wave.applications:
            bad = False
            for g in app.pending:
                result = by_group.get(g.group_id)
                if result is None:
                    failed_groups[g.group_id] = "no result (the group's migration did not run or did not report)"
                    bad = True
                elif not result.ok:
                    failed_groups[g.group_id] = result.detail or "failed"
                    bad = True
            if bad:
                failed_apps.append(app.app)
                rollback += [g.group_id for g in app.pending]
        total, failed = len(wave.applications), len(failed_apps)
        succeeded = tuple(a.app for a in wave.applications if a.app not in failed_apps)
        allowed, proceed = self._allowance(wave, total, failed)
        head = f"wave {wave.number}{' (canary)' if wave.canary else ''}: {failed} of {total} application(s) failed"
        if failed_apps:
            head += f" ({', '.join(failed_apps)})"
        reason = f"{head}; the budget allows {allowed}: " + ("proceed" if proceed else "stop the remaining waves")
        return WaveVerdict(wave=wave.number, proceed=proceed, reason=reason, failed_apps=tuple(failed_apps),
                           succeeded_apps=succeeded, failed_groups=failed_groups, rollback_groups=tuple(rollback))

    def _allowance(self, wave: Wave, total: int, failed: int) -> tuple[str, bool]:
        if wave.canary:
            return (f"{self.canary_max_failed_apps} in the canary",
                    failed <= self.canary_max_failed_apps)
        parts, ok = [], True
        if self.max_failed_apps is not None:
            parts.append(f"{self.max_failed_apps} application(s)")
            ok = ok and failed <= self.max_failed_apps
        if self.max_failed_ratio is not None:
            parts.append(f"{self.max_failed_ratio:.0%} of the wave")
            ok = ok and failed <= self.max_failed_ratio * total + 1e-9
        return " and ".join(parts), ok

    def to_dict(self) -> dict[str, object]:
        return {"max_failed_apps": self.max_failed_apps, "max_failed_ratio": self.max_failed_ratio,
                "canary_max_failed_apps": self.canary_max_failed_apps}


@dataclass(frozen=True)
class Remaining:
    """What of ``plan_hash``'s plan is left to do: its waves with the applications still to move (original
    numbers; an application partly migrated keeps its other groups pending), the applications skipped
    because every group is migrated, the waves left empty, and the migrated groups of the plan."""

    plan_hash: str
    waves: tuple[Wave, ...]
    skipped: tuple[str, ...]
    completed_waves: tuple[int, ...]
    done_groups: tuple[str, ...]

    @property
    def complete(self) -> bool:
        """Nothing is left: every group of the plan is migrated."""
        return not self.waves

    def to_dict(self) -> dict[str, object]:
        return {"plan_hash": self.plan_hash, "complete": self.complete, "skipped": list(self.skipped),
                "completed_waves": list(self.completed_waves), "done_groups": list(self.done_groups),
                "waves": [w.to_dict() for w in self.waves]}


def migrated_groups(inventory: GroupInventory, migration: str) -> frozenset[str]:
    """The groups of ``inventory`` already migrated by ``migration``: on its target type, and not mixed."""
    target = TARGET_TYPE[migration]
    return frozenset(e.group_id for e in inventory.entries
                     if e.type is target and e.error is None and not e.is_mixed)


def _without(app: Application, done: frozenset[str]) -> Application | None:
    if all(g.group_id in done for g in app.pending):
        return None
    return replace(app, groups=tuple(replace(g, status=MIGRATED, path=None,
                                             reason="migrated since the plan was made")
                                     if g.status == PENDING and g.group_id in done else g for g in app.groups))


def remaining(plan: WavePlan, done: GroupInventory | Iterable[str]) -> Remaining:
    """The part of ``plan`` still to run, given the groups already migrated (``done``: group ids, or a fresh
    inventory, read with :func:`migrated_groups`). Groups of ``done`` outside the plan are ignored."""
    done_ids = (migrated_groups(done, plan.migration) if isinstance(done, GroupInventory)
                else frozenset([done] if isinstance(done, str) else done))
    waves, skipped, completed = [], [], []
    for wave in plan.waves:
        left = []
        for app in wave.applications:
            kept = _without(app, done_ids)
            if kept is None:
                skipped.append(app.app)
            else:
                left.append(kept)
        if left:
            waves.append(replace(wave, applications=tuple(left)))
        else:
            completed.append(wave.number)
    in_plan = set(plan.group_ids)
    return Remaining(plan_hash=plan.plan_hash, waves=tuple(waves), skipped=tuple(skipped),
                     completed_waves=tuple(completed), done_groups=tuple(sorted(in_plan & done_ids)))


__all__ = ["ErrorBudget", "GroupResult", "Remaining", "WaveVerdict", "migrated_groups", "remaining"]
