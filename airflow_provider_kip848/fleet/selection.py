"""Selecting applications from an inventory for one migration (:mod:`.waves` plans them into waves).

A group is migrated with its application: the ownership map
(:mod:`.ownership`) names the application of each group, and an application
moves whole, by one path. :func:`select` judges every owned group of an
inventory for one migration (``classic_to_consumer`` by default):

* its type is already the migration's target (and it is not a mixed group):
  *migrated*, nothing to do (an application whose groups all are is skipped,
  and named);
* its verdict is ``ready_online`` or ``offline_only``: *pending*;
* anything else (blocked, unknown, no verdict for this migration, a mixed
  group in the middle of an online migration, outside the readiness filter):
  the group is *held*, and so is its whole application, with the reason.

A ready application's path is ``offline`` when one of its pending groups is
offline only (a rolling upgrade would be refused for that group) or its rule
says ``migration: offline``; otherwise ``online``. A rule saying
``migration: online`` holds the application back instead of taking it
offline. Every pending group of an application takes the application's path;
its own verdict's readiness stays visible.

Nothing here does I/O.
"""


from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from airflow_provider_kip848.fleet.applications import (
    HELD,
    MIGRATED,
    OFFLINE,
    ONLINE,
    PATH_OF,
    PENDING,
    READY,
    TARGET_TYPE,
    Application,
    PlannedGroup,
)
from airflow_provider_kip848.fleet.ownership import (
    Conflict,
    IdleApplication,
    OwnershipMap,
    OwnershipNotApprovable,
    OwnershipRule,
)
from airflow_provider_kip848.kafka.arguments import describe_similar, show_id, similar_group_ids
from airflow_provider_kip848.kafka.errors import InvalidArgument, Kip848Error
from airflow_provider_kip848.kafka.inventory import GroupInventory, InventoryEntry, Readiness
from airflow_provider_kip848.kafka.model import GroupType


class IncompleteInventory(Kip848Error):
    """The inventory misses brokers' listings: groups may be missing from their applications."""

    retriable = True
    remedy = ("Take the inventory again once every broker answers, or pass allow_incomplete=True to plan "
              "knowing that an application may be migrated without some of its groups.")



@dataclass(frozen=True)
class Selection:
    """What :func:`select` found: every selected application (ready, held or migrated, sorted by team and
    application), the groups no rule owns, the ownership conflicts among the inventory's groups (:func:`select`
    raises on any, so a selection it returns has none), the applications of the map whose rules match no group
    (``idle``: no plan is approvable while there is one), ``scope``: the selection in words (what the approvers
    read: "every application of the ownership map" only when nothing narrowed it), and ``unmatched``: each
    filter value that matched no group of the inventory, in words."""

    migration: str
    applications: tuple[Application, ...]
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
    def ready(self) -> tuple[Application, ...]:
        return tuple(a for a in self.applications if a.status == READY)

    @property
    def held_back(self) -> tuple[Application, ...]:
        return tuple(a for a in self.applications if a.status == HELD)

    @property
    def migrated(self) -> tuple[Application, ...]:
        return tuple(a for a in self.applications if a.status == MIGRATED)

    def application(self, app: str) -> Application:
        for a in self.applications:
            if a.app == app:
                return a
        raise KeyError(app)


def check_migration(migration: str) -> None:
    if migration not in TARGET_TYPE:
        raise InvalidArgument(f"migration {migration!r} is not one of {', '.join(TARGET_TYPE)}")


def _readiness_filter(readiness: Iterable[str | Readiness] | str | None) -> frozenset[Readiness] | None:
    if readiness is None:
        return None
    values = [readiness] if isinstance(readiness, str) else list(readiness)
    if not values:
        raise InvalidArgument("readiness is empty: it would hold back every application, it never means every "
                              "readiness", remedy="Select by ready_online and/or offline_only, or leave readiness "
                                                  "out (None) to take both.")
    out = set()
    for value in values:
        try:
            out.add(Readiness(value))
        except ValueError:
            raise InvalidArgument(f"readiness {value!r} is not one of {', '.join(r.value for r in Readiness)}",
                                  remedy="Select by ready_online and/or offline_only.") from None
    return frozenset(out)


