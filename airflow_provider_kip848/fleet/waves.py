"""Selecting applications from an inventory and planning them into waves.

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

:func:`plan_waves` orders the ready applications: a canary wave of the
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
from dataclasses import dataclass, field, replace
from typing import Any

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
from airflow_provider_kip848.kafka.rules.readiness import MIGRATIONS

#: migration -> the group type a migrated group has
TARGET_TYPE: dict[str, GroupType] = {
    "classic_to_consumer": GroupType.CONSUMER,
    "consumer_to_classic": GroupType.CLASSIC,
    "classic_to_streams": GroupType.STREAMS,
    "streams_to_classic": GroupType.CLASSIC,
}
assert set(TARGET_TYPE) == set(MIGRATIONS), "every migration of the readiness rules has a target type"

#: a group's status in a selection
PENDING, MIGRATED, HELD = "pending", "migrated", "held"
#: an application's status in a selection
READY = "ready"
ONLINE, OFFLINE = "online", "offline"
_PATH_OF = {Readiness.READY_ONLINE: ONLINE, Readiness.OFFLINE_ONLY: OFFLINE}


class IncompleteInventory(Kip848Error):
    """The inventory misses brokers' listings: groups may be missing from their applications."""

    retriable = True
    remedy = ("Take the inventory again once every broker answers, or pass allow_incomplete=True to plan "
              "knowing that an application may be migrated without some of its groups.")


@dataclass(frozen=True)
class PlannedGroup:
    """One group of an application: its facts, its verdict on the migration, and what the plan does with it.

    ``status``: ``pending`` (to migrate), ``migrated`` (already on the target type), ``held``.
    ``readiness``/``reason``/``remedy``: the group's verdict on the migration (None: no verdict applies).
    ``path``: the path it takes (its application's; None unless pending). ``entry``: the inventory entry.
    """

    group_id: str
    type: str
    state: str
    member_count: int | None
    status: str
    readiness: str | None
    reason: str
    remedy: str = ""
    path: str | None = None
    entry: InventoryEntry | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, object]:
        return {"group_id": self.group_id, "type": self.type, "state": self.state, "member_count": self.member_count,
                "status": self.status, "readiness": self.readiness, "path": self.path, "reason": self.reason,
                "remedy": self.remedy}

    def _canonical(self) -> dict[str, Any]:
        return {"group_id": self.group_id, "readiness": self.readiness, "path": self.path}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlannedGroup:  # Any: JSON read back (XCom, a file, a response)
        """The group as :meth:`to_dict` wrote it (an XCom); without its inventory entry."""
        try:
            return cls(group_id=str(data["group_id"]), type=str(data["type"]), state=str(data["state"]),
                       member_count=data.get("member_count"), status=str(data["status"]),
                       readiness=data.get("readiness"), reason=str(data.get("reason") or ""),
                       remedy=str(data.get("remedy") or ""), path=data.get("path"))
        except (KeyError, TypeError) as exc:
            raise InvalidArgument(f"not a planned group: {data!r} ({exc})") from None


