"""The group sensors' base: one sensor, :class:`KafkaGroupConditionSensor`, that evaluates a
:class:`~airflow_provider_kip848.kafka.rules.conditions.GroupCondition`, deferrable (the wait runs in the
triggerer, no worker slot) or poking, and returns the same JSON result either way (``mode`` says which ran).
The named sensors (:mod:`airflow_provider_kip848.sensors.group`) only build the condition.

A verdict holds only on facts: an answer the coordinator could not give (it
is moving or loading) is polled again, never read as "empty"; an empty group
must stay empty over a settle window; a member that comes back after the
wait forced members out fails the wait, naming it; a coordinator that stays
unavailable (a partition that never loads) fails the wait after
``coordinator_unavailable_minutes`` instead of polling until the timeout.

A wait that knows its application's instances (a controller and a baseline:
the Migrated, lag and Empty waits) also watches the platform through the whole
wait, every ``platform_check_seconds``, in both modes: poking, the worker looks
between pokes; deferred, the trigger looks from the triggerer
(:mod:`airflow_provider_kip848.triggers.platform`). What the look finds (an
instance of the start lost; for Empty, one running again) fails the wait at
once, named, with the same message in both modes.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta
from typing import Any, Literal, NoReturn, TypedDict

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout

from airflow_provider_kip848.controllers import ControllerError
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.audit import complete_earlier_tries, is_retry
from airflow_provider_kip848.hooks.connection import DEFAULT_CONN_ID
from airflow_provider_kip848.hooks.instances import task_error
from airflow_provider_kip848.hooks.members import force_out_members
from airflow_provider_kip848.hooks.platform_watch import PLATFORM_CHECK_SECONDS, PlatformWatch
from airflow_provider_kip848.kafka.api import evaluate_condition
from airflow_provider_kip848.kafka.arguments import is_template, parse_flag, parse_number, require_group_id
from airflow_provider_kip848.kafka.errors import Kip848Error
from airflow_provider_kip848.kafka.rules.conditions import (
    GroupCondition,
    WaitState,
    follow,
    follow_failure,
)
from airflow_provider_kip848.triggers.group import GroupConditionEvent, GroupWaitCarry, KafkaGroupConditionTrigger


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


#: How often a wait asks the platform while it waits, by default (``platform_check_seconds``; a controller's
#: status may be a command or an API call: not every poll). The name it had when only a poking Migrated wait asked.
INSTANCE_CHECK_SECONDS = PLATFORM_CHECK_SECONDS

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
    :param platform_check_seconds: how often a wait that watches its application's instances (the Migrated,
        lag and Empty waits given a controller and a baseline) asks the platform while it waits (1 to 3,600 s;
        templated). Poking, the pokes come at least this often (the broker is still read every
        ``poll_interval``); deferred, the trigger asks from the triggerer.

    ``poll_interval``, ``remove_members_after``, ``timeout_minutes``, ``coordinator_unavailable_minutes`` and
    ``platform_check_seconds`` are templated, so a DAG can take them from its Params.
    :returns: ``{group_id, condition, summary, detail, polls, mode, members_removed, notes}``
    """

    template_fields: tuple[str, ...] = ("group_id", "kafka_conn_id", "poll_interval", "remove_members_after",
                                        "timeout_minutes", "coordinator_unavailable_minutes", "audit_log",
                                        "platform_check_seconds")
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
        platform_check_seconds: float | str = PLATFORM_CHECK_SECONDS,
        **kwargs: Any,  # Any: BaseSensorOperator's own arguments (task_id, timeout, ...), passed through
    ) -> None:
        # what can be checked when the DAG is parsed is checked now (templates: when rendered), each number within
        # its range (kafka.arguments.RANGES: poll_interval at least MIN_POLL_SECONDS, never a busy loop), before
        # Airflow's own checks of poke_interval would answer a bare ValueError or OverflowError
        if not is_template(group_id):
            require_group_id(group_id)
        for value, name, optional in ((poll_interval, "poll_interval", False),
                                      (remove_members_after, "remove_members_after", True),
                                      (timeout_minutes, "timeout_minutes", True),
                                      (coordinator_unavailable_minutes, "coordinator_unavailable_minutes", False),
                                      (platform_check_seconds, "platform_check_seconds", False)):
            if not is_template(value):
                parse_number(value, name, optional=optional)
        kwargs.setdefault("poke_interval", poll_interval if isinstance(poll_interval, (int, float)) else 5.0)
        super().__init__(**kwargs)
        self.group_id = group_id
        self.condition = condition if isinstance(condition, GroupCondition) else GroupCondition.from_dict(condition)
        self.kafka_conn_id = kafka_conn_id
        self.deferrable = default_deferrable() if deferrable is None else parse_flag(deferrable, "deferrable")
        self.poll_interval = poll_interval
        self.remove_members_after = remove_members_after
        self.timeout_minutes = timeout_minutes
        self.coordinator_unavailable_minutes = coordinator_unavailable_minutes
        self.audit_log = audit_log
        self.platform_check_seconds = platform_check_seconds
        #: the platform watched through the wait (None: nothing to watch), and when the worker last looked
        self._watch: PlatformWatch | None = None
        self._watched_at = 0.0
        self._looks: dict[str, float] = {"looks": 0, "failed": 0, "look_s": 0.0}
        self._polled_at = 0.0
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
            self.platform_check_seconds = parse_number(self.platform_check_seconds,
                                                       "platform_check_seconds") or PLATFORM_CHECK_SECONDS
        except Kip848Error as exc:  # bad input: fail now, a retry would repeat it
            raise AirflowFailException(str(exc)) from exc
        if carried is not None:
            self.condition = GroupCondition.from_dict(carried)
        else:
            self.condition = self._condition_riding_out_failures()
        self._fit_deadline(say=carried is None)

    def _fit_deadline(self, *, say: bool) -> None:
        """A deadline a quiet group could never meet is raised to the first moment it can be met.

        Why: a member proves it is alive by progress or by staying listed through the liveness window (the group's
        session plus a heartbeat). With no input flowing, a wait whose deadline ends inside that window fails
        although every member is healthy: on Kafka 4.2 a streams group's 45 s session makes a 30 s start deadline
        such a wait, and a way back that fails there leaves the application down. The deadline becomes the window
        plus two polls, said in the log and the result's notes (``say``; a resumed wait has it in its carry)."""
        window = float(self.condition.liveness_s or 0.0)
        if not self.timeout or window <= 0:
            return
        needed = window + 2 * max(float(self.poll_interval), 1.0)
        if float(self.timeout) >= needed:
            return
        given, self.timeout = float(self.timeout), needed
        if say:
            note = (f"deadline raised from {given:g} s to {needed:g} s: a member proves it is alive by progress or "
                    f"by staying listed through the {window:g} s liveness window, which a quiet group needs whole")
            self.log.warning("Group %s: %s.", self.group_id, note)
            self._notes.append(note)

    def _platform_watch(self) -> PlatformWatch | None:
        """What the wait watches on the platform while it waits (None: nothing; the sensors that know their
        application's instances say what), built once when the wait begins, in the worker."""
        return None

    def _lost_message(self, found: str) -> str:
        """The failure when a look at the platform finds ``found`` (the instances and their state), the same in
        both modes."""
        return (f"Group {self.group_id}: waiting for {self.condition.describe()} is over: the platform shows an "
                f"instance of the application lost during the wait: {found}.")

    def _begin_watch(self, carried: object = None) -> None:
        """The wait's platform watch: the one carried through the triggerer, else built now. Poking, the pokes
        come at least every ``platform_check_seconds`` (the broker is still read every ``poll_interval``)."""
        try:
            self._watch = (PlatformWatch.from_dict(carried) if carried is not None else self._platform_watch())
        except Kip848Error as exc:
            raise AirflowFailException(str(exc)) from exc
        if self._watch is not None:
            self._watch = replace(self._watch, every_s=float(self.platform_check_seconds))
            self.poke_interval = min(float(self.poll_interval), self._watch.every_s)
            self.log.info("Group %s: the platform is watched through the wait: %s", self.group_id,
                          self._watch.describe())

    def _look(self) -> None:
        """One look at the platform from the worker (poking, or a deferred wait resumed to poke): what it finds
        fails the wait, named."""
        watch = self._watch
        if watch is None:
            return
        self._watched_at = time.time()
        try:
            named = watch.resolve()
        except Kip848Error as exc:  # a name or argument the registry refuses: bad input, never retried
            raise AirflowFailException(str(exc)) from exc
        try:
            found = watch.look(named)
        except ControllerError as exc:
            self._looks["failed"] += 1
            raise task_error(exc) from exc
        finally:
            named.close()
            self._looks["look_s"] = round(self._looks["look_s"] + time.time() - self._watched_at, 2)
        self._looks["looks"] += 1
        if found is not None:
            raise AirflowFailException(self._lost_message(found))

    def _client_errors_note(self) -> str:
        """The errors the instances' clients logged since the start, read once when the wait ends on its deadline
        (" The clients logged: <instance>: <error>: <line> ..."; "" without a watch, a log, or a finding)."""
        watch = self._watch
        if watch is None or watch.rule != "lost":
            return ""
        try:
            named = watch.resolve()
        except Kip848Error:
            return ""
        try:
            errors = watch.client_errors(named)
        finally:
            named.close()
        return f" {errors.describe()}." if errors.findings else ""

    def _watch_note(self, notes: list[str], platform: object = None) -> None:
        """The result's note on the watch: where the platform was asked, how often and how many times."""
        if self._watch is None:
            return
        counted = platform if isinstance(platform, dict) else {**self._looks, "where": "worker"}
        note = (f"the platform was watched through the wait from the {counted.get('where', 'worker')}: "
                f"{self._watch.describe()}; {counted.get('looks', 0):g} look(s) taking {counted.get('look_s', 0):g} s "
                f"in all, {counted.get('failed', 0):g} failed or late")
        notes[:] = [n for n in notes if not n.startswith("the platform was watched")] + [note]

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
        self._begin_watch()
        if self.remove_members_after is not None and is_retry(context):  # a killed try's forced removal
            with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
                complete_earlier_tries(context, self.task_id, hook, self.audit_log, log=self.log)
        if not self.deferrable:
            try:
                result: GroupWaitResult = super().execute(context)
                return result
            except AirflowSensorTimeout as exc:  # say what was last seen, as the deferred wait's timeout does
                raise AirflowSensorTimeout(
                    f"Group {self.group_id} did not reach {self.condition.describe()} within {self.timeout} s "
                    f"(last seen: {self._last_summary or 'never evaluated'}).{self._client_errors_note()}") from exc
        self.log.info("Waiting in the triggerer for group %s: %s", self.group_id, self.condition.describe())
        self._defer(started, remove=self.remove_members_after is not None, polls=0, wait=WaitState(),
                    notes=list(self._notes))

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
                                     condition=self.condition.to_dict(),
                                     watch=self._watch.to_dict() if self._watch is not None else None),
                platform_watch=self._watch.to_dict() if self._watch is not None else None,
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
        self._begin_watch(carried=carry.get("watch"))
        started = carry.get("started")
        wait = WaitState.from_dict(carry.get("wait"))
        notes = list(carry.get("notes") or [])
        self._watch_note(notes, carry.get("platform"))
        if event["status"] == "instance_lost":
            raise AirflowFailException(self._lost_message(str(event["found"])))
        if event["status"] == "platform_unwatched":  # the triggerer cannot ask the platform: this worker does
            self.log.warning("Group %s: %s; the rest of the wait pokes in this worker, which asks the platform "
                             "every %g s.", self.group_id, event["found"], float(self.platform_check_seconds))
            notes.append(f"{event['found']}: the rest of the wait poked in a worker, watching the platform there")
            return self._poke_rest(context, started or time.time(), wait, notes, event["polls"])
        if event["status"] == "met":
            self.log.info("Group %s: %s after %s poll(s).", self.group_id, event["summary"], event["polls"])
            again = self._on_met(context, event["detail"], wait, notes)
            if again is None:
                return self._result(event["summary"], event["detail"], event["polls"], "deferred", wait, notes,
                                    met_at=event["met_at"])
            self.log.info("Group %s: %s; waiting on.", self.group_id, again)
            self._defer(started or time.time(), remove=False, polls=event["polls"], wait=wait, notes=notes)
        if event["status"] == "remove_members_due":
            wait.removed += self._remove_members(context, notes, wait)
            self._defer(started or time.time(), remove=False, polls=event["polls"], wait=wait, notes=notes)
        if event["status"] == "timeout":
            raise AirflowSensorTimeout(
                f"Group {self.group_id} did not reach {self.condition.describe()} within {self.timeout} s "
                f"(last seen: {event['summary']}).{self._client_errors_note()}"
            )
        if event["status"] == "error":
            message = event["message"] + self._who(event.get("members"))
        else:  # an event of no known status: said whole, never taken for a verdict
            message = str(event)
        raise AirflowFailException(f"Waiting for group {self.group_id} failed: {message}")

    # -- poking --------------------------------------------------------------

    def _poke_rest(self, context: Context, started: float, wait: WaitState, notes: list[str],
                   polls: int) -> GroupWaitResult:
        """The rest of a deferred wait, poking in this worker (until its own deadline)."""
        self._started, self._wait, self._notes, self._polls = started, wait, notes, polls
        if self.timeout:
            self.timeout = max(1.0, float(self.timeout) - (time.time() - started))
        self.deferrable = False
        try:
            result: GroupWaitResult = BaseSensorOperator.execute(self, context)
            return result
        except AirflowSensorTimeout as exc:
            raise AirflowSensorTimeout(
                f"Group {self.group_id} did not reach {self.condition.describe()} within its timeout "
                f"(last seen: {self._last_summary or 'never evaluated'}).{self._client_errors_note()}") from exc

    def poke(self, context: Context) -> PokeReturnValue:
        if self._started is None:
            self._started = time.time()
        now = time.time()
        if self._watch is not None and now - self._watched_at >= self._watch.every_s:
            self._look()  # between the broker's polls too: the platform's word fails the wait at once
        if self._watch is not None and self._polled_at and now - self._polled_at < float(self.poll_interval) - 0.05:
            return PokeReturnValue(is_done=False)  # the broker is read every poll_interval only
        self._polled_at = now
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
            self._wait.removed += self._remove_members(context, self._notes, self._wait)
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

    def _remove_members(self, context: Context, notes: list[str],
                        wait: WaitState | None = None) -> list[dict[str, object]]:
        """Force out the members after ``remove_members_after`` (``wait``: what the wait saw so far); the Empty
        sensor chooses whom by the pairing of members with instances."""
        return force_out_members(context, self.task_id, self.kafka_conn_id, self.group_id, self.audit_log,
                                 self.remove_members_after, notes, self.log)

    def _result(self, summary: str, detail: dict[str, object], polls: int, mode: Literal["poke", "deferred"],
                wait: WaitState, notes: list[str], *, met_at: float | None = None) -> GroupWaitResult:
        """What the wait saw when it held; ``met_at``: when (epoch s; the trigger's moment when deferred, before
        the task was resumed: the end of a processing gap, not of the task)."""
        if mode == "poke":
            self._watch_note(notes)
        return GroupWaitResult(group_id=self.group_id, condition=self.condition.to_dict(), summary=summary,
                               detail=detail, polls=polls, mode=mode,
                               met_at=met_at if isinstance(met_at, (int, float)) else time.time(),
                               members_removed=[m.get("instance_id") or m["member_id"] for m in wait.removed],
                               removed_members=wait.removed, notes=notes)
