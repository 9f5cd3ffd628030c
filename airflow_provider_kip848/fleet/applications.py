"""The planned units of a fleet migration: an :class:`Application` (what moves whole, by one path) and its
:class:`PlannedGroup` s, with the statuses a selection gives them and the target type of each migration.
Plain values: :mod:`.selection` makes them from an inventory, :mod:`.waves` orders them. No I/O."""


from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.inventory import InventoryEntry, Readiness
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
PATH_OF = {Readiness.READY_ONLINE: ONLINE, Readiness.OFFLINE_ONLY: OFFLINE}


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
    app_controller_args: Mapping[str, Any] = field(default_factory=dict)  # Any: registry arguments (YAML values)
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


__all__ = ["HELD", "MIGRATED", "OFFLINE", "ONLINE", "PATH_OF", "PENDING", "READY", "TARGET_TYPE", "Application",
           "PlannedGroup"]
