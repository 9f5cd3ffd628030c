"""Group sensors: deferrable (the wait runs in the triggerer, no worker slot) or poking.

One base, :class:`KafkaGroupConditionSensor`, evaluates a
:class:`~airflow_provider_kip848.kafka.rules.conditions.GroupCondition`; the named
sensors only build the condition. Both modes return the same JSON result
(``mode`` says which ran), so a DAG does not care which one was used.

A verdict holds only on facts: an answer the coordinator could not give (it
is moving or loading) is polled again, never read as "empty"; an empty group
must stay empty over a settle window; a member that comes back after the
wait forced members out fails the wait, naming it; a coordinator that stays
unavailable (a partition that never loads) fails the wait after
``coordinator_unavailable_minutes`` instead of polling until the timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal, NoReturn, TypedDict, TypeVar

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout

from airflow_provider_kip848.controllers import ApplicationStatus, ControllerError, NamedController, member_instance
from airflow_provider_kip848.engine.offsets import load_snapshot
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.connection import DEFAULT_CONN_ID
from airflow_provider_kip848.hooks.instances import (
    gone_confirmation,
    instances_verdict,
    liveness_window,
    lost_instances_message,
    named_controller,
    task_error,
)
from airflow_provider_kip848.hooks.members import force_out_members
from airflow_provider_kip848.kafka.api import evaluate_condition
from airflow_provider_kip848.kafka.arguments import is_template, parse_flag, parse_number, require_group_id
from airflow_provider_kip848.kafka.errors import Kip848Error
from airflow_provider_kip848.kafka.model import GroupState
from airflow_provider_kip848.kafka.rules.conditions import (
    GroupCondition,
    WaitState,
    follow,
    follow_failure,
)
from airflow_provider_kip848.kafka.rules.lag import (
    MARGIN_FRACTION,
    MARGIN_RECORDS,
    WINDOW_SECONDS,
    baseline_from_snapshot,
)
from airflow_provider_kip848.triggers.group import GroupConditionEvent, GroupWaitCarry, KafkaGroupConditionTrigger

T = TypeVar("T")


class GroupWaitResult(TypedDict):
    """What a group wait returns (its XCom), the same in both modes (``mode`` says which ran)."""

    group_id: str
    condition: dict[str, object]  #: :meth:`GroupCondition.to_dict`
    summary: str
    detail: dict[str, object]  #: the condition's own facts (its shape is the condition kind's)
    polls: int
    mode: Literal["poke", "deferred"]
    met_at: float  #: when it held (epoch s; deferred: the trigger's moment, before the task was resumed)
    members_removed: list[str]  #: the forced-out members' instance (else member) ids
    removed_members: list[dict[str, object]]  #: each removal as audited
    notes: list[str]


#: How often a poking Migrated wait asks the platform for instances that died while the broker side does not hold
#: yet (a controller's status may be an API call: not every poke).
INSTANCE_CHECK_SECONDS = 5.0

#: How long a coordinator may stay unavailable before a wait gives up on it (default).
COORDINATOR_UNAVAILABLE_MINUTES = 5.0

#: The provider's configuration option choosing the waits' mode when a DAG does not (``deferrable=None``).
DEFAULT_DEFERRABLE_SECTION, DEFAULT_DEFERRABLE_OPTION = "kip848", "default_deferrable"


def default_deferrable() -> bool:
    """``[kip848] default_deferrable`` (unset: True), read when a sensor is built with ``deferrable=None``.

    Why True: a wait of a migration lasts minutes (a liveness window, a lag drain), and deferred it holds no
    worker slot; a deployment without a triggerer sets it to False. Why the provider's own section and not
    ``[operators] default_deferrable``: Airflow's default there is False, which would make these waits poke in
    every deployment that never set it. A value that is not clearly true or false fails the DAG's import (never
    a silent default), with the project's strict flag parser.
    """
    value = conf.get(DEFAULT_DEFERRABLE_SECTION, DEFAULT_DEFERRABLE_OPTION, fallback=None)
    if value is None or value == "":
        return True
    return parse_flag(value, f"[{DEFAULT_DEFERRABLE_SECTION}] {DEFAULT_DEFERRABLE_OPTION}")


class KafkaGroupConditionSensor(BaseSensorOperator):
    """Wait until ``condition`` holds for ``group_id``.

    :param deferrable: wait in the triggerer (no worker slot held) instead of poking; None (the default): the
        deployment's ``[kip848] default_deferrable`` (unset: True). An explicit value wins.
    :param poll_interval: seconds between checks (also the poke interval).
    :param audit_log: where the audit record of a forced member removal goes (see ``operators.base``).
    :param remove_members_after: seconds after which remaining members are forced out with
        LeaveGroup (for "wait until empty" of a stopped application whose classic members did not
        leave); None never removes. Streams groups reject LeaveGroup: their members are left to
        expire after ``streams.session.timeout.ms``, and the result says so.
    :param timeout_minutes: templated alternative to ``timeout`` (seconds), e.g. from a DAG Param.
    :param coordinator_unavailable_minutes: fail the wait when the group's coordinator has answered
        nothing but "not available / loading" for this long (a partition that never loads).

    ``poll_interval``, ``remove_members_after``, ``timeout_minutes`` and
    ``coordinator_unavailable_minutes`` are templated, so a DAG can take them from its Params.
    :returns: ``{group_id, condition, summary, detail, polls, mode, members_removed, notes}``
    """

    template_fields: tuple[str, ...] = ("group_id", "kafka_conn_id", "poll_interval", "remove_members_after",
                                        "timeout_minutes", "coordinator_unavailable_minutes", "audit_log")
    ui_color = "#e6f4ea"

    def __init__(
        self,
        *,
        group_id: str,
        condition: GroupCondition | dict[str, object],
        kafka_conn_id: str = DEFAULT_CONN_ID,
        deferrable: bool | None = None,
        poll_interval: float | str = 5.0,
        remove_members_after: float | str | None = None,
        timeout_minutes: float | str | None = None,
        coordinator_unavailable_minutes: float | str = COORDINATOR_UNAVAILABLE_MINUTES,
        audit_log: str | None = None,
        **kwargs: Any,  # Any: BaseSensorOperator's own arguments (task_id, timeout, ...), passed through
    ) -> None:
        kwargs.setdefault("poke_interval", poll_interval if isinstance(poll_interval, (int, float)) else 5.0)
        super().__init__(**kwargs)
        # what can be checked when the DAG is parsed is checked now (templates: when rendered)
        if not is_template(group_id):
            require_group_id(group_id)
        for value, name, optional in ((poll_interval, "poll_interval", False),
                                      (remove_members_after, "remove_members_after", True),
                                      (timeout_minutes, "timeout_minutes", True),
                                      (coordinator_unavailable_minutes, "coordinator_unavailable_minutes", False)):
            if not is_template(value):
                parse_number(value, name, optional=optional)
        self.group_id = group_id
        self.condition = condition if isinstance(condition, GroupCondition) else GroupCondition.from_dict(condition)
        self.kafka_conn_id = kafka_conn_id
        self.deferrable = default_deferrable() if deferrable is None else parse_flag(deferrable, "deferrable")
        self.poll_interval = poll_interval
        self.remove_members_after = remove_members_after
        self.timeout_minutes = timeout_minutes
        self.coordinator_unavailable_minutes = coordinator_unavailable_minutes
        self.audit_log = audit_log
        self._started: float | None = None
        self._polls = 0
        self._removal_done = False
        self._wait = WaitState()
        self._notes: list[str] = []
        self._last_summary = ""

    # -- deferrable ----------------------------------------------------------

    def _apply_templated(self, carried: dict[str, object] | None = None) -> None:
        """Rendered templates arrive as text or numbers: make them the numbers the waits use. ``carried``: the
        condition a deferred wait took through the triggerer (resumed: it is not read from the broker again)."""
        try:
            require_group_id(self.group_id)
            poll_interval = parse_number(self.poll_interval, "poll_interval") or 0.0
            self.poll_interval = self.poke_interval = poll_interval
            self.remove_members_after = parse_number(self.remove_members_after, "remove_members_after", optional=True)
            timeout_minutes = parse_number(self.timeout_minutes, "timeout_minutes", optional=True)
            if timeout_minutes is not None:
                self.timeout = timeout_minutes * 60
            self.coordinator_unavailable_minutes = parse_number(self.coordinator_unavailable_minutes,
                                                                "coordinator_unavailable_minutes") or 0.0
        except Kip848Error as exc:  # bad input: fail now, a retry would repeat it
            raise AirflowFailException(str(exc)) from exc
        if carried is not None:
            self.condition = GroupCondition.from_dict(carried)
        else:
            self.condition = self._condition_riding_out_failures()

    def _build_condition(self) -> GroupCondition:
        """The condition once templates are rendered (sensors with templated thresholds rebuild it; some read the
        broker or the platform for it, e.g. the Migrated wait's liveness window from the group's session timeout)."""
        return self.condition

    def _condition_riding_out_failures(self) -> GroupCondition:
        """:meth:`_build_condition`, asked again while the cluster cannot answer for now.

        Building a condition may read the cluster (a group config), and a wait is often started right when the
        cluster is failing over: a node killed a moment ago can still be the one the client's metadata names for the
        request, and the read times out. That is "not known yet", as a failed poll is: retried with the poll's rules
        (:func:`follow_failure`: a coordinator unavailable for ``coordinator_unavailable_minutes`` in a row, or the
        wait's own timeout, fails it); an error a retry would repeat (bad input, a refusal) fails at once.
        """
        started, failures = time.time(), WaitState()
        while True:
            try:
                return self._build_condition()
            except Kip848Error as exc:
                now = time.time()
                try:
                    follow_failure(exc, failures, now, self._unavailable_limit_s)
                except Kip848Error as fatal:
                    raise AirflowFailException(str(fatal)) from fatal
                if self.timeout and now - started >= float(self.timeout):
                    raise AirflowSensorTimeout(
                        f"Group {self.group_id}: what the wait for {self.condition.describe()} needs could not be "
                        f"read within {self.timeout} s: {exc}") from exc
                self.log.warning("Group %s: %s; asking again.", self.group_id, exc)
                time.sleep(min(max(float(self.poll_interval), 0.5), 5.0))

    @property
    def _unavailable_limit_s(self) -> float:
        return float(self.coordinator_unavailable_minutes) * 60

    def execute(self, context: Context) -> GroupWaitResult:
        started = time.time()
        self._apply_templated()
        if not self.deferrable:
            try:
                result: GroupWaitResult = super().execute(context)
                return result
            except AirflowSensorTimeout as exc:  # say what was last seen, as the deferred wait's timeout does
                raise AirflowSensorTimeout(
                    f"Group {self.group_id} did not reach {self.condition.describe()} within {self.timeout} s "
                    f"(last seen: {self._last_summary or 'never evaluated'}).") from exc
        self.log.info("Waiting in the triggerer for group %s: %s", self.group_id, self.condition.describe())
        self._defer(started, remove=self.remove_members_after is not None, polls=0, wait=WaitState(), notes=[])

    def _defer(self, started: float, *, remove: bool, polls: int, wait: WaitState, notes: list[str]) -> NoReturn:
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
                unavailable_limit_s=self._unavailable_limit_s,
                carry=GroupWaitCarry(started=started, wait=wait.to_dict(), notes=notes,
                                     condition=self.condition.to_dict()),
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=float(self.timeout)) if self.timeout else None,
        )

    def execute_complete(self, context: Context, event: GroupConditionEvent | None = None,
                         **_: object) -> GroupWaitResult:
        if event is None:  # a resume without the trigger's event cannot be judged: never guess
            raise AirflowFailException(f"Waiting for group {self.group_id} failed: resumed without the trigger's "
                                       "event.")
        carry = event["carry"]
        self._apply_templated(carried=carry.get("condition"))
        started = carry.get("started")
        wait = WaitState.from_dict(carry.get("wait"))
        notes = list(carry.get("notes") or [])
        if event["status"] == "met":
            self.log.info("Group %s: %s after %s poll(s).", self.group_id, event["summary"], event["polls"])
            again = self._on_met(context, event["detail"], wait, notes)
            if again is None:
                return self._result(event["summary"], event["detail"], event["polls"], "deferred", wait, notes,
                                    met_at=event["met_at"])
            self.log.info("Group %s: %s; waiting on.", self.group_id, again)
            self._defer(started or time.time(), remove=False, polls=event["polls"], wait=wait, notes=notes)
        if event["status"] == "remove_members_due":
            wait.removed += self._remove_members(context, notes)
            self._defer(started or time.time(), remove=False, polls=event["polls"], wait=wait, notes=notes)
        if event["status"] == "timeout":
            raise AirflowSensorTimeout(
                f"Group {self.group_id} did not reach {self.condition.describe()} within {self.timeout} s "
                f"(last seen: {event['summary']})."
            )
        if event["status"] == "error":
            message = event["message"] + self._who(event.get("members"))
        else:  # an event of no known status: said whole, never taken for a verdict
            message = str(event)
        raise AirflowFailException(f"Waiting for group {self.group_id} failed: {message}")

    # -- poking --------------------------------------------------------------

    def poke(self, context: Context) -> PokeReturnValue:
        if self._started is None:
            self._started = time.time()
        self._polls += 1
        with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
            try:
                raw = evaluate_condition(hook.get_conn(), self.group_id, self.condition)
            except Exception as exc:  # noqa: BLE001 - decided by follow_failure
                try:
                    follow_failure(exc, self._wait, time.time(), self._unavailable_limit_s)
                except Exception as fatal:
                    raise AirflowFailException(str(fatal)) from fatal
                self.log.warning("Group %s: %s; poking again.", self.group_id, exc)
                return PokeReturnValue(is_done=False)
        try:
            result = follow(self.condition, raw, self._wait, time.time())
        except Kip848Error as exc:
            raise AirflowFailException(str(exc) + self._who(getattr(exc, "members", None))) from exc
        self.log.info("Group %s: %s (waiting for %s)", self.group_id, result.summary, self.condition.describe())
        self._last_summary = result.summary
        if result.met:
            again = self._on_met(context, result.detail, self._wait, self._notes)
            if again is None:
                return PokeReturnValue(True, self._result(result.summary, result.detail, self._polls, "poke",
                                                          self._wait, self._notes))
            self.log.info("Group %s: %s; waiting on.", self.group_id, again)
            return PokeReturnValue(is_done=False)
        self._on_unmet(context)
        if (self.remove_members_after is not None and not self._removal_done
                and time.time() - self._started >= float(self.remove_members_after)):
            self._wait.removed += self._remove_members(context, self._notes)
            self._removal_done = True
        return PokeReturnValue(is_done=False)

    # -- shared --------------------------------------------------------------

    def _on_met(self, context: Context, detail: dict[str, object], wait: WaitState, notes: list[str]) -> str | None:
        """A check in the worker once the broker side holds (a controller's word): None to finish, a reason to
        keep waiting; raises to fail the wait."""
        return None

    def _on_unmet(self, context: Context) -> None:
        """A check in the worker while the broker side does not hold (poking only): raises to fail the wait."""

    def _who(self, members: list[dict[str, object]] | None) -> str:
        """What the platform knows of the members a failure names (nothing by default; see the Empty wait)."""
        return ""

    def _remove_members(self, context: Context, notes: list[str]) -> list[dict[str, object]]:
        return force_out_members(context, self.task_id, self.kafka_conn_id, self.group_id, self.audit_log,
                                 self.remove_members_after, notes, self.log)

    def _result(self, summary: str, detail: dict[str, object], polls: int, mode: Literal["poke", "deferred"],
                wait: WaitState, notes: list[str], *, met_at: float | None = None) -> GroupWaitResult:
        """What the wait saw when it held; ``met_at``: when (epoch s; the trigger's moment when deferred, before
        the task was resumed: the end of a processing gap, not of the task)."""
        return GroupWaitResult(group_id=self.group_id, condition=self.condition.to_dict(), summary=summary,
                               detail=detail, polls=polls, mode=mode,
                               met_at=met_at if isinstance(met_at, (int, float)) else time.time(),
                               members_removed=[m.get("instance_id") or m["member_id"] for m in wait.removed],
                               removed_members=wait.removed, notes=notes)


class KafkaGroupStateSensor(KafkaGroupConditionSensor):
    """Wait until the group is in one of ``states`` (e.g. ``["Empty"]``, ``["Stable"]``)."""

    def __init__(self, *, states: list[str] | str, **kwargs: Any) -> None:  # Any: passed to BaseSensorOperator
        names = [states] if isinstance(states, str) else list(states)
        wanted = tuple(GroupState.parse(s, strict=True) for s in names)
        super().__init__(condition=GroupCondition("state", states=wanted), **kwargs)


class KafkaGroupTypeSensor(KafkaGroupConditionSensor):
    """Wait until the group's type is ``group_type`` (``classic``, ``consumer``, ``streams``; templated: a
    DAG's way back whose direction is a Param, checked once rendered)."""

    template_fields = (*KafkaGroupConditionSensor.template_fields, "group_type")

    def __init__(self, *, group_type: str, **kwargs: Any) -> None:  # Any: passed to BaseSensorOperator
        self.group_type = group_type
        super().__init__(condition=GroupCondition("type", group_type="classic" if is_template(group_type)
                                                  else group_type), **kwargs)

    def _build_condition(self) -> GroupCondition:
        try:
            return GroupCondition("type", group_type=str(self.group_type))
        except Kip848Error as exc:  # bad input: fail now, a retry would repeat it
            raise AirflowFailException(str(exc)) from exc


class _ControllerAware:
    """A wait that takes the application's controller (a registry name and a run's arguments) for the
    platform's word on its instances."""

    controller: str | None
    controller_args: dict[str, object] | str | None

    def _named(self) -> NamedController | None:
        try:
            return named_controller(self.controller, self.controller_args)
        except Kip848Error as exc:  # a name or argument the registry refuses: bad input, never retried
            raise AirflowFailException(str(exc)) from exc

    def _ask(self, question: Callable[[NamedController | None], T]) -> T:
        """``question`` asked of the named controller (None when the wait names none), which is closed after; a
        controller's failure fails the task with its retriable flag."""
        named = self._named()
        try:
            return question(named)
        except ControllerError as exc:
            raise task_error(exc) from exc
        finally:
            if named is not None:
                named.close()


class KafkaGroupMigratedSensor(_ControllerAware, KafkaGroupConditionSensor):
    """Wait until the group is ``group_type``, has ``expected_members`` live members, none of them on the other
    protocol, each *proven* alive, and (with a controller) every expected instance running on the platform.

    The coordinator lists a crashed member (Stable, its epoch unchanged) until its session times out, so
    presence proves nothing. Each member must make progress (a committed offset of its partitions advances)
    or stay listed through a liveness window derived from the group's session timeout
    (:func:`~airflow_provider_kip848.hooks.instances.liveness_window`); then the controller's status must show
    every expected instance running and ready, none restarted since ``baseline`` (the status the start task
    recorded). An instance that crashed, restarted or crash-loops fails the wait, named. A controller that
    cannot tell leaves the verdict to the broker, and the result says so.

    :param expected_members: the number of instances the application runs (templated). A member that
        left (a static member that shut down keeps member epoch -2 until its session expires) is not
        counted, so "migrated" is never declared with an instance missing.
    :param controller, controller_args: the application's controller (a registry name; templated).
    :param baseline: the controller's status right after the start or roll (templated: the start task's
        ``status``); None: restarts are not judged.
    :param expected_instances: the instances the platform must show running (templated; a classic Streams
        application has a member per thread, so this can differ from ``expected_members``). None: as many
        as ran right after the start (``baseline``), else ``expected_members``.
    :param liveness: require each member proven alive (templated flag; default true).
    :param liveness_seconds: the liveness window; None: derived from the group's session timeout.
    """

    template_fields = (*KafkaGroupConditionSensor.template_fields, "group_type", "expected_members", "controller",
                       "controller_args", "baseline", "liveness", "liveness_seconds", "expected_instances")

    def __init__(self, *, group_type: str = "consumer", expected_members: int | str = 1,
                 controller: str | None = None, controller_args: dict[str, object] | str | None = None,
                 baseline: dict[str, object] | str | None = None, liveness: bool | str = True,
                 liveness_seconds: float | str | None = None, expected_instances: int | str | None = None,
                 **kwargs: Any) -> None:  # Any: passed to BaseSensorOperator
        self.group_type = group_type
        self.expected_members, self.expected_instances = expected_members, expected_instances
        self.controller, self.controller_args, self.baseline = controller, controller_args, baseline
        self.liveness, self.liveness_seconds = liveness, liveness_seconds
        self._instances_checked = 0.0
        if not is_template(liveness):
            parse_flag(liveness, "liveness")
        first = 1 if is_template(expected_members) else int(
            parse_number(expected_members, "expected_members", minimum=1, integer=True) or 1)
        # a templated group type (an offline DAG's target or its way back) is checked once rendered
        super().__init__(condition=self._migrated(first, "consumer" if is_template(group_type) else group_type),
                         **kwargs)

    def _migrated(self, expected: int, group_type: str | None = None, liveness_s: float = 0.0) -> GroupCondition:
        return GroupCondition("migrated", group_type=group_type or self.group_type, min_members=expected,
                              liveness_s=liveness_s)

    @property
    def _expected(self) -> int:
        return int(parse_number(self.expected_members, "expected_members", minimum=1, integer=True) or 1)

    def _build_condition(self) -> GroupCondition:
        window = 0.0
        if parse_flag(self.liveness, "liveness"):
            given = parse_number(self.liveness_seconds, "liveness_seconds", optional=True)
            if given is not None:
                window = float(given)
            else:
                config = self._ask(lambda named: named.config("classic")
                                   if named is not None and self.group_type == "classic" else None)
                with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
                    window, how = liveness_window(hook, self.group_id, str(self.group_type), config)
                self.log.info("Group %s: a member proves it is alive by progress, or listed through %s",
                              self.group_id, how)
        return self._migrated(self._expected, liveness_s=window)

    def _instances(self, baseline: dict[str, object] | None) -> int:
        given = parse_number(self.expected_instances, "expected_instances", minimum=1, integer=True, optional=True)
        if given is not None:
            return int(given)
        started = ApplicationStatus.from_dict(baseline)
        if started is not None and started.known and started.running:
            return len(started.running)
        return self._expected

    def _on_unmet(self, context: Context) -> None:
        """Poking: an instance that ran at the baseline and died since fails the wait at once, whatever the
        coordinator still lists (its member may expire first, and the wait would only time out). Asked at most
        every :data:`INSTANCE_CHECK_SECONDS`; a deferred wait asks once the broker side holds."""
        baseline = self.baseline if isinstance(self.baseline, dict) else None
        now = time.time()
        if self.controller is None or baseline is None or now - self._instances_checked < INSTANCE_CHECK_SECONDS:
            return
        self._instances_checked = now
        lost = self._ask(lambda named: lost_instances_message(named, baseline))
        if lost is not None:
            raise AirflowFailException(f"Group {self.group_id} is not migrated and will not be: an instance started "
                                       f"for it has died, as the platform says: {lost}. A crashed member stays "
                                       "listed until its session times out; its partitions are not consumed.")

    def _on_met(self, context: Context, detail: dict[str, object], wait: WaitState, notes: list[str]) -> str | None:
        baseline = self.baseline if isinstance(self.baseline, dict) else None
        verdict = self._ask(lambda named: instances_verdict(named, expected=self._instances(baseline),
                                                            baseline=baseline))
        if verdict.outcome == "failed":
            raise AirflowFailException(f"Group {self.group_id} looks migrated to the coordinator, but the platform "
                                       f"says otherwise: {verdict.message}. A crashed member stays listed until its "
                                       "session times out; its partitions are not consumed.")
        if verdict.outcome == "pending":
            return verdict.message
        if verdict.message not in notes:
            notes.append(verdict.message)
        return None


class KafkaGroupLagSensor(KafkaGroupConditionSensor):
    """Wait until the group has caught up (:mod:`~airflow_provider_kip848.kafka.rules.lag`), and say by which rule.

    On a live application the lag is never 0 (records keep arriving between two commits), so "caught up" is:

    * ``baseline``: the lag back at its level before the change: each partition's and the total lag at most
      the lag in ``baseline_snapshot`` (the run's offsets snapshot before the change) plus
      ``lag_margin_fraction`` x it + ``lag_margin_records``, with commits advancing where records arrive;
    * ``not_growing``: over ``lag_window_seconds``, no partition's lag grew beyond that margin, the group
      committed on every partition with records arriving, and the others sit at lag 0 (or their lag before).
      The only rule without a baseline (no snapshot): the result says so. A consumer that stopped never
      passes while records arrive;
    * ``max_lag``: when given, the absolute override: total lag <= ``max_lag``, nothing else.

    A lag that cannot be known (records and no commit, a group that does not exist, offsets that cannot be
    read) is never caught up. The result's ``detail["rule"]`` names the rule that held, its ``summary`` why.

    :param max_lag: the absolute override (templated; None or empty: the rules above).
    :param baseline_snapshot: where the run's offsets snapshot before the change is (templated; None: no
        baseline, the not-growing rule alone). A snapshot that cannot be read fails the wait (not "no baseline").
    :param lag_margin_fraction, lag_margin_records: the margin over a lag before (templated).
    :param lag_window_seconds: the not-growing rule's window (templated).
    :param max_partition_lag: no partition above it, under every rule (None: no cap).
    """

    template_fields = (*KafkaGroupConditionSensor.template_fields, "max_lag", "baseline_snapshot",
                       "lag_margin_fraction", "lag_margin_records", "lag_window_seconds")

    def __init__(self, *, max_lag: int | str | None = None, max_partition_lag: int | None = None,
                 baseline_snapshot: str | None = None, lag_margin_fraction: float | str = MARGIN_FRACTION,
                 lag_margin_records: int | str = MARGIN_RECORDS, lag_window_seconds: float | str = WINDOW_SECONDS,
                 **kwargs: Any) -> None:  # Any: passed to BaseSensorOperator
        self.max_lag = max_lag
        if max_partition_lag is not None:
            max_partition_lag = int(parse_number(max_partition_lag, "max_partition_lag", integer=True) or 0)
        self.max_partition_lag = max_partition_lag
        self.baseline_snapshot = baseline_snapshot
        self.lag_margin_fraction, self.lag_margin_records = lag_margin_fraction, lag_margin_records
        self.lag_window_seconds = lag_window_seconds
        # what can be checked when the DAG is parsed is checked now (templates: when rendered)
        first = self._lag_condition(baseline=None, parse=lambda value, name, **kw: (
            None if is_template(value) else parse_number(value, name, **kw)))
        super().__init__(condition=first, **kwargs)

    def _lag_condition(self, *, baseline: dict[str, int | None] | None,
                       parse: Callable[..., float | None] = parse_number) -> GroupCondition:
        max_lag = parse(self.max_lag, "max_lag", integer=True, optional=True)
        fraction = parse(self.lag_margin_fraction, "lag_margin_fraction")
        records = parse(self.lag_margin_records, "lag_margin_records", integer=True)
        window = parse(self.lag_window_seconds, "lag_window_seconds", minimum=1)
        return GroupCondition("lag", max_lag=None if max_lag is None else int(max_lag),
                              max_partition_lag=self.max_partition_lag, baseline=baseline,
                              margin_fraction=MARGIN_FRACTION if fraction is None else float(fraction),
                              margin_records=MARGIN_RECORDS if records is None else int(records),
                              window_s=WINDOW_SECONDS if window is None else float(window))

    def _build_condition(self) -> GroupCondition:
        try:
            baseline = None
            if parse_number(self.max_lag, "max_lag", integer=True, optional=True) is None and not _absent(
                    self.baseline_snapshot):
                baseline = baseline_from_snapshot(load_snapshot(str(self.baseline_snapshot)))
            condition = self._lag_condition(baseline=baseline)
        except Kip848Error as exc:  # bad input or a snapshot that cannot be read: a retry would repeat it
            if exc.retriable:
                raise
            raise AirflowFailException(str(exc)) from exc
        self.log.info("Group %s: caught up means %s", self.group_id, condition.describe())
        return condition


def _absent(value: object) -> bool:
    return value is None or (isinstance(value, str) and value.strip() in ("", "None"))


def group_seen_by(snapshot_task_id: str) -> str:
    """The template telling a :class:`KafkaGroupEmptySensor` (``allow_absent``) that the group existed before the
    wait: the snapshot task taken before the stop described it (a snapshot of an id the cluster does not know
    fails). Gone after that, it was deleted by the coordinator (Empty, without committed offsets): empty."""
    return f"{{{{ (ti.xcom_pull(task_ids='{snapshot_task_id}') or {{}}).get('group_id') is not none }}}}"


#: Default settle window of an Empty wait: twice the longest default heartbeat interval (classic
#: clients 3 s, the consumer protocol 5 s), so a member still running has rejoined before it ends.
EMPTY_SETTLE_SECONDS = 10.0


class KafkaGroupEmptySensor(_ControllerAware, KafkaGroupConditionSensor):
    """Wait until the group has no members, and keeps none for ``settle_seconds``; a member seen after the
    group was empty fails the wait, named (an instance still runs: a slow consumer's next poll, a process the
    controller did not stop).

    Members left behind are forced out (after ``remove_members_after``) only once the platform confirmed that
    no instance exists: the stop task's ``instances_gone``, and, with a controller, its status at that moment.
    Without that confirmation no member is forced out: they leave when their session times out, and the result
    says so. With a controller, an Empty group whose platform still shows an instance running fails the wait
    (that instance would rejoin), naming it.

    :param settle_seconds: how long the group must stay empty (templated; 0: a single empty poll).
    :param instances_gone: the application's controller confirmed that no instance is left (its stop
        returned ``instances_gone``; templated, parsed strictly). The members left behind are forced out at the
        first poll then (when ``remove_members_after`` is set at all) and the group needs no settle time.
    :param controller, controller_args: the application's controller (a registry name; templated).
    :param allow_absent: a group that does not exist counts as empty (templated flag, parsed strictly). Without
        it, an id the cluster has not listed since the wait began fails the wait (``GroupNotFound`` naming the
        similar ids, with the code points where they differ invisibly): a mistyped id is never "Empty". A group
        seen during the wait and deleted later is empty either way. The offline DAGs pass
        :func:`group_seen_by` their snapshot before the stop.
    """

    template_fields = (*KafkaGroupConditionSensor.template_fields, "settle_seconds", "instances_gone", "controller",
                       "controller_args", "allow_absent")

    def __init__(self, *, settle_seconds: float | str = EMPTY_SETTLE_SECONDS, instances_gone: bool | str = False,
                 controller: str | None = None, controller_args: dict[str, object] | str | None = None,
                 allow_absent: bool | str = False, **kwargs: Any) -> None:  # Any: passed to BaseSensorOperator
        self.settle_seconds = settle_seconds
        for flag, name in ((instances_gone, "instances_gone"), (allow_absent, "allow_absent")):
            if not is_template(flag):
                parse_flag(flag, name)
        self.instances_gone = instances_gone
        self.allow_absent = allow_absent
        self.controller, self.controller_args = controller, controller_args
        first = EMPTY_SETTLE_SECONDS if is_template(settle_seconds) else parse_number(settle_seconds,
                                                                                        "settle_seconds")
        absent = False if is_template(allow_absent) else parse_flag(allow_absent, "allow_absent")
        super().__init__(condition=GroupCondition("empty", settle_s=first or 0.0, allow_absent=absent), **kwargs)

    def _apply_templated(self, carried: dict[str, object] | None = None) -> None:
        try:
            gone = parse_flag(self.instances_gone, "instances_gone")
            absent = parse_flag(self.allow_absent, "allow_absent")
        except Kip848Error as exc:
            raise AirflowFailException(str(exc)) from exc
        super()._apply_templated(carried)
        if gone:  # confirmed by the controller: no wait for members to leave or for the group to settle
            if self.remove_members_after is not None:
                self.remove_members_after = 0.0
            self.condition = GroupCondition("empty", settle_s=0.0, allow_absent=absent)

    def _build_condition(self) -> GroupCondition:
        return GroupCondition("empty", settle_s=parse_number(self.settle_seconds, "settle_seconds") or 0.0,
                              allow_absent=parse_flag(self.allow_absent, "allow_absent"))

    def _platform_status(self) -> ApplicationStatus | None:
        return self._ask(gone_confirmation)

    def _remove_members(self, context: Context, notes: list[str]) -> list[dict[str, object]]:
        """Force out the members left behind, only on the platform's confirmation that no instance exists."""
        status = self._platform_status()
        if status is not None and status.gone is False:
            raise AirflowFailException(
                f"Group {self.group_id}: not forcing out its members: the platform still shows {status.summary()} "
                f"({status.source}). Stop those instances, then rerun.")
        confirmed = status.gone if status is not None else parse_flag(self.instances_gone, "instances_gone")
        if not confirmed:
            why = (f"controller {self.controller!r} cannot tell whether instances exist ({status.reason})"
                   if status is not None else "nothing confirmed that every instance is gone")
            note = (f"members not forced out: {why}; they leave when their session times out (a member forced out "
                    "while its process runs comes back)")
            self.log.warning("Group %s: %s", self.group_id, note)
            if note not in notes:
                notes.append(note)
            return []
        return super()._remove_members(context, notes)

    def _who(self, members: list[dict[str, object]] | None) -> str:
        """The members a failure names, as the platform knows them (the instance each one is), when it can tell."""
        if not members:
            return ""
        try:
            status = self._platform_status()
        except Exception as exc:  # noqa: BLE001 - the failure is reported anyway; this only adds names
            return f" (the controller could not be asked which instances they are: {exc})"
        if status is None or not status.known:
            return ""
        named = [f"{m.get('client_id') or m.get('member_id')} is {inst.describe()}" for m in members
                 if (inst := member_instance(m, status.instances)) is not None]
        running = status.summary()
        return (f" The platform ({status.source}): " + ("; ".join(named) + "; " if named else "") + running + ".")

    def _on_met(self, context: Context, detail: dict[str, object], wait: WaitState, notes: list[str]) -> str | None:
        status = self._platform_status()
        if status is not None and status.gone is False:
            raise AirflowFailException(
                f"Group {self.group_id} is empty, but the platform shows {status.summary()} ({status.source}): "
                "such an instance rejoins at its next heartbeat or poll. Stop it, then rerun.")
        if status is not None and status.gone is None:
            notes.append(f"controller {self.controller!r} cannot tell whether instances exist ({status.reason}): "
                         "Empty rests on the group alone")
        return None
