"""The wait before the first member of a classic group switches to the consumer protocol (the bug windows).

Kafka 4.x before 4.3.3 / 4.4.1 breaks an online upgrade that starts while a
classic group is at generation 0 or rebalancing (KAFKA-21581, KAFKA-21584,
KAFKA-21582: :mod:`~airflow_provider_kip848.kafka.rules.upgrade_window`). The
roll calls :func:`await_upgrade_window` before it starts the first instance on
the consumer protocol (by instance: after that instance stopped, whose leave
may itself start a rebalance; the platform's own roll: once, before it
begins): every group must be Stable at generation >= 1 with no rebalance in
progress. It waits while a group is rebalancing (a rebalance ends within its
members' rebalance timeout) or its facts are unknown for now, and fails at the
deadline saying which group and why; an unknown that waiting cannot resolve (a
refused read of ``__consumer_offsets``) fails at once. Nothing is started on a
guess.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.rules.conditions import TaskLog
from airflow_provider_kip848.kafka.rules.upgrade_window import UPGRADE_BUGS, UpgradeWindow, Window, upgrade_window


class UpgradeWindowShut(Exception):
    """The window did not open in time (or cannot be read): ``what`` says which group and why."""

    def __init__(self, what: str, *, retriable: bool) -> None:
        super().__init__(what)
        self.what, self.retriable = what, retriable


def await_upgrade_window(hook: KafkaGroupAdminHook, group_ids: Sequence[str], *, timeout_s: float, poll_s: float,
                         log: TaskLog) -> dict[str, object]:
    """Until every group of ``group_ids`` may take its first consumer-protocol member (see the module): the
    verdicts and the seconds waited. Raises :class:`UpgradeWindowShut`."""
    started = time.monotonic()
    deadline = started + max(timeout_s, poll_s)
    while True:
        verdicts = [upgrade_window(hook.upgrade_window_facts(g)) for g in group_ids]
        shut = [v for v in verdicts if v.window is not Window.OPEN]
        if not shut:
            return {"groups": {v.group_id: v.to_dict() for v in verdicts},
                    "seconds": round(time.monotonic() - started, 3)}
        refused = [v for v in shut if v.window is Window.UNKNOWN and not v.retriable]
        if refused or time.monotonic() >= deadline:
            raise UpgradeWindowShut(
                "the classic group(s) cannot take their first consumer-protocol member safely: "
                + _named(refused or shut) + f" (waited {time.monotonic() - started:.1f} s; on brokers before "
                f"4.3.3 / 4.4.1 an upgrade then hits {UPGRADE_BUGS}). Nothing was started on the new protocol",
                retriable=not refused)
        for v in shut:
            log.info("Upgrade window of %s: %s (%s), waiting", v.group_id, v.window.value, v.reason)
        time.sleep(poll_s)


def _named(verdicts: Sequence[UpgradeWindow]) -> str:
    return "; ".join(f"{v.group_id}: {v.window.value}, {v.reason}" for v in verdicts)


__all__ = ["UpgradeWindowShut", "await_upgrade_window"]
