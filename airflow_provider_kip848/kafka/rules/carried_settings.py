"""Carry an application's client settings over to its group's configs, never drop them silently.

Under ``group.protocol=streams`` the client-side ``num.standby.replicas``,
``session.timeout.ms`` and ``heartbeat.interval.ms`` are ignored: the group
configs ``streams.num.standby.replicas``, ``streams.session.timeout.ms`` and
``streams.heartbeat.interval.ms`` decide (falling back to the brokers'
``group.streams.*`` defaults: 0 standbys). Under ``group.protocol=consumer``
(KIP-848) the same holds for the consumer's ``session.timeout.ms`` and
``heartbeat.interval.ms``: ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms`` of the group decide (else the brokers'
``group.consumer.*``, 45 s and 5 s by default). An application switched
without carrying its values over loses its standbys, or fails over at
another speed than it was tuned for, without a word.

:func:`carry_over` decides each value from, in order: what the run asks for
explicitly, the group's current dynamic config (kept as is), the application's
own client setting (carried over, clamped into the brokers' bounds
``group.<type>.min/max.*``, the clamp named), else nothing (the brokers'
default applies, and the plan says which default). Pure: the DAG shows the
result as before -> after in the approval.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

from airflow_provider_kip848.kafka.model import GroupCoordinatorConfig
from airflow_provider_kip848.kafka.rules.group_configs import BOUNDS

#: group config -> the client settings (Kafka Streams and its embedded consumer) it replaces
CLIENT_KEYS: dict[str, tuple[str, ...]] = {
    "streams.num.standby.replicas": ("num.standby.replicas",),
    "streams.session.timeout.ms": ("session.timeout.ms", "main.consumer.session.timeout.ms",
                                   "consumer.session.timeout.ms"),
    "streams.heartbeat.interval.ms": ("heartbeat.interval.ms", "main.consumer.heartbeat.interval.ms",
                                      "consumer.heartbeat.interval.ms"),
}
#: the same for a consumer group (KIP-848): the consumer's own settings
CONSUMER_CLIENT_KEYS: dict[str, tuple[str, ...]] = {
    "consumer.session.timeout.ms": ("session.timeout.ms",),
    "consumer.heartbeat.interval.ms": ("heartbeat.interval.ms",),
}
#: group type -> its carried settings
CARRIED = {"streams": CLIENT_KEYS, "consumer": CONSUMER_CLIENT_KEYS}
#: group config -> the brokers' default it falls back to
BROKER_DEFAULTS = {config: f"group.{config}" for keys in CARRIED.values() for config in keys}


@dataclass(frozen=True)
class CarriedSetting:
    """One group config of the migrated group: its value now, the value it will have, and why."""

    config: str
    current: str | None  # the group's dynamic value now (None: the brokers' default applies)
    value: str | None  # the value to set (None: nothing to set)
    source: str  # "requested", "group config", "application config (<key>)", "broker default (<key>=<v>)"

    @property
    def changes(self) -> bool:
        return self.value is not None and self.value != self.current

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "changes": self.changes}


def carry_over(requested: Mapping[str, object | None], application: Mapping[str, object],
               group_dynamic: Mapping[str, str], broker: Mapping[str, str], *,
               group_type: str = "streams") -> list[CarriedSetting]:
    """The group configs a migration to ``group_type`` (streams or consumer) sets, each with its source.

    ``requested``: group config -> value the run asks for (None: carry over; a requested value is the run's
    own and is checked against the bounds when it is validated, not changed); ``application``: the
    application's client properties; ``group_dynamic``: the group's dynamic configs now; ``broker``: the
    brokers' ``group.*`` configs (their bounds, and the defaults named in the plan).
    """
    if group_type not in CARRIED:
        raise ValueError(f"group_type must be one of {', '.join(CARRIED)}, not {group_type!r}")
    app = {str(k).strip(): str(v).strip() for k, v in application.items()}
    out = []
    for config, client_keys in CARRIED[group_type].items():
        current = group_dynamic.get(config)
        wanted = requested.get(config)
        if wanted is not None and str(wanted).strip() not in ("", "None"):
            out.append(CarriedSetting(config, current, str(wanted).strip(), "requested"))
            continue
        if current is not None:
            out.append(CarriedSetting(config, current, None, "group config"))
            continue
        client_key = next((k for k in client_keys if k in app), None)
        if client_key is not None:
            value, clamp = clamped(config, app[client_key], broker)
            out.append(CarriedSetting(config, None, value, f"application config ({client_key}){clamp}"))
            continue
        default_key = BROKER_DEFAULTS[config]
        out.append(CarriedSetting(config, None, None, f"broker default ({default_key}="
                                                      f"{broker.get(default_key, 'unknown')})"))
    return out


def clamped(config: str, value: str, broker: Mapping[str, str]) -> tuple[str, str]:
    """``value`` moved into the brokers' bounds of ``config`` (``group.<type>.min/max.<name>``, or the
    standby limit), with the clamp said in words ("" when it is inside, or is not a whole number: the
    validation names that one)."""
    try:
        number = int(value)
    except ValueError:
        return value, ""
    low, high = BOUNDS.get(config, (None, None))
    brokers = GroupCoordinatorConfig(0, dict(broker))
    for bound, below, word in ((low, True, "minimum"), (high, False, "maximum")):
        if bound is None:
            continue
        limit = bound if isinstance(bound, int) else brokers.int_value(bound)
        if limit is not None and (number < limit if below else number > limit):
            where = str(bound) if isinstance(bound, int) else f"{bound}={limit}"
            return str(limit), f", {value} clamped to the brokers' {word} ({where})"
    return value, ""



def to_set(settings: list[CarriedSetting]) -> dict[str, str]:
    """The group configs to write (those with a value)."""
    return {s.config: s.value for s in settings if s.value is not None}


#: the client's own default of each setting (Kafka Streams and its embedded consumer)
CLIENT_DEFAULTS = {"num.standby.replicas": "0", "session.timeout.ms": "45000", "heartbeat.interval.ms": "3000"}


def carry_back(application: Mapping[str, object], group_dynamic: Mapping[str, str],
               broker: Mapping[str, str]) -> list[CarriedSetting]:
    """The way back (streams -> classic): each assignment setting the streams group uses now (its dynamic
    config, else the brokers' default) against what the classic application will use (its own client
    setting, else the client's default). ``config`` is the client setting; ``current`` the streams group's
    value; ``value`` the classic application's. A change (e.g. standbys carried over as a group config that
    the application config never had) is shown in the plan; it is the application's config to fix.
    """
    app = {str(k).strip(): str(v).strip() for k, v in application.items()}
    out = []
    for config, client_keys in CLIENT_KEYS.items():
        now = group_dynamic.get(config, broker.get(BROKER_DEFAULTS[config]))
        client_key = next((k for k in client_keys if k in app), None)
        if client_key is not None:
            out.append(CarriedSetting(client_keys[0], now, app[client_key], f"application config ({client_key})"))
        else:
            default = CLIENT_DEFAULTS[client_keys[0]]
            out.append(CarriedSetting(client_keys[0], now, default, f"client default ({client_keys[0]}={default})"))
    return out
