"""Group sensors: deferrable (the wait runs in the triggerer, no worker slot) or poking.

One base, :class:`KafkaGroupConditionSensor`, evaluates a
:class:`~airflow_provider_kip848.kafka.rules.conditions.GroupCondition`; the named
sensors only build the condition. Both modes return the same JSON result
(``mode`` says which ran), so a DAG does not care which one was used.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout

from airflow_provider_kip848.changecontrol.audit import audit_location, record_changes
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.connection import DEFAULT_CONN_ID
from airflow_provider_kip848.kafka.api import evaluate_condition
from airflow_provider_kip848.kafka.model import GroupState
from airflow_provider_kip848.kafka.rules.conditions import GroupCondition, is_retriable
from airflow_provider_kip848.triggers.group import KafkaGroupConditionTrigger


class KafkaGroupConditionSensor(BaseSensorOperator):
    """Wait until ``condition`` holds for ``group_id``.

    :param deferrable: wait in the triggerer (no worker slot held) instead of poking.
    :param poll_interval: seconds between checks (also the poke interval).
    :param audit_log: where the audit record of a forced member removal goes (see ``operators.base``).
    :param remove_members_after: seconds after which remaining members are forced out with
        LeaveGroup (for "wait until empty" of a stopped application whose classic members did not
        leave); None never removes.
    :param timeout_minutes: templated alternative to ``timeout`` (seconds), e.g. from a DAG Param.

    ``poll_interval``, ``remove_members_after`` and ``timeout_minutes`` are templated, so a DAG can
    take them from its Params.
    :returns: ``{group_id, condition, summary, detail, polls, mode, members_removed}``
    """

    template_fields: tuple[str, ...] = ("group_id", "kafka_conn_id", "poll_interval", "remove_members_after",
                                        "timeout_minutes", "audit_log")
    ui_color = "#e6f4ea"

    def __init__(
        self,
        *,
        group_id: str,
        condition: GroupCondition | dict[str, Any],
        kafka_conn_id: str = DEFAULT_CONN_ID,
        deferrable: bool = False,
        poll_interval: float | str = 5.0,
        remove_members_after: float | str | None = None,
        timeout_minutes: float | str | None = None,
        audit_log: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("poke_interval", poll_interval if isinstance(poll_interval, (int, float)) else 5.0)
        super().__init__(**kwargs)
        self.group_id = group_id
        self.condition = condition if isinstance(condition, GroupCondition) else GroupCondition.from_dict(condition)
        self.kafka_conn_id = kafka_conn_id
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.remove_members_after = remove_members_after
        self.timeout_minutes = timeout_minutes
        self.audit_log = audit_log
        self._started: float | None = None
        self._polls = 0
        self._removal_done = False
        self._removed: list[str] = []

    # -- deferrable ----------------------------------------------------------

    def _apply_templated(self) -> None:
        """Rendered templates arrive as text or numbers: make them the numbers the waits use."""
        self.poll_interval = float(self.poll_interval)
        self.poke_interval = self.poll_interval
        if self.remove_members_after in ("", "None"):
            self.remove_members_after = None
        if self.remove_members_after is not None:
            self.remove_members_after = float(self.remove_members_after)
        if self.timeout_minutes not in (None, "", "None"):
            self.timeout = float(self.timeout_minutes) * 60

    def execute(self, context: Any) -> Any:
        self._apply_templated()
        if not self.deferrable:
            return super().execute(context)
        self.log.info("Waiting in the triggerer for group %s: %s", self.group_id, self.condition.describe())
        self._defer(time.time(), remove=self.remove_members_after is not None, polls=0, removed=[])
        return None  # unreachable: defer() raises TaskDeferred

    def _defer(self, started: float, *, remove: bool, polls: int, removed: list[str]) -> None:
        timeout_at = started + float(self.timeout) if self.timeout else None
        remove_at = None
        if remove and self.remove_members_after is not None:
            remove_at = started + float(self.remove_members_after)
        self.defer(
            trigger=KafkaGroupConditionTrigger(
                kafka_conn_id=self.kafka_conn_id,
                group_id=self.group_id,
                condition=self.condition.to_dict(),
                poll_interval=float(self.poll_interval),
                timeout_at=timeout_at,
                remove_members_at=remove_at,
                polls_before=polls,
                carry={"started": started, "removed": removed},
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=float(self.timeout)) if self.timeout else None,
        )

    def execute_complete(self, context: Any, event: dict[str, Any] | None = None, **_: Any) -> dict[str, Any]:
        self._apply_templated()
        event = event or {}
        status = event.get("status")
        carry = event.get("carry") or {}
        started, removed = carry.get("started"), list(carry.get("removed") or [])
        if status == "met":
            self.log.info("Group %s: %s after %s poll(s).", self.group_id, event.get("summary"), event.get("polls"))
            return self._result(event.get("summary"), event.get("detail"), event.get("polls"), "deferred", removed)
        if status == "remove_members_due":
            removed += self._remove_members(context)
            self._defer(started or time.time(), remove=False, polls=int(event.get("polls") or 0), removed=removed)
        if status == "timeout":
            raise AirflowSensorTimeout(
                f"Group {self.group_id} did not reach {self.condition.describe()} within {self.timeout} s "
                f"(last seen: {event.get('summary')})."
            )
        raise AirflowFailException(f"Waiting for group {self.group_id} failed: {event.get('message', event)}")

    # -- poking --------------------------------------------------------------

    def poke(self, context: Any) -> PokeReturnValue:
        if self._started is None:
            self._started = time.time()
        self._polls += 1
        with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
            try:
                result = evaluate_condition(hook.get_conn(), self.group_id, self.condition)
            except Exception as exc:
                if is_retriable(exc):
                    self.log.warning("Group %s: %s; poking again.", self.group_id, exc)
                    return PokeReturnValue(is_done=False)
                raise AirflowFailException(str(exc)) from exc
        self.log.info("Group %s: %s (waiting for %s)", self.group_id, result.summary, self.condition.describe())
        if result.met:
            return PokeReturnValue(True, self._result(result.summary, result.detail, self._polls, "poke",
                                                      self._removed))
        if (self.remove_members_after is not None and not self._removal_done
                and time.time() - self._started >= float(self.remove_members_after)):
            self._removed = self._remove_members(context)
            self._removal_done = True
        return PokeReturnValue(is_done=False)

    # -- shared --------------------------------------------------------------

    def _remove_members(self, context: Any) -> list[str]:
        with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
            removal = hook.remove_members(self.group_id, all_members=True, missing_ok=True,
                                          reason=f"airflow sensor {self.task_id}: remove_members_after expired")
            if removal.removed:  # a change to the cluster: audited like any operator's
                left = [m["member_id"] for m in hook.describe_group(self.group_id).to_dict()["members"]]
                record_changes(context, self.task_id,
                               [("members", self.group_id, {"members": list(removal.removed)}, {"members": left})],
                               admin=hook, location=audit_location(self.audit_log, hook.extra("audit_log")),
                               log=self.log)
        self.log.warning("Group %s still had members after %s s: removed %s", self.group_id,
                         self.remove_members_after, ", ".join(removal.removed) or "nobody")
        return list(removal.removed)

    def _result(self, summary: Any, detail: Any, polls: Any, mode: str, removed: list[str]) -> dict[str, Any]:
        return {"group_id": self.group_id, "condition": self.condition.to_dict(), "summary": summary,
                "detail": detail, "polls": polls, "mode": mode,
                "members_removed": list(removed)}


class KafkaGroupStateSensor(KafkaGroupConditionSensor):
    """Wait until the group is in one of ``states`` (e.g. ``["Empty"]``, ``["Stable"]``)."""

    def __init__(self, *, states: list[str] | str, **kwargs: Any) -> None:
        names = [states] if isinstance(states, str) else list(states)
        wanted = tuple(GroupState.parse(s, strict=True) for s in names)
        super().__init__(condition=GroupCondition("state", states=wanted), **kwargs)


class KafkaGroupTypeSensor(KafkaGroupConditionSensor):
    """Wait until the group's type is ``group_type`` (``classic``, ``consumer``, ``streams``)."""

    def __init__(self, *, group_type: str, **kwargs: Any) -> None:
        super().__init__(condition=GroupCondition("type", group_type=group_type), **kwargs)


