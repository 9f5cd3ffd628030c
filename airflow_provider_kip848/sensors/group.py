"""The named group sensors (state, type, migrated, lag, empty): each builds its
:class:`~airflow_provider_kip848.kafka.rules.conditions.GroupCondition` and leaves the waiting to
:class:`~airflow_provider_kip848.sensors.group_condition.KafkaGroupConditionSensor` (re-exported here, with its
result type, so a DAG imports every group sensor from one place).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.controllers import ApplicationStatus, NamedController
from airflow_provider_kip848.controllers.pairing import PairingVerdict, migrated_pairing
from airflow_provider_kip848.engine.offsets import load_snapshot
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.instances import (
    InstancesVerdict,
    instances_verdict,
    liveness_window,
    members_pairing,
)
from airflow_provider_kip848.hooks.platform_watch import PlatformWatch
from airflow_provider_kip848.kafka.arguments import is_template, parse_flag, parse_number
from airflow_provider_kip848.kafka.errors import Kip848Error
from airflow_provider_kip848.kafka.model import GroupState
from airflow_provider_kip848.kafka.rules.conditions import (
    GroupCondition,
    WaitState,
)
from airflow_provider_kip848.kafka.rules.lag import (
    MARGIN_FRACTION,
    MARGIN_RECORDS,
    WINDOW_SECONDS,
    baseline_from_snapshot,
)
from airflow_provider_kip848.sensors.group_condition import (
    COORDINATOR_UNAVAILABLE_MINUTES,
    INSTANCE_CHECK_SECONDS,
    GroupWaitResult,
    KafkaGroupConditionSensor,
    default_deferrable,
)
from airflow_provider_kip848.sensors.group_empty import (
    EMPTY_SETTLE_SECONDS,
    KafkaGroupEmptySensor,
    group_seen_by,
    stop_result_of,
)
from airflow_provider_kip848.sensors.platform import ControllerAware

__all__ = ["KafkaGroupConditionSensor", "GroupWaitResult", "default_deferrable", "KafkaGroupStateSensor",
           "KafkaGroupTypeSensor", "KafkaGroupMigratedSensor", "KafkaGroupLagSensor", "KafkaGroupEmptySensor",
           "EMPTY_SETTLE_SECONDS",
           "group_seen_by", "stop_result_of", "INSTANCE_CHECK_SECONDS", "COORDINATOR_UNAVAILABLE_MINUTES"]


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


class KafkaGroupMigratedSensor(ControllerAware, KafkaGroupConditionSensor):
    """Wait until the group is ``group_type``, has ``expected_members`` live members, none of them on the other
    protocol, each *proven* alive, and (with a controller) every expected instance running on the platform.

    The coordinator lists a crashed member (Stable, its epoch unchanged) until its session times out, so
    presence proves nothing. Each member must make progress (a committed offset of its partitions advances)
    or stay listed through a liveness window derived from the group's session timeout
    (:func:`~airflow_provider_kip848.hooks.instances.liveness_window`); then the controller's status must show
    every expected instance running and ready, none restarted since ``baseline`` (the status the start task
    recorded). An instance that crashed, restarted or crash-loops fails the wait, named. A controller that
    cannot tell leaves the verdict to the broker, and the result says so.

    With a controller and a baseline the platform is also watched through the whole wait (every
    ``platform_check_seconds``; deferred, from the triggerer): an instance of the baseline stopped, exited,
    restarted or starting again fails the wait at once, named with its state, whatever the coordinator lists.

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
    :param allow_foreign_members: a live member no instance of the platform accounts for is allowed (templated
        flag; default false: such a member fails the wait, named). Members are paired with instances
        (:mod:`~airflow_provider_kip848.controllers.pairing`): every running instance must be paired with a live
        member on the target protocol, so a stand-in (another deployment's consumer, a debugging one) never
        counts for an instance that did not join. A controller that cannot pair them leaves it to the broker.
    """

    template_fields = (*KafkaGroupConditionSensor.template_fields, "group_type", "expected_members", "controller",
                       "controller_args", "baseline", "liveness", "liveness_seconds", "expected_instances",
                       "allow_foreign_members")

    def __init__(self, *, group_type: str = "consumer", expected_members: int | str = 1,
                 controller: str | None = None, controller_args: dict[str, object] | str | None = None,
                 baseline: dict[str, object] | str | None = None, liveness: bool | str = True,
                 liveness_seconds: float | str | None = None, expected_instances: int | str | None = None,
                 allow_foreign_members: bool | str = False,
                 **kwargs: Any) -> None:  # Any: passed to BaseSensorOperator
        if not is_template(allow_foreign_members):
            parse_flag(allow_foreign_members, "allow_foreign_members")
        self.allow_foreign_members = allow_foreign_members
        self.group_type = group_type
        self.expected_members, self.expected_instances = expected_members, expected_instances
        self.controller, self.controller_args, self.baseline = controller, controller_args, baseline
        self.liveness, self.liveness_seconds = liveness, liveness_seconds
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

    def _platform_watch(self) -> PlatformWatch | None:
        return PlatformWatch.of(self.controller, self.controller_args, self._baseline(), "lost")

    def _lost_message(self, found: str) -> str:
        return (f"Group {self.group_id} is not migrated and will not be: an instance started for it has died "
                f"(stopped, exited or restarted since), as the platform says: {found}. A crashed member stays listed "
                "until its session times out; its partitions are not consumed.")

    def _on_met(self, context: Context, detail: dict[str, object], wait: WaitState, notes: list[str]) -> str | None:
        """The platform's word once the coordinator's side holds: every expected instance up and not restarted
        (:func:`~airflow_provider_kip848.hooks.instances.instances_verdict`), and each paired with a live member on
        the target protocol, no member unaccounted for (:func:`~airflow_provider_kip848.controllers.pairing.
        migrated_pairing`); both asked of one status. The pairing goes in the result's detail."""
        baseline = self.baseline if isinstance(self.baseline, dict) else None
        try:
            allow = parse_flag(self.allow_foreign_members, "allow_foreign_members")
        except Kip848Error as exc:
            raise AirflowFailException(str(exc)) from exc

        def ask(named: NamedController | None) -> tuple[InstancesVerdict, PairingVerdict | None]:
            status = named.status() if named is not None else None
            verdict = instances_verdict(named, expected=self._instances(baseline), baseline=baseline, status=status)
            if named is None or status is None:
                return verdict, None
            listed = detail.get("members")
            members = [m for m in listed if isinstance(m, dict)] if isinstance(listed, list) else []
            since = {mid: float(r["since"]) for mid, r in wait.members.items()}
            return verdict, migrated_pairing(members_pairing(members, status), protocol=str(self.group_type),
                                             allow_foreign=allow, since=since)

        verdict, paired = self._ask(ask)
        if verdict.outcome == "failed":
            raise AirflowFailException(f"Group {self.group_id} looks migrated to the coordinator, but the platform "
                                       f"says otherwise: {verdict.message}. A crashed member stays listed until its "
                                       "session times out; its partitions are not consumed.")
        if paired is not None:
            detail["pairing"] = paired.pairing.to_dict()
            if paired.outcome == "failed":
                raise AirflowFailException(
                    f"Group {self.group_id} looks migrated to the coordinator, but its members are not the "
                    f"application's instances: {paired.message} A member the platform does not run (another "
                    "deployment, a consumer started by hand) stands in for an instance in the count; stop it, or "
                    "rerun with allow_foreign_members when it belongs in the group.")
        if verdict.outcome == "pending":
            return verdict.message
        if paired is not None and paired.outcome == "pending":
            return f"not every instance has its member: {paired.message}"
        for note in (verdict.message, paired.message if paired is not None else None):
            if note and note not in notes:
                notes.append(note)
        return None


class KafkaGroupLagSensor(ControllerAware, KafkaGroupConditionSensor):
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
    :param controller, controller_args, baseline: the application's controller and its status right after the
        start (templated, as the Migrated wait's): the platform is then watched through the wait, and an
        instance of the start stopped, exited, restarted or starting again fails it at once, named (a lag drained
        by the instances left says nothing of the one lost). None: the lag alone.
    """

    template_fields = (*KafkaGroupConditionSensor.template_fields, "max_lag", "baseline_snapshot",
                       "lag_margin_fraction", "lag_margin_records", "lag_window_seconds", "controller",
                       "controller_args", "baseline")

    def __init__(self, *, max_lag: int | str | None = None, max_partition_lag: int | None = None,
                 baseline_snapshot: str | None = None, lag_margin_fraction: float | str = MARGIN_FRACTION,
                 lag_margin_records: int | str = MARGIN_RECORDS, lag_window_seconds: float | str = WINDOW_SECONDS,
                 controller: str | None = None, controller_args: dict[str, object] | str | None = None,
                 baseline: dict[str, object] | str | None = None,
                 **kwargs: Any) -> None:  # Any: passed to BaseSensorOperator
        self.controller, self.controller_args, self.baseline = controller, controller_args, baseline
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

    def _platform_watch(self) -> PlatformWatch | None:
        return PlatformWatch.of(self.controller, self.controller_args, self._baseline(), "lost")

    def _lost_message(self, found: str) -> str:
        return (f"Group {self.group_id}: waiting for its lag to drain is over: an instance started for it has "
                f"stopped, exited or restarted since, as the platform says: {found}. The partitions it held move to "
                "the instances left (or wait for its return): the application is not whole.")


def _absent(value: object) -> bool:
    return value is None or (isinstance(value, str) and value.strip() in ("", "None"))