def _given(kind: str, param: str, wanted: Iterable[str] | str | None) -> tuple[str, ...] | None:
    """A filter's values: None when not given (no filter on this); an empty list, or an empty or blank value,
    is refused: an empty filter selects nothing, and never means every application (a blank prefix would
    match every group)."""
    if wanted is None:
        return None
    values = (wanted,) if isinstance(wanted, str) else tuple(wanted)
    if not values:
        raise InvalidArgument(f"{param} is empty: an empty filter selects no {kind}, it never means every one",
                              remedy=f"Name the {kind} to select, or leave {param} out (None) to not filter by "
                                     f"{kind}: every application of the ownership map is then an explicit choice.")
    bad = [v for v in values if not isinstance(v, str) or not v.strip()]
    if bad:
        raise InvalidArgument(f"{param} has an empty or non-text value {bad[0]!r}"
                              + (" (an empty prefix would match every group)" if param == "prefixes" else ""),
                              remedy=f"Give each of {param} as text, e.g. {param}=['orders-'].")
    return values


def _names(kind: str, param: str, wanted: Iterable[str] | str | None, known: tuple[str, ...]) -> frozenset[str] | None:
    values = _given(kind, param, wanted)
    if values is None:
        return None
    names = frozenset(values)
    missing = sorted(names - set(known))
    if missing:
        # a look-alike name (a Cyrillic 'о', a no-break space) prints as the real one: show the code points
        hints = [h for m in missing if (h := describe_similar(m, similar_group_ids(m, known)))]
        raise InvalidArgument(f"{kind} {', '.join(map(show_id, missing))} not in the ownership map "
                              f"(it names: {', '.join(known) or 'none'})"
                              + (f"; {'; '.join(hints)}" if hints else ""),
                              remedy=f"Name {kind} as the ownership map spells them.")
    return names


def _judge_group(entry: InventoryEntry, migration: str, target: GroupType,
                 readiness: frozenset[Readiness] | None) -> PlannedGroup:
    facts: dict[str, Any] = {"group_id": entry.group_id, "type": entry.type.value, "state": entry.state.value,
             "member_count": entry.member_count, "entry": entry}
    verdict = next((v for v in entry.verdicts if v.migration == migration), None)
    if entry.type is target and entry.error is None:
        if entry.is_mixed:
            return PlannedGroup(**facts, status=HELD, readiness=None,
                                reason="mixed: a consumer group that still has classic members (an online "
                                       "migration in progress or stuck)",
                                remedy="Finish the rolling upgrade or roll it back before planning this application.")
        return PlannedGroup(**facts, status=MIGRATED, readiness=None,
                            reason=f"already a {target.value} group")
    if verdict is None:
        applies = ", ".join(v.migration for v in entry.verdicts) or "none"
        return PlannedGroup(**facts, status=HELD, readiness=None,
                            reason=f"no {migration} verdict for a {entry.type.value} group (its migrations: "
                                   f"{applies})",
                            remedy="Check the ownership map and the migration this application needs.")
    common: dict[str, Any] = {"readiness": verdict.readiness.value, "reason": verdict.reason, "remedy": verdict.remedy}
    if verdict.readiness not in PATH_OF:
        return PlannedGroup(**facts, status=HELD, **common)
    if readiness is not None and verdict.readiness not in readiness:
        return PlannedGroup(**facts, status=HELD, readiness=verdict.readiness.value,
                            reason=f"{verdict.readiness.value}, outside the selection's readiness filter "
                                   f"({', '.join(sorted(r.value for r in readiness))})", remedy="")
    return PlannedGroup(**facts, status=PENDING, path=PATH_OF[verdict.readiness], **common)


