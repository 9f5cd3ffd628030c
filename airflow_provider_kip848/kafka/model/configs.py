"""Group-level configs (``kafka-configs --entity-type groups``) and the result of changing them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class ConfigEntry:
    """A config value and where it comes from (``DYNAMIC_GROUP_CONFIG``, ``STATIC_BROKER_CONFIG`` ...)."""

    name: str
    value: str | None
    source: str
    sensitive: bool = False

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class GroupConfig:
    """Every group-level config of one group, defaults included (``kafka-configs --describe --all``)."""

    group_id: str
    entries: dict[str, ConfigEntry] = field(default_factory=dict)

    @property
    def dynamic(self) -> dict[str, str | None]:
        """Only the values set for this group (what ``--describe`` without ``--all`` shows)."""
        return {n: e.value for n, e in sorted(self.entries.items()) if e.source == "DYNAMIC_GROUP_CONFIG"}

    def value(self, name: str) -> str | None:
        entry = self.entries.get(name)
        return entry.value if entry else None

    def to_dict(self) -> dict[str, object]:
        return {"group_id": self.group_id, "dynamic": self.dynamic,
                "effective": {n: e.value for n, e in sorted(self.entries.items())}}


@dataclass(frozen=True)
class GroupConfigChange:
    """What an alter of group configs did: the dynamic values before and after, read back from the cluster."""

    group_id: str
    before: dict[str, str | None]
    after: dict[str, str | None]
    requested_set: dict[str, str]
    requested_delete: tuple[str, ...]
    applied: bool
    dry_run: bool
    #: the group's type when the change was planned (None: it did not exist), and the type the configs were set
    #: for when the caller named one explicitly (``for_group_type``: the type the group is becoming)
    group_type: str | None = None
    for_group_type: str | None = None

    @property
    def changed(self) -> dict[str, tuple[str | None, str | None]]:
        keys = set(self.before) | set(self.after)
        return {k: (self.before.get(k), self.after.get(k)) for k in sorted(keys)
                if self.before.get(k) != self.after.get(k)}

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "requested_delete": list(self.requested_delete),
                "changed": {k: list(v) for k, v in self.changed.items()}}
