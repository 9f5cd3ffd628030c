"""Validate group-level config changes against the broker's own bounds, before anything is sent.

Group configs (``kafka-configs --entity-type groups``) override the broker's
``group.*`` defaults for one group, but only inside the ``group.*.min.*`` /
``group.*.max.*`` bounds of the broker, and a session timeout must stay above
the heartbeat interval. The broker enforces this too; checking first means a
DAG fails at its validation step, with the bounds in the message, instead of
at the change step, and a whole batch of changes is refused before any of it
is applied.

The known config names come from the broker itself (``describe --all`` of a
group lists every group config of that broker version), so a 4.2 broker that
lacks ``consumer.assignment.interval.ms`` refuses it here too.

A group config applies to one group type, named by its prefix (``consumer.*``
to consumer groups, ``streams.*`` to streams groups, ``share.*`` to share
groups; a classic group takes none). Kafka stores any of them on any group id
and the setting then silently never applies, so :func:`require_applicable`
refuses a set of another type's key. A migration legitimately sets the configs
of the type a group is *becoming* (a classic group's consumer.* timeouts before
its roll to the consumer protocol): it says so with ``for_group_type``, which
the result (and so the approval) carries. A group that does not exist yet has
no type: the configs set for it (pre-configuring) must all be of one type,
which is then the type it is expected to have, reported as its
``for_group_type``; configs of two types are refused (one of them can never
apply). Deleting an override is always allowed (it removes a setting, whatever
its type).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from airflow_provider_kip848.kafka.errors import (
    ConfigNotApplicable,
    ConfigOutOfBounds,
    ConfigUnknown,
    InvalidArgument,
    InvalidGroupConfig,
)
from airflow_provider_kip848.kafka.model import (
    ConfigEntry,
    GroupConfig,
    GroupConfigChange,
    GroupCoordinatorConfig,
    GroupType,
)

#: A bound is a broker config name or a literal int (None: unbounded).
Bound = str | int | None


def _broker_bounds(config: str) -> tuple[Bound, Bound]:
    """``consumer.session.timeout.ms`` -> the broker's ``group.consumer.min/max.session.timeout.ms``."""
    protocol, _, name = config.partition(".")
    return f"group.{protocol}.min.{name}", f"group.{protocol}.max.{name}"


#: group config -> (lower bound, upper bound), as the broker's GroupConfigManager checks them.
BOUNDS: dict[str, tuple[Bound, Bound]] = {
    **{config: _broker_bounds(config) for config in (
        "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "consumer.assignment.interval.ms",
        "share.session.timeout.ms", "share.heartbeat.interval.ms", "share.record.lock.duration.ms",
        "share.delivery.count.limit", "share.partition.max.record.locks", "share.assignment.interval.ms",
        "streams.session.timeout.ms", "streams.heartbeat.interval.ms", "streams.assignment.interval.ms",
    )},
    "streams.num.standby.replicas": (0, "group.streams.max.standby.replicas"),
    "streams.initial.rebalance.delay.ms": (0, None),
}

ENUMS: dict[str, tuple[str, ...]] = {
    "share.isolation.level": ("read_committed", "read_uncommitted"),
}
BOOLEANS = frozenset({"share.renew.acknowledge.enable"})

#: session timeout -> heartbeat interval of the same protocol (session must stay greater).
SESSION_HEARTBEAT = {
    "consumer.session.timeout.ms": "consumer.heartbeat.interval.ms",
    "streams.session.timeout.ms": "streams.heartbeat.interval.ms",
    "share.session.timeout.ms": "share.heartbeat.interval.ms",
}


#: a group config's prefix -> the group type it applies to (a classic group takes none of them)
CONFIG_GROUP_TYPES = {"consumer": GroupType.CONSUMER, "streams": GroupType.STREAMS, "share": GroupType.SHARE}
#: what ``for_group_type`` may name
GROUP_TYPE_NAMES = ("classic", "consumer", "streams", "share")


def config_group_type(name: str) -> GroupType | None:
    """The group type ``name`` applies to (``streams.num.standby.replicas`` -> streams), None for no known prefix."""
    return CONFIG_GROUP_TYPES.get(name.partition(".")[0])