def _application(rule: OwnershipRule, groups: list[PlannedGroup]) -> Application:
    groups.sort(key=lambda g: g.group_id)
    base: dict[str, Any] = {
        "app": rule.app, "team": rule.team, "rule_index": rule.index, "app_controller": rule.app_controller,
        "app_controller_args": dict(rule.app_controller_args), "expected_instances": rule.expected_instances,
        "forced_path": rule.migration}
    warnings = tuple(f"{g.group_id} has {g.member_count} member(s), the ownership map expects "
                     f"{rule.expected_instances} instance(s)"
                     for g in groups if rule.expected_instances is not None and g.member_count
                     and g.member_count != rule.expected_instances)
    held = [g for g in groups if g.status == HELD]
    pending = [g for g in groups if g.status == PENDING]
    if held:
        reason = "; ".join(f"{g.group_id}: {g.readiness + ': ' if g.readiness and g.readiness not in g.reason else ''}"
                           f"{g.reason}" for g in held)
        return Application(**base, groups=tuple(groups), status=HELD, path=None, reason=reason, warnings=warnings)
    if not pending:
        return Application(**base, groups=tuple(groups), status=MIGRATED, path=None,
                           reason="every group is already migrated", warnings=warnings)
    offline = [g for g in pending if g.path == OFFLINE]
    if rule.migration == ONLINE and offline:
        reason = ("the ownership map allows only the online path (migration: online) but "
                  + "; ".join(f"{g.group_id} is offline_only: {g.reason}" for g in offline))
        held_groups = tuple(replace(g, status=HELD, path=None) if g.path == OFFLINE else g for g in groups)
        return Application(**base, groups=held_groups, status=HELD, path=None, reason=reason, warnings=warnings)
    if rule.migration == OFFLINE:
        path, reason = OFFLINE, "the ownership map asks for the offline path (migration: offline)"
    elif offline:
        path = OFFLINE
        reason = "offline: " + "; ".join(f"{g.group_id} is offline_only ({g.reason})" for g in offline)
    else:
        path, reason = ONLINE, "every group is ready online"
    moved = tuple(replace(g, path=path) if g.status == PENDING else g for g in groups)
    return Application(**base, groups=moved, status=READY, path=path, reason=reason, warnings=warnings)


