"""``KafkaApplicationMigrationOperator``: one application of a fleet wave, moved (or moved back) whole.

The fleet migration DAG maps this operator over a wave's applications
(dynamic task mapping, one task instance per application). The move itself is
the migration engine's (:class:`~airflow_provider_kip848.engine.move.ApplicationMove`:
the single-group DAGs' steps, typed state, one deferral per run of waits);
this operator is its Airflow side: it parses the templated inputs, defers on a
:class:`~airflow_provider_kip848.triggers.move.KafkaMoveTrigger` whenever the
engine waits (no worker slot is held while the groups empty, convert and
drain), and pushes the result.

Steps (``kind="migrate"``):

* offline path: snapshot each group -> stop the application -> wait until each
  group is Empty (members left behind forced out at once when the platform
  confirms every instance gone, else after ``remove_members_after``) ->
  restore any lost committed offset -> start with ``group.protocol=consumer``
  -> wait until each group is a consumer group with the expected live members,
  then for its lag to drain (one deferral for both, every group) -> compare
  each group's offsets with its snapshot;
* online path: snapshot -> the controller's rolling restart (``roll``) with the
  new protocol -> wait migrated, then lag -> compare.

``kind="rollback"`` (an application that failed): stop -> Empty -> restore ->
start on ``classic`` -> wait until each group is classic with its members ->
compare with the snapshot the migration took.

Every instance records an :class:`~airflow_provider_kip848.fleet.results.ApplicationResult`
as XCom ``fleet_result`` (:data:`~airflow_provider_kip848.fleet.names.RESULT_KEY`), whether it
succeeds or fails, so the wave's judge can count failures against the error budget; a failed
application fails its task instance (red in the UI) after recording it. The engine also records the
move's state after every step on the run's snapshot location: give the task ``retries`` and a task
process lost by the executor or a dying worker is taken up at its recorded step by the retry (a move
that failed fails with :class:`AirflowFailException`, which is never retried). The application's groups
are held under the same change lock as the single-group DAGs (``group:<id>``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.engine.move import ApplicationMove, Finished, MoveSettings, Unit, Waiting
from airflow_provider_kip848.engine.state import MoveState
from airflow_provider_kip848.fleet.names import PROGRESS_KEY, RESULT_KEY
from airflow_provider_kip848.fleet.results import MIGRATE, ROLLBACK
from airflow_provider_kip848.hooks.platform_watch import PLATFORM_CHECK_SECONDS
from airflow_provider_kip848.kafka.arguments import parse_number
from airflow_provider_kip848.kafka.errors import InvalidArgument, Kip848Error
from airflow_provider_kip848.kafka.rules.lag import MARGIN_FRACTION, MARGIN_RECORDS, WINDOW_SECONDS
from airflow_provider_kip848.operators.params import lag_settings
from airflow_provider_kip848.triggers.move import KafkaMoveTrigger, MoveTriggerEvent

#: the key of the move's state in the trigger's ``carry``
CARRY_KEY = "move"


class KafkaApplicationMigrationOperator(BaseOperator):
    """Move one application (all of its groups) to the consumer protocol, or back (``kind="rollback"``).

    :param application: the unit to move (templated; in the fleet DAG, one element of the wave's mapped
        list): ``{app, team, wave, path ("online"/"offline"), app_controller, app_controller_args,
        expected_instances, groups: [{group_id, type, state, live_members}]}``.
    :param snapshot_dir: this run's snapshot location, as the DAG's code gives it (the fleet DAG: the run's folder
        of the deployment's artifact location, never a Param); the group's snapshot is
        ``<snapshot_dir>/<app>/<group>.json`` (the rollback compares with the one the migration took), the move's record
        ``<snapshot_dir>/<app>/move-<kind>.json``; the application and the group id each one path segment
        (``runpaths.path_segment``: ``/``, ``%`` and a leading ``.`` percent-encoded).
    :param poll_interval, remove_members_after, empty_settle_seconds, empty_timeout_minutes,
        start_timeout_minutes, max_lag, lag_margin_fraction, lag_margin_records, lag_window_seconds: as in the
        single-group DAGs (templated; the lag wait's baseline is the move's own snapshot before the change).
    :param first_instance_timeout_minutes: the online path's first-instance gate (templated; a controller that
        can restart one instance: see :mod:`airflow_provider_kip848.engine.instance_roll`).
    :param platform_check_seconds: how often a stage's waits look at the platform (1 to 3,600 s; templated): an
        instance of the start stopped, exited, restarted or crash-looping fails the stage, named; during Empty, an
        instance running again.
    :param deferrable: True (the default) waits in the triggerer (the trigger watches the platform, racing its
        broker polls); False pokes each stage in the worker (the platform looked at between polls).
    """

    template_fields = ("application", "kafka_conn_id", "snapshot_dir", "audit_log", "poll_interval",
                       "remove_members_after", "empty_settle_seconds", "empty_timeout_minutes",
                       "start_timeout_minutes", "max_lag", "first_instance_timeout_minutes", "lag_margin_fraction",
                       "lag_margin_records", "lag_window_seconds", "platform_check_seconds")
    ui_color = "#fdf1e6"

    def __init__(self, *, application: Mapping[str, object] | str, kafka_conn_id: str, snapshot_dir: str,
                 kind: str = MIGRATE, target_protocol: str = "consumer", source_protocol: str = "classic",
                 poll_interval: float | str = 5, remove_members_after: float | str | None = 30,
                 empty_settle_seconds: float | str = 10, empty_timeout_minutes: float | str = 10,
                 start_timeout_minutes: float | str = 10, max_lag: int | str | None = None,
                 audit_log: str | None = None, first_instance_timeout_minutes: float | str = 5,
                 lag_margin_fraction: float | str = MARGIN_FRACTION, lag_margin_records: int | str = MARGIN_RECORDS,
                 lag_window_seconds: float | str = WINDOW_SECONDS,
                 platform_check_seconds: float | str = PLATFORM_CHECK_SECONDS, deferrable: bool = True,
                 **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        if kind not in (MIGRATE, ROLLBACK):
            raise ValueError(f"kind must be {MIGRATE!r} or {ROLLBACK!r}, not {kind!r}")
        self.application, self.kafka_conn_id, self.snapshot_dir = application, kafka_conn_id, snapshot_dir
        self.kind, self.target_protocol, self.source_protocol = kind, target_protocol, source_protocol
        self.poll_interval, self.remove_members_after = poll_interval, remove_members_after
        self.empty_settle_seconds, self.empty_timeout_minutes = empty_settle_seconds, empty_timeout_minutes
        self.start_timeout_minutes, self.max_lag, self.audit_log = start_timeout_minutes, max_lag, audit_log
        self.first_instance_timeout_minutes = first_instance_timeout_minutes
        self.lag_margin_fraction, self.lag_margin_records = lag_margin_fraction, lag_margin_records
        self.lag_window_seconds = lag_window_seconds
        self.platform_check_seconds, self.deferrable = platform_check_seconds, bool(deferrable)

    # -- inputs -------------------------------------------------------------------------------------

    def _settings(self) -> MoveSettings:
        try:
            remove_after = (None if self.remove_members_after in (None, "", "None")
                            else float(parse_number(self.remove_members_after, "remove_members_after") or 0.0))
            return MoveSettings(
                kafka_conn_id=str(self.kafka_conn_id), snapshot_dir=str(self.snapshot_dir),
                target_protocol=self.target_protocol, source_protocol=self.source_protocol,
                poll_interval=float(parse_number(self.poll_interval, "poll_interval") or 0.0),
                remove_members_after=remove_after,
                empty_settle_seconds=float(parse_number(self.empty_settle_seconds, "empty_settle_seconds") or 0.0),
                empty_timeout_minutes=float(parse_number(self.empty_timeout_minutes, "timeout_minutes") or 0.0),
                start_timeout_minutes=float(parse_number(self.start_timeout_minutes, "timeout_minutes") or 0.0),
                **lag_settings(self.max_lag, self.lag_margin_fraction, self.lag_margin_records,
                               self.lag_window_seconds),
                audit_log=None if self.audit_log in (None, "", "None") else str(self.audit_log),
                first_instance_timeout_minutes=float(parse_number(self.first_instance_timeout_minutes,
                                                                  "first_instance_timeout_minutes",
                                                                  minimum=0.01) or 0.0),
                platform_check_seconds=float(parse_number(self.platform_check_seconds, "platform_check_seconds",
                                                          minimum=1, maximum=3600) or PLATFORM_CHECK_SECONDS))
        except Kip848Error as exc:
            raise AirflowFailException(str(exc)) from exc

    def _move(self, context: Context) -> ApplicationMove:
        try:
            unit = Unit.from_dict(self.application)
        except Kip848Error as exc:
            raise AirflowFailException(str(exc)) from exc
        ti = context["ti"]
        return ApplicationMove(unit, self.kind, self._settings(), context=context, task_id=self.task_id,
                               log=self.log,
                               on_progress=lambda p: ti.xcom_push(key=PROGRESS_KEY, value=p.to_dict()))

    # -- Airflow's side -----------------------------------------------------------------------------

    def resume(self, context: Context, event: MoveTriggerEvent | None = None, **_: object) -> dict[str, object]:
        carried = event["carry"].get(CARRY_KEY) if event is not None else None
        with self._move(context) as move:
            try:
                if carried is not None and not isinstance(carried, Mapping):
                    raise InvalidArgument(f"the carried state is a {type(carried).__name__}, not a mapping")
                state = MoveState.from_dict(carried) if carried is not None else move.recorded()
            except Kip848Error as exc:
                raise AirflowFailException(f"the wait's event carries no readable state ({exc}): {event!r}") from exc
            if state is None:
                raise AirflowFailException(f"the wait's event carries no state and none is recorded: {event!r}")
            outcome = self._poked(move, move.resume(state, event or {}))
        return self._handle(context, outcome)

    def execute(self, context: Context) -> dict[str, object]:
        with self._move(context) as move:
            outcome = self._poked(move, move.advance(move.begin()))
        return self._handle(context, outcome)

    def _poked(self, move: ApplicationMove, outcome: Waiting | Finished) -> Waiting | Finished:
        """Poking (``deferrable=False``, or a stage the triggerer could not watch): each stage polled in this
        worker, the platform looked at between polls, until the move ends or a stage may defer."""
        while isinstance(outcome, Waiting) and (outcome.poke or not self.deferrable):
            outcome = move.resume(outcome.state, move.poke(outcome))
        return outcome

    def _handle(self, context: Context, outcome: Waiting | Finished) -> dict[str, object]:
        if isinstance(outcome, Waiting):
            self.defer(
                trigger=KafkaMoveTrigger(kafka_conn_id=str(self.kafka_conn_id), waits=outcome.waits,
                                         poll_interval=outcome.poll_interval,
                                         remove_members_at=outcome.remove_members_at,
                                         carry={CARRY_KEY: _without_commands(outcome.state.to_dict())},
                                         platform_watch=outcome.platform_watch),
                method_name="resume",
                timeout=timedelta(seconds=outcome.timeout_s),
            )
        assert isinstance(outcome, Finished)
        result = outcome.result.to_dict()
        context["ti"].xcom_push(key=RESULT_KEY, value=result)
        if not outcome.result.ok:
            raise AirflowFailException(f"{outcome.result.app}: {outcome.result.detail}")
        self.log.info("%s: every group %s (%s)", outcome.result.app,
                      "migrated" if self.kind == MIGRATE else "back on classic",
                      ", ".join(g.group_id for g in outcome.result.groups))
        return result


def _without_commands(state: dict[str, Any]) -> dict[str, Any]:  # Any: MoveState.to_dict()'s JSON
    """The move's state as the trigger carries it: the platform's statuses (the stop's, the start's) without
    their ``source`` (the command that listed them and where it ran). The trigger's kwargs carry names, never
    commands; the move's record on the snapshot location keeps them whole."""
    out = dict(state)
    for key in ("baseline", "before"):
        if isinstance(out.get(key), Mapping):
            out[key] = {**out[key], "source": ""}
    return out


__all__ = ["RESULT_KEY", "KafkaApplicationMigrationOperator"]
