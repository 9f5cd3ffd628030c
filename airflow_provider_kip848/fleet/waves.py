"""Planning selected applications into waves.

:func:`plan_waves` orders the ready applications of a selection (:mod:`.selection`): a canary wave of the
smallest applications (fewest pending groups, so a failure costs least),
then waves of at most ``wave_size`` applications in (team, application)
order, none with more than ``max_groups_per_wave`` pending groups (the blast
radius); an application bigger than that gets a wave of its own, flagged
``oversized``. The same inputs give the same plan; ``plan_hash`` (and each
wave's ``wave_hash``) is the sha256 of its canonical JSON, so an approval is
tied to the exact content. Nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from airflow_provider_kip848.fleet.applications import HELD, MIGRATED, OFFLINE, Application, PlannedGroup
from airflow_provider_kip848.fleet.ownership import Conflict, IdleApplication, OwnershipNotApprovable
from airflow_provider_kip848.fleet.selection import Selection, check_migration
from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.inert import md_name, md_text


@dataclass(frozen=True)
class WaveLimits:
    """``canary``: applications in the canary wave (0: none); ``wave_size``: applications per wave;
    ``max_groups_per_wave``: pending groups per wave (the blast radius, None: no limit); ``parallelism``:
    group migrations a wave runs at once (the fleet DAG's mapped-task concurrency)."""

    canary: int = 2
    wave_size: int = 10
    max_groups_per_wave: int | None = 25
    parallelism: int = 4

    def __post_init__(self) -> None:
        for name, low in (("canary", 0), ("wave_size", 1), ("max_groups_per_wave", 1), ("parallelism", 1)):
            value = getattr(self, name)
            if value is None and name == "max_groups_per_wave":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidArgument(f"{name} must be a whole number >= {low}, got {value!r}",
                                      remedy="Fix the fleet plan's limits.")

    def to_dict(self) -> dict[str, object]:
        return {"canary": self.canary, "wave_size": self.wave_size, "max_groups_per_wave": self.max_groups_per_wave,
                "parallelism": self.parallelism}


def _digest(body: Any) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class Wave:
    """One wave: its applications (in plan order) and their pending groups.

    ``number`` counts from 1 (the canary, when there is one, is wave 1). ``oversized``: a single
    application with more pending groups than ``max_groups_per_wave`` (it could not be split: an
    application moves whole).
    """

    number: int
    migration: str
    applications: tuple[Application, ...]
    canary: bool = False
    oversized: bool = False

    @property
    def groups(self) -> tuple[PlannedGroup, ...]:
        """Every pending group of the wave, application by application (what the mapped task maps over)."""
        return tuple(g for a in self.applications for g in a.pending)

    @property
    def group_ids(self) -> tuple[str, ...]:
        return tuple(g.group_id for g in self.groups)

    @property
    def group_count(self) -> int:
        return sum(a.size for a in self.applications)

    @property
    def apps(self) -> tuple[str, ...]:
        return tuple(a.app for a in self.applications)

    @property
    def teams(self) -> tuple[str, ...]:
        return tuple(sorted({a.team for a in self.applications}))

    def application_of(self, group_id: str) -> Application:
        for a in self.applications:
            if any(g.group_id == group_id for g in a.pending):
                return a
        raise KeyError(group_id)

    def _canonical(self) -> dict[str, Any]:
        return {"number": self.number, "migration": self.migration, "canary": self.canary,
                "applications": [a._canonical() for a in self.applications]}

    @property
    def wave_hash(self) -> str:
        """sha256 of the wave's canonical JSON: number, migration, and per application its team, path,
        controller and pending groups with readiness and path (no free text, lag or member counts: they
        change without changing what the wave does)."""
        return _digest(self._canonical())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Wave:  # Any: JSON read back (XCom, a file, a response)
        """The wave as :meth:`to_dict` wrote it (an XCom): same content, same ``wave_hash``. A dict whose
        ``wave_hash`` does not match its content is refused (it was edited, or is of another version)."""
        try:
            wave = cls(number=int(data["number"]), migration=str(data["migration"]),
                       applications=tuple(Application.from_dict(a) for a in data["applications"]),
                       canary=bool(data.get("canary")), oversized=bool(data.get("oversized")))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgument(f"not a wave: {exc}") from None
        if data.get("wave_hash") not in (None, wave.wave_hash):
            raise InvalidArgument(f"wave {wave.number}: its wave_hash does not match its content")
        return wave

    def without(self, apps: Iterable[str]) -> Wave:
        """The wave without ``apps`` (e.g. applications found migrated when the wave starts)."""
        gone = set(apps)
        return replace(self, applications=tuple(a for a in self.applications if a.app not in gone))

    def to_dict(self) -> dict[str, object]:
        return {"number": self.number, "migration": self.migration, "canary": self.canary,
                "oversized": self.oversized, "group_count": self.group_count, "teams": list(self.teams),
                "wave_hash": self.wave_hash, "applications": [a.to_dict() for a in self.applications]}

    def render_markdown(self) -> str:
        """What the approver of this wave sees: applications, teams, their controllers (registry names: what
        stops, starts or rolls each), groups, readiness and path. Names (applications, teams, controllers,
        group ids) are code spans, the reasons and warnings inert text (:mod:`~.kafka.inert`)."""
        kind = "canary wave" if self.canary else "wave"
        lines = [f"### Wave {self.number} ({kind}): {len(self.applications)} application(s), "
                 f"{self.group_count} group(s), {md_text(self.migration)}", ""]
        if self.oversized:
            lines += [f"**Oversized**: application {md_name(self.applications[0].app)} alone has more groups than "
                      "the blast-radius limit; it moves whole, in a wave of its own.", ""]
        lines += ["| application | team | path | controller | group | type / state | members | readiness |",
                  "|---|---|---|---|---|---|---|---|"]
        for a in self.applications:
            controller = (md_name(a.app_controller, cell=True) if a.app_controller else "-") + (
                f" {md_name(dict(a.app_controller_args), cell=True)}" if a.app_controller_args else "")
            for g in a.pending:
                lines.append(f"| {md_name(a.app, cell=True)} | {md_name(a.team, cell=True)} | "
                             f"{md_text(a.path, cell=True)} | {controller} | {md_name(g.group_id, cell=True)} | "
                             f"{md_text(f'{g.type} / {g.state}', cell=True)} | "
                             f"{'-' if g.member_count is None else g.member_count} | "
                             f"{md_text(g.readiness, cell=True)} |")
        notes = [f"- **{md_name(a.app)}**: {md_text(a.reason)}" for a in self.applications if a.path == OFFLINE]
        notes += [f"- **{md_name(a.app)}**: already migrated: "
                  + ", ".join(md_name(g.group_id) for g in a.groups if g.status == MIGRATED)
                  for a in self.applications if any(g.status == MIGRATED for g in a.groups)]
        notes += [f"- **{md_name(a.app)}**: {md_text(w)}" for a in self.applications for w in a.warnings]
        if notes:
            lines += ["", "**Notes**", "", *notes]
        lines += ["", f"Wave hash: `{self.wave_hash}`"]
        return "\n".join(lines)


@dataclass(frozen=True)
class WavePlan:
    """The plan of a fleet migration: waves in order, and what it leaves out and why.

    ``held_back``: applications waiting (each with its reason); ``migrated``: applications skipped because
    every group is already migrated; ``unowned``: group ids no ownership rule matches (never migrated);
    ``conflicts``: groups matched by rules of different applications (:func:`select` refuses them, so only a
    plan built by hand has any); ``idle``: applications of the map whose rules match no group; ``scope``: the
    selection in words; ``unmatched``: filter values that matched no group. ``blockers`` says why the plan
    may not be approved (conflicts, idle applications); :meth:`require_approvable` raises with them.
    """

    migration: str
    waves: tuple[Wave, ...]
    limits: WaveLimits
    held_back: tuple[Application, ...] = ()
    migrated: tuple[Application, ...] = ()
    unowned: tuple[str, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    inventory_taken_at: str | None = None
    inventory_complete: bool = True
    warnings: tuple[str, ...] = ()
    idle: tuple[IdleApplication, ...] = ()
    scope: str = ""
    unmatched: tuple[str, ...] = ()
    source: str = "<map>"

    @property
    def blockers(self) -> tuple[str, ...]:
        """Why no one may approve this plan (empty: approvable): groups claimed by two applications,
        applications whose rules match no group."""
        return (*(f"group {c.describe()}" for c in self.conflicts), *(i.describe() for i in self.idle))

    @property
    def approvable(self) -> bool:
        return not self.blockers

    def require_approvable(self) -> None:
        """:class:`~airflow_provider_kip848.fleet.ownership.OwnershipNotApprovable` unless the plan may be
        approved."""
        if self.blockers:
            raise OwnershipNotApprovable(self.source, self.conflicts, self.idle)

    @property
    def applications(self) -> tuple[Application, ...]:
        return tuple(a for w in self.waves for a in w.applications)

    @property
    def group_ids(self) -> tuple[str, ...]:
        return tuple(g for w in self.waves for g in w.group_ids)

    def wave(self, number: int) -> Wave:
        for w in self.waves:
            if w.number == number:
                return w
        raise KeyError(number)

    def _canonical(self) -> dict[str, Any]:
        return {"migration": self.migration, "limits": self.limits.to_dict(),
                "waves": [w._canonical() for w in self.waves],
                "held_back": [{"app": a.app, "groups": list(a.group_ids)} for a in self.held_back],
                "migrated": [a.app for a in self.migrated], "unowned": list(self.unowned),
                "inventory_complete": self.inventory_complete}

    @property
    def plan_hash(self) -> str:
        """sha256 of the plan's canonical JSON: the migration, the limits, every wave's content (as in
        ``wave_hash``), the held-back applications with their group ids, the skipped applications and the
        unowned groups. Reasons, lag, member counts and the inventory's time are not in it."""
        return _digest(self._canonical())

    def to_dict(self) -> dict[str, object]:
        return {"migration": self.migration, "plan_hash": self.plan_hash, "limits": self.limits.to_dict(),
                "inventory_taken_at": self.inventory_taken_at, "inventory_complete": self.inventory_complete,
                "summary": {"waves": len(self.waves), "applications": len(self.applications),
                            "groups": len(self.group_ids), "held_back": len(self.held_back),
                            "migrated": len(self.migrated), "unowned": len(self.unowned)},
                "waves": [w.to_dict() for w in self.waves],
                "held_back": [a.to_dict() for a in self.held_back],
                "migrated": [a.to_dict() for a in self.migrated],
                "unowned": list(self.unowned), "conflicts": [c.to_dict() for c in self.conflicts],
                "warnings": list(self.warnings), "scope": self.scope, "unmatched": list(self.unmatched),
                "idle": [i.to_dict() for i in self.idle], "blockers": list(self.blockers),
                "approvable": self.approvable}

    def render_markdown(self, *, max_listed: int = 50) -> str:
        """The whole plan for a reader: summary, every wave, what is held back and why, what is skipped.
        Long lists of skipped applications and unowned groups show their first ``max_listed``. Names are code
        spans, the scope, reasons and warnings inert text (:mod:`~.kafka.inert`)."""
        lim = self.limits
        lines = [f"## Fleet plan: {md_text(self.migration)}", "",
                 f"{len(self.waves)} wave(s), {len(self.applications)} application(s), {len(self.group_ids)} "
                 f"group(s); {len(self.held_back)} held back, {len(self.migrated)} already migrated, "
                 f"{len(self.unowned)} unowned group(s).", "",
                 f"Limits: canary {lim.canary} application(s), {lim.wave_size} application(s) per wave, at most "
                 f"{lim.max_groups_per_wave if lim.max_groups_per_wave is not None else 'any number of'} group(s) "
                 f"per wave, {lim.parallelism} at once. Inventory taken at {md_text(self.inventory_taken_at or '-')}"
                 + ("." if self.inventory_complete else " (**not complete**)."), ""]
        if self.scope:
            lines += [f"Selection: {md_text(self.scope)}.", ""]
        if self.blockers:
            lines += ["### Not approvable: fix the ownership map", "",
                      *[f"- {md_text(b)}" for b in self.blockers], ""]
        if self.unmatched:
            lines += ["**Matched nothing**", "", *[f"- {md_text(u)}" for u in self.unmatched], ""]
        if self.scope and not (self.waves or self.held_back or self.migrated):
            lines += [f"**Nothing selected**: {md_text(self.scope)} chose no application of this inventory.", ""]
        if self.warnings:
            lines += ["**Warnings**", "", *[f"- {md_text(w)}" for w in self.warnings], ""]
        for w in self.waves:
            lines += [w.render_markdown(), ""]
        if self.held_back:
            lines += ["### Held back", "", "| application | team | groups | why | what to do |",
                      "|---|---|---|---|---|"]
            for a in self.held_back:
                remedies = sorted({g.remedy for g in a.groups if g.status == HELD and g.remedy})
                lines.append(f"| {md_name(a.app, cell=True)} | {md_name(a.team, cell=True)} | "
                             + ", ".join(md_name(g.group_id, cell=True) for g in a.groups)
                             + f" | {md_text(a.reason, cell=True)} | {md_text(' '.join(remedies), cell=True) or '-'} |")
            lines.append("")
        if self.migrated:
            names = [a.app for a in self.migrated]
            lines += ["### Already migrated (skipped)", "",
                      ", ".join(md_name(n) for n in names[:max_listed]) + (f" and {len(names) - max_listed} more"
                                                       if len(names) > max_listed else ""), ""]
        if self.unowned:
            lines += ["### Unowned groups (no ownership rule: never migrated)", "",
                      ", ".join(md_name(g) for g in self.unowned[:max_listed])
                      + (f" and {len(self.unowned) - max_listed} more" if len(self.unowned) > max_listed else ""),
                      ""]
        lines += [f"Plan hash: `{self.plan_hash}`"]
        return "\n".join(lines)


def _as_selection(selection: Selection | Iterable[Application], migration: str | None) -> Selection:
    if isinstance(selection, Selection):
        if migration is not None and migration != selection.migration:
            raise InvalidArgument(f"migration {migration!r} differs from the selection's {selection.migration!r}")
        sel = selection
    else:
        if migration is None:
            raise InvalidArgument("plan_waves of applications alone needs migration=...")
        check_migration(migration)
        sel = Selection(migration=migration, applications=tuple(sorted(selection, key=lambda a: (a.team, a.app))))
    if len({a.app for a in sel.applications}) != len(sel.applications):
        raise InvalidArgument("an application appears twice in the selection")
    return sel


def _fits(wave: list[Application], app: Application, limit: int | None) -> bool:
    return limit is None or sum(a.size for a in wave) + app.size <= limit


def _canary(ready: list[Application], limits: WaveLimits) -> list[Application]:
    """The smallest applications (fewest pending groups, then team and name), within the blast radius."""
    chosen: list[Application] = []
    if not limits.canary:
        return chosen
    for app in sorted(ready, key=lambda a: (a.size, a.team, a.app)):
        if len(chosen) >= limits.canary or not _fits(chosen, app, limits.max_groups_per_wave):
            if not chosen:
                chosen.append(app)  # the smallest application is already over the limit: alone
            break
        chosen.append(app)
    return sorted(chosen, key=lambda a: (a.team, a.app))


def _pack(apps: list[Application], limits: WaveLimits) -> list[list[Application]]:
    """``apps`` in order, cut into waves of at most ``wave_size`` applications and the group limit; an
    application over the group limit alone."""
    limit = limits.max_groups_per_wave
    batches: list[list[Application]] = []
    current: list[Application] = []
    for app in apps:
        oversized = limit is not None and app.size > limit
        if current and (oversized or len(current) >= limits.wave_size or not _fits(current, app, limit)):
            batches.append(current)
            current = []
        current.append(app)
        if oversized:
            batches.append(current)
            current = []
    if current:
        batches.append(current)
    return batches


def plan_waves(selection: Selection | Iterable[Application], *, canary: int = 2, wave_size: int = 10,
               max_groups_per_wave: int | None = 25, parallelism: int = 4,
               migration: str | None = None) -> WavePlan:
    """The waves for the ready applications of ``selection`` (module docstring for the order and limits).

    ``selection`` is what :func:`select` returns (its held-back and migrated applications, unowned groups,
    conflicts and warnings go into the plan), or applications alone (then ``migration`` names the
    migration). The result depends only on the input, never on its order.
    """
    limits = WaveLimits(canary=canary, wave_size=wave_size, max_groups_per_wave=max_groups_per_wave,
                        parallelism=parallelism)
    sel = _as_selection(selection, migration)
    ready = sorted(sel.ready, key=lambda a: (a.team, a.app))
    canary_apps = _canary(ready, limits)
    in_canary = {a.app for a in canary_apps}
    batches = ([(canary_apps, True)] if canary_apps else []) + [
        (batch, False) for batch in _pack([a for a in ready if a.app not in in_canary], limits)]
    limit = limits.max_groups_per_wave
    waves = tuple(Wave(number=i, migration=sel.migration, applications=tuple(group), canary=is_canary,
                       oversized=limit is not None and sum(a.size for a in group) > limit)
                  for i, (group, is_canary) in enumerate(batches, 1))
    return WavePlan(migration=sel.migration, waves=waves, limits=limits, held_back=sel.held_back,
                    migrated=sel.migrated, unowned=sel.unowned, conflicts=sel.conflicts,
                    inventory_taken_at=sel.inventory_taken_at, inventory_complete=sel.inventory_complete,
                    warnings=sel.warnings, idle=sel.idle, scope=sel.scope, unmatched=sel.unmatched,
                    source=sel.source)


__all__ = ["Wave", "WaveLimits", "WavePlan", "plan_waves"]