class KafkaGroupMigratedSensor(KafkaGroupConditionSensor):
    """Wait until the group is ``group_type`` and no member speaks the classic protocol any more
    (the end of a rolling KIP-848 upgrade), with at least ``min_members`` members."""

    def __init__(self, *, group_type: str = "consumer", min_members: int = 1, **kwargs: Any) -> None:
        super().__init__(condition=GroupCondition("migrated", group_type=group_type, min_members=min_members), **kwargs)


class KafkaGroupLagSensor(KafkaGroupConditionSensor):
    """Wait until the group's total lag is at most ``max_lag`` (and each partition's at most
    ``max_partition_lag`` when given)."""

    template_fields = (*KafkaGroupConditionSensor.template_fields, "max_lag")

    def __init__(self, *, max_lag: int | str, max_partition_lag: int | None = None, **kwargs: Any) -> None:
        self.max_lag = max_lag
        self.max_partition_lag = max_partition_lag
        super().__init__(condition=self._lag_condition(max_lag if isinstance(max_lag, int) else 0), **kwargs)

    def _lag_condition(self, max_lag: int) -> GroupCondition:
        return GroupCondition("lag", max_lag=max_lag, max_partition_lag=self.max_partition_lag)

    def _apply_templated(self) -> None:
        super()._apply_templated()
        self.condition = self._lag_condition(int(self.max_lag))


class KafkaGroupEmptySensor(KafkaGroupConditionSensor):
    """Wait until the group has no members; with ``remove_members_after`` force out those left."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(condition=GroupCondition("empty"), **kwargs)