def parse_group_type(value: object, name: str = "for_group_type") -> GroupType | None:
    """``for_group_type`` as a :class:`GroupType`; None, empty text and the text a template renders for None mean
    "not given"; anything but classic, consumer, streams or share is refused (never read as "not given")."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
        return None
    if isinstance(value, GroupType) and value is not GroupType.UNKNOWN:
        return value
    if isinstance(value, str) and value in GROUP_TYPE_NAMES:
        return GroupType(value)
    raise InvalidArgument(f"{name} must be one of {', '.join(GROUP_TYPE_NAMES)} (or not given), not {value!r}.",
                          remedy=f"Pass {name}='consumer' (or 'streams', 'share'): the type the group has or is "
                                 "becoming.")


def require_applicable(group_id: str, set_names: Iterable[str], group_type: GroupType | None,
                       for_group_type: GroupType | None) -> GroupType | None:
    """The type the configs ``set_names`` are set for, or :class:`ConfigNotApplicable` for a key of another type.

    ``group_type``: the group's type now (None: the group does not exist); ``for_group_type``: the type the
    caller names explicitly (the type the group is becoming, or will have when it is first started), which
    decides over ``group_type``. With neither (a group not created yet), the keys' own type is the expected
    one: keys of two types are refused.
    """
    names = sorted(set_names)
    target = for_group_type or group_type
    if not names:
        return target
    by_type = ", ".join(f"{n} ({t.value if (t := config_group_type(n)) else 'no group type'})" for n in names)
    if target is None:
        types = {t for n in names if (t := config_group_type(n)) is not None}
        if len(types) != 1 or any(config_group_type(n) is None for n in names):
            raise ConfigNotApplicable(
                f"Group {group_id!r} does not exist yet, and these configs are for different group types, so "
                f"some of them can never apply: {by_type}.",
                remedy="Set only the configs of the type the group will have when its application first starts "
                       "(and name it with for_group_type).")
        target = types.pop()
    if target in (GroupType.CLASSIC, GroupType.UNKNOWN):
        if for_group_type is not None:  # the caller's type decides (parse_group_type refuses these two for it)
            now = f"is set as a {target.value} group (for_group_type={target.value})"
        elif group_type is GroupType.UNKNOWN:
            now = "is of a group type this provider cannot read (unknown)"
        else:
            now = f"is a {group_type.value} group" if group_type is not None else "is to be a classic group"
        raise ConfigNotApplicable(
            f"Group {group_id!r} {now}, which takes no group configs: {by_type} would be stored and never apply.",
            remedy="If the group is about to move to the consumer or streams protocol (a migration carrying its "
                   "settings over), pass for_group_type='consumer' or 'streams': the type it is becoming, shown "
                   "with the change.")
    wrong = [n for n in names if config_group_type(n) is not target]
    if wrong:
        shown = ", ".join(f"{n} ({t.value if (t := config_group_type(n)) else 'no group type'})" for n in wrong)
        told = "" if for_group_type is None or for_group_type is group_type else f" (for_group_type={target.value})"
        raise ConfigNotApplicable(
            f"Group {group_id!r} is set as a {target.value} group{told}, and these configs apply to another "
            f"group type, so they would be stored and never apply: {shown}.",
            remedy=f"Set {target.value}.* configs only; if the group is becoming another type, pass that type as "
                   "for_group_type.")
    return target


def _bound(value: Bound, coordinator: GroupCoordinatorConfig) -> tuple[int | None, str]:
    if value is None:
        return None, ""
    if isinstance(value, int):
        return value, str(value)
    return coordinator.int_value(value), value


def validate_changes(
    group_id: str,
    set_configs: Mapping[str, object],
    delete_configs: Iterable[str],
    *,
    current: Mapping[str, ConfigEntry],
    coordinator: GroupCoordinatorConfig,
) -> dict[str, str]:
    """Check a batch of changes; return the values to set as strings, or raise for the first bad one.

    ``current`` is the group's full config (``describe --all``), which names
    every group config the broker knows and gives the effective values the
    session/heartbeat rule is checked against after the change.
    """
    known = sorted(current)
    normalized: dict[str, str] = {}
    for name in [*set_configs, *delete_configs]:
        if name not in current:
            raise ConfigUnknown(
                f"{name!r} is not a group config of this broker (group {group_id!r}); "
                f"group configs: {', '.join(known)}."
            )
    for name, raw in set_configs.items():
        normalized[name] = _check_value(name, raw, coordinator)
    effective = {n: e.value for n, e in current.items()}
    for name in delete_configs:
        # a deleted override falls back to the broker default, which the entry's synonyms name
        default = current[name]
        effective[name] = _broker_value_for(name, coordinator, default.value)
    effective.update(normalized)
    for session, heartbeat in SESSION_HEARTBEAT.items():
        if session in effective and heartbeat in effective and (session in normalized or heartbeat in normalized):
            s, h = _as_int(effective[session]), _as_int(effective[heartbeat])
            if s is not None and h is not None and s <= h:
                raise ConfigOutOfBounds(
                    f"{session}={s} must be greater than {heartbeat}={h} for group {group_id!r}."
                )
    return normalized


def _broker_value_for(name: str, coordinator: GroupCoordinatorConfig, fallback: str | None) -> str | None:
    return coordinator.values.get(f"group.{name}", fallback)


def _as_int(value: object) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def _check_value(name: str, raw: object, coordinator: GroupCoordinatorConfig) -> str:
    if name in BOOLEANS:
        text = str(raw).strip().lower()
        if text in ("true", "false"):
            return text
        raise ConfigOutOfBounds(f"{name}={raw!r} must be true or false.")
    if name in ENUMS:
        text = str(raw).strip()
        if text not in ENUMS[name]:
            raise ConfigOutOfBounds(f"{name}={raw!r} must be one of {', '.join(ENUMS[name])}.")
        return text
    if name == "share.auto.offset.reset":
        text = str(raw).strip()
        if text in ("earliest", "latest") or text.startswith("by_duration:"):
            return text
        raise ConfigOutOfBounds(f"{name}={raw!r} must be earliest, latest or by_duration:<ISO-8601 duration>.")
    if name in BOUNDS:
        value = None if isinstance(raw, (bool, float)) else _as_int(raw)
        if value is None:
            raise ConfigOutOfBounds(f"{name}={raw!r} is not an integer.")
        lo_raw, hi_raw = BOUNDS[name]
        lo, lo_name = _bound(lo_raw, coordinator)
        hi, hi_name = _bound(hi_raw, coordinator)
        allowed = f"allowed {lo if lo is not None else '-inf'}..{hi if hi is not None else 'inf'}"
        if lo is not None and value < lo:
            source = f" (broker {lo_name}={lo})" if lo_name != str(lo) else ""
            raise ConfigOutOfBounds(f"{name}={value} is below the minimum{source}; {allowed}.")
        if hi is not None and value > hi:
            source = f" (broker {hi_name}={hi})" if hi_name != str(hi) else ""
            raise ConfigOutOfBounds(f"{name}={value} is above the maximum{source}; {allowed}.")
        return str(value)
    return str(raw)


@dataclass(frozen=True)
class ConfigChangePlan:
    """What an alter must send: only the values that differ and the overrides that exist."""

    group_id: str
    before: GroupConfig
    normalized: dict[str, str]
    requested_delete: tuple[str, ...]
    to_set: dict[str, str]
    to_delete: tuple[str, ...]
    #: the group's type when planned (None: the group does not exist) and the type the configs are set for
    group_type: str | None = None
    for_group_type: str | None = None

    @property
    def noop(self) -> bool:
        return not self.to_set and not self.to_delete

    def result(self, after: Mapping[str, str | None], *, applied: bool, dry_run: bool) -> GroupConfigChange:
        return GroupConfigChange(self.group_id, self.before.dynamic, dict(after), self.normalized,
                                 self.requested_delete, applied=applied, dry_run=dry_run,
                                 group_type=self.group_type, for_group_type=self.for_group_type)

    def is_applied(self, dynamic: Mapping[str, str | None]) -> bool:
        return (all(dynamic.get(k) == v for k, v in self.to_set.items())
                and not any(k in dynamic for k in self.to_delete))

    def unchanged(self, *, dry_run: bool) -> GroupConfigChange:
        return self.result(self.before.dynamic, applied=False, dry_run=dry_run)


def plan_config_change(
    before: GroupConfig,
    set_configs: Mapping[str, object] | None,
    delete_configs: Iterable[str],
    coordinator: GroupCoordinatorConfig,
) -> ConfigChangePlan:
    """Validate a change against the group's current config and the broker's bounds; drop what is in place."""
    if set_configs is not None and not isinstance(set_configs, Mapping):
        raise InvalidGroupConfig(
            f"set_configs must be a mapping of config name to value, not {type(set_configs).__name__} {set_configs!r}.",
            remedy='Pass e.g. {"streams.num.standby.replicas": 1}.')
    if isinstance(delete_configs, (str, bytes)) or delete_configs is None:
        raise InvalidGroupConfig(f"delete_configs must be a list of config names, not {delete_configs!r}.",
                                 remedy=f"Pass a list, e.g. [{delete_configs!r}].")
    set_configs = dict(set_configs or {})
    delete_configs = tuple(delete_configs)
    overlap = set(set_configs) & set(delete_configs)
    if overlap:
        raise InvalidGroupConfig(f"Configs both set and deleted: {', '.join(sorted(overlap))}.")
    normalized = validate_changes(before.group_id, set_configs, delete_configs, current=before.entries,
                                  coordinator=coordinator)
    return ConfigChangePlan(
        group_id=before.group_id,
        before=before,
        normalized=normalized,
        requested_delete=delete_configs,
        to_set={k: v for k, v in normalized.items() if before.dynamic.get(k) != v},
        to_delete=tuple(k for k in delete_configs if k in before.dynamic),
    )