@dataclass(frozen=True)
class Application:
    """An application of the ownership map with its groups in the inventory (sorted by id).

    ``status``: ``ready`` (``path`` says how it moves), ``held`` (``reason`` says why: the whole
    application waits), ``migrated`` (every group is on the target type). ``reason`` of a ready
    application says why its path is what it is. ``warnings``: facts an approver should see (members
    differing from ``expected_instances`` ...), no reason to hold it back.
    """

    app: str
    team: str
    rule_index: int
    groups: tuple[PlannedGroup, ...]
    status: str
    path: str | None
    reason: str
    app_controller: str | None = None
    app_controller_args: Mapping[str, Any] = field(default_factory=dict)
    expected_instances: int | None = None
    forced_path: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def pending(self) -> tuple[PlannedGroup, ...]:
        """The groups this application's migration moves."""
        return tuple(g for g in self.groups if g.status == PENDING)

    @property
    def size(self) -> int:
        """Pending groups: what a failure of this application costs, and what counts against a wave's limit."""
        return len(self.pending)

    @property
    def group_ids(self) -> tuple[str, ...]:
        return tuple(g.group_id for g in self.groups)

    def to_dict(self) -> dict[str, object]:
        return {"app": self.app, "team": self.team, "rule_index": self.rule_index, "status": self.status,
                "path": self.path, "reason": self.reason, "app_controller": self.app_controller,
                "app_controller_args": dict(self.app_controller_args),
                "expected_instances": self.expected_instances, "forced_path": self.forced_path,
                "warnings": list(self.warnings), "groups": [g.to_dict() for g in self.groups]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Application:  # Any: JSON read back (XCom, a file, a response)
        """The application as :meth:`to_dict` wrote it (an XCom)."""
        try:
            return cls(app=str(data["app"]), team=str(data["team"]), rule_index=int(data["rule_index"]),
                       groups=tuple(PlannedGroup.from_dict(g) for g in data["groups"]), status=str(data["status"]),
                       path=data.get("path"), reason=str(data.get("reason") or ""),
                       app_controller=data.get("app_controller"),
                       app_controller_args=dict(data.get("app_controller_args") or {}),
                       expected_instances=data.get("expected_instances"), forced_path=data.get("forced_path"),
                       warnings=tuple(data.get("warnings") or ()))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgument(f"not an application: {data!r} ({exc})") from None

    def _canonical(self) -> dict[str, Any]:
        return {"app": self.app, "team": self.team, "path": self.path, "app_controller": self.app_controller,
                "app_controller_args": dict(self.app_controller_args),
                "expected_instances": self.expected_instances,
                "groups": [g._canonical() for g in self.pending]}


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


def _check_migration(migration: str) -> None:
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
    if verdict.readiness not in _PATH_OF:
        return PlannedGroup(**facts, status=HELD, **common)
    if readiness is not None and verdict.readiness not in readiness:
        return PlannedGroup(**facts, status=HELD, readiness=verdict.readiness.value,
                            reason=f"{verdict.readiness.value}, outside the selection's readiness filter "
                                   f"({', '.join(sorted(r.value for r in readiness))})", remedy="")
    return PlannedGroup(**facts, status=PENDING, path=_PATH_OF[verdict.readiness], **common)


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
    _check_migration(migration)
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


# -- waves ---------------------------------------------------------------------------------------


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
        stops, starts or rolls each), groups, readiness and path."""
        kind = "canary wave" if self.canary else "wave"
        lines = [f"### Wave {self.number} ({kind}): {len(self.applications)} application(s), "
                 f"{self.group_count} group(s), {self.migration}", ""]
        if self.oversized:
            lines += [f"**Oversized**: application {self.applications[0].app!r} alone has more groups than the "
                      "blast-radius limit; it moves whole, in a wave of its own.", ""]
        lines += ["| application | team | path | controller | group | type / state | members | readiness |",
                  "|---|---|---|---|---|---|---|---|"]
        for a in self.applications:
            controller = _md(a.app_controller or "-") + (f" {_md(str(dict(a.app_controller_args)))}"
                                                         if a.app_controller_args else "")
            for g in a.pending:
                lines.append(f"| {_md(a.app)} | {_md(a.team)} | {a.path} | {controller} | `{g.group_id}` | "
                             f"{g.type} / {g.state} | {'-' if g.member_count is None else g.member_count} | "
                             f"{g.readiness} |")
        notes = [f"- **{_md(a.app)}**: {_md(a.reason)}" for a in self.applications if a.path == OFFLINE]
        notes += [f"- **{_md(a.app)}**: already migrated: "
                  + ", ".join(f"`{g.group_id}`" for g in a.groups if g.status == MIGRATED)
                  for a in self.applications if any(g.status == MIGRATED for g in a.groups)]
        notes += [f"- **{_md(a.app)}**: {_md(w)}" for a in self.applications for w in a.warnings]
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
        Long lists of skipped applications and unowned groups show their first ``max_listed``."""
        lim = self.limits
        lines = [f"## Fleet plan: {self.migration}", "",
                 f"{len(self.waves)} wave(s), {len(self.applications)} application(s), {len(self.group_ids)} "
                 f"group(s); {len(self.held_back)} held back, {len(self.migrated)} already migrated, "
                 f"{len(self.unowned)} unowned group(s).", "",
                 f"Limits: canary {lim.canary} application(s), {lim.wave_size} application(s) per wave, at most "
                 f"{lim.max_groups_per_wave if lim.max_groups_per_wave is not None else 'any number of'} group(s) "
                 f"per wave, {lim.parallelism} at once. Inventory taken at {self.inventory_taken_at or '-'}"
                 + ("." if self.inventory_complete else " (**not complete**)."), ""]
        if self.scope:
            lines += [f"Selection: {_md(self.scope)}.", ""]
        if self.blockers:
            lines += ["### Not approvable: fix the ownership map", "",
                      *[f"- {_md(b)}" for b in self.blockers], ""]
        if self.unmatched:
            lines += ["**Matched nothing**", "", *[f"- {_md(u)}" for u in self.unmatched], ""]
        if self.scope and not (self.waves or self.held_back or self.migrated):
            lines += [f"**Nothing selected**: {_md(self.scope)} chose no application of this inventory.", ""]
        if self.warnings:
            lines += ["**Warnings**", "", *[f"- {_md(w)}" for w in self.warnings], ""]
        for w in self.waves:
            lines += [w.render_markdown(), ""]
        if self.held_back:
            lines += ["### Held back", "", "| application | team | groups | why | what to do |",
                      "|---|---|---|---|---|"]
            for a in self.held_back:
                remedies = sorted({g.remedy for g in a.groups if g.status == HELD and g.remedy})
                lines.append(f"| {_md(a.app)} | {_md(a.team)} | "
                             + ", ".join(f"`{g.group_id}`" for g in a.groups)
                             + f" | {_md(a.reason)} | {_md(' '.join(remedies)) or '-'} |")
            lines.append("")
        if self.migrated:
            names = [a.app for a in self.migrated]
            lines += ["### Already migrated (skipped)", "",
                      ", ".join(names[:max_listed]) + (f" and {len(names) - max_listed} more"
                                                       if len(names) > max_listed else ""), ""]
        if self.unowned:
            lines += ["### Unowned groups (no ownership rule: never migrated)", "",
                      ", ".join(f"`{g}`" for g in self.unowned[:max_listed])
                      + (f" and {len(self.unowned) - max_listed} more" if len(self.unowned) > max_listed else ""),
                      ""]
        lines += [f"Plan hash: `{self.plan_hash}`"]
        return "\n".join(lines)


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _as_selection(selection: Selection | Iterable[Application], migration: str | None) -> Selection:
    if isinstance(selection, Selection):
        if migration is not None and migration != selection.migration:
            raise InvalidArgument(f"migration {migration!r} differs from the selection's {selection.migration!r}")
        sel = selection
    else:
        if migration is None:
            raise InvalidArgument("plan_waves of applications alone needs migration=...")
        _check_migration(migration)
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


__all__ = ["HELD", "MIGRATED", "OFFLINE", "ONLINE", "PENDING", "READY", "TARGET_TYPE", "Application",
           "IncompleteInventory", "PlannedGroup", "Selection", "Wave", "WaveLimits", "WavePlan", "plan_waves",
           "select"]
