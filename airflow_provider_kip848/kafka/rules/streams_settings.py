"""Carry a Streams application's assignment settings over to its streams group, never drop them silently.

Under ``group.protocol=streams`` the client-side ``num.standby.replicas``,
``session.timeout.ms`` and ``heartbeat.interval.ms`` are ignored: the group
configs ``streams.num.standby.replicas``, ``streams.session.timeout.ms`` and
``streams.heartbeat.interval.ms`` decide (falling back to the brokers'
``group.streams.*`` defaults: 0 standbys). An application that ran with one
standby replica per task and is switched without carrying the value over loses
its standbys, and with them its fast fail-over, without a word.

:func:`carry_over` decides each value from, in order: what the run asks for
explicitly, the group's current dynamic config (kept as is), the application's
own client setting (carried over), else nothing (the brokers' default applies,
and the plan says which default). Pure: the DAG shows the result as
before -> after in the approval.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

#: group config -> the client settings (Kafka Streams and its embedded consumer) it replaces
CLIENT_KEYS: dict[str, tuple[str, ...]] = {
    "streams.num.standby.replicas": ("num.standby.replicas",),
    "streams.session.timeout.ms": ("session.timeout.ms", "main.consumer.session.timeout.ms",
                                   "consumer.session.timeout.ms"),
    "streams.heartbeat.interval.ms": ("heartbeat.interval.ms", "main.consumer.heartbeat.interval.ms",
                                      "consumer.heartbeat.interval.ms"),
}
#: group config -> the brokers' default it falls back to
BROKER_DEFAULTS = {"streams.num.standby.replicas": "group.streams.num.standby.replicas",
                   "streams.session.timeout.ms": "group.streams.session.timeout.ms",
                   "streams.heartbeat.interval.ms": "group.streams.heartbeat.interval.ms"}


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
               group_dynamic: Mapping[str, str], broker: Mapping[str, str]) -> list[CarriedSetting]:
    """The streams group configs a migration sets, each with its source.

    ``requested``: group config -> value the run asks for (None: carry over); ``application``: the
    application's client properties; ``group_dynamic``: the group's dynamic configs now;
    ``broker``: the brokers' ``group.*`` configs (for the defaults named in the plan).
    """
    app = {str(k).strip(): str(v).strip() for k, v in application.items()}
    out = []
    for config, client_keys in CLIENT_KEYS.items():
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
            out.append(CarriedSetting(config, None, app[client_key], f"application config ({client_key})"))
            continue
        default_key = BROKER_DEFAULTS[config]
        out.append(CarriedSetting(config, None, None, f"broker default ({default_key}="
                                                      f"{broker.get(default_key, 'unknown')})"))
    return out


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