def select(inventory: GroupInventory, ownership: OwnershipMap, *, apps: Iterable[str] | str | None = None,
           teams: Iterable[str] | str | None = None, prefixes: Iterable[str] | str | None = None,
           readiness: Iterable[str | Readiness] | str | None = None, migration: str = "classic_to_consumer",
           allow_incomplete: bool = False, require_controller: bool = False) -> Selection:
    """The applications of ``inventory`` to migrate by ``migration``, each judged whole (module docstring).

    ``require_controller``: a ready application without ``app_controller`` in the ownership map is held back
    (the fleet DAG stops, starts and rolls applications through their controllers: it cannot move one
    without).

    Filters (None: not filtered by it; the selection's ``scope`` says in words what was chosen): ``apps`` and
    ``teams`` as the ownership map names them (a name it does not know is an error: a typo would silently
    select nothing); ``prefixes``: applications owning at least one group whose id starts with one of them
    (the application comes whole); ``readiness``: an application is selected only when every pending group's
    verdict is one of these (else it is held back, saying so). An empty filter (``[]``, ``""``, a blank
    prefix) is refused: it never means every application. A filter value that matches no group of the
    inventory is named in ``unmatched``. Blocked and unknown groups always hold their application back. An
    inventory that misses brokers' listings raises :class:`IncompleteInventory` unless ``allow_incomplete``.

    :class:`~airflow_provider_kip848.fleet.ownership.OwnershipNotApprovable` when rules of two applications
    match a group of the inventory (whatever the filters: the map is ambiguous), naming every such rule;
    applications whose rules match no group are in ``idle`` (the plan shows them and is not approvable).
    """
    check_migration(migration)
    target = TARGET_TYPE[migration]
    want_apps = _names("applications", "apps", apps, ownership.apps)
    want_teams = _names("teams", "teams", teams, ownership.teams)
    want_prefixes = _given("applications", "prefixes", prefixes)
    ready_filter = _readiness_filter(readiness)
    ids = [e.group_id for e in inventory.entries]
    conflicts = ownership.conflicts(ids)
    idle = ownership.idle(ids)
    if conflicts:
        raise OwnershipNotApprovable(ownership.source, conflicts, idle)
    warnings: list[str] = []
    if not inventory.complete:
        missing = ", ".join(f"node {n}: {e}" for n, e in sorted(inventory.unanswered_brokers.items()))
        if not allow_incomplete:
            raise IncompleteInventory(f"the inventory is not complete ({missing}): groups may be missing from "
                                      "their applications")
        warnings.append(f"the inventory is not complete ({missing}): applications may miss groups")
    warnings += [f"rules[{r.index}] ({r.match}) of application {r.app!r} matches no group of the inventory "
                 "(its other rules do): a typo leaves the groups it was meant for unowned"
                 for r in ownership.dead_rules(ids)]
    by_rule: dict[str, tuple[OwnershipRule, list[PlannedGroup]]] = {}
    unowned: list[str] = []
    for entry in inventory.entries:
        rule = ownership.owner_of(entry.group_id)
        if rule is None:
            unowned.append(entry.group_id)
            continue
        if want_apps is not None and rule.app not in want_apps:
            continue
        if want_teams is not None and rule.team not in want_teams:
            continue
        by_rule.setdefault(rule.app, (rule, []))[1].append(_judge_group(entry, migration, target, ready_filter))
    chosen = []
    for rule, groups in by_rule.values():
        if want_prefixes is not None and not any(g.group_id.startswith(want_prefixes) for g in groups):
            continue
        app = _application(rule, groups)
        if require_controller and app.status == READY and not app.app_controller:
            app = replace(app, status=HELD, path=None,
                          reason="no app_controller in the ownership map: the fleet migration cannot stop, start "
                                 "or roll this application")
        chosen.append(app)
    chosen.sort(key=lambda a: (a.team, a.app))
    owners = [r for r in map(ownership.owner_of, ids) if r is not None]
    unmatched = [f"application {show_id(a)} owns no group of the inventory" for a in sorted(want_apps or ())
                 if not any(r.app == a for r in owners)]
    unmatched += [f"team {show_id(t)} owns no group of the inventory" for t in sorted(want_teams or ())
                  if not any(r.team == t for r in owners)]
    unmatched += [f"prefix {show_id(p)} matches no owned group of the inventory" for p in want_prefixes or ()
                  if not any(g.startswith(p) and ownership.owner_of(g) is not None for g in ids)]
    return Selection(migration=migration, applications=tuple(chosen), unowned=tuple(sorted(unowned)),
                     conflicts=conflicts, inventory_taken_at=inventory.taken_at.isoformat(),
                     inventory_complete=inventory.complete, warnings=tuple(warnings), idle=idle,
                     scope=_scope(want_apps, want_teams, want_prefixes, ready_filter), unmatched=tuple(unmatched),
                     source=ownership.source)


def _scope(apps: frozenset[str] | None, teams: frozenset[str] | None, prefixes: tuple[str, ...] | None,
           readiness: frozenset[Readiness] | None) -> str:
    """The selection in words, for the plan and every wave's approval."""
    parts = []
    if apps is not None:
        parts.append("applications " + ", ".join(sorted(apps)))
    if teams is not None:
        parts.append("teams " + ", ".join(sorted(teams)))
    if prefixes is not None:
        parts.append("applications owning a group starting with " + ", ".join(repr(p) for p in prefixes))
    chosen = " and ".join(parts) if parts else "every application of the ownership map"
    if readiness is not None:
        chosen += " (readiness " + ", ".join(sorted(r.value for r in readiness)) + ")"
    return chosen


__all__ = ["IncompleteInventory", "Selection", "check_migration", "select"]
