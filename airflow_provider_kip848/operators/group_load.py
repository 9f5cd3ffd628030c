"""``KafkaGroupLoadsOperator``: after the online way back to classic, the proof that the group still loads.

apache/kafka#23514 (open, KAFKA-21117): after an online consumer -> classic downgrade, a coordinator that loads
the group's ``__consumer_offsets`` partition while the log cleaner compacts it can fail with "Group ... is not a
consumer group", and then no group on that partition is served. A test can prove a load by moving the
coordinator (killing its node); a deployment cannot kill brokers, nor move a ``__consumer_offsets`` partition's
leadership for one group without moving every group on it. So the proof here is what a platform engineer can
establish without touching a broker:

* the group's **coordinator serves it**: described from the coordinator, it is classic, with its members, and
  its committed offsets are read back from it;
* the group's **records** (every one left in its ``__consumer_offsets`` partition) replay as a loading
  coordinator replays them (:mod:`~airflow_provider_kip848.kafka.rules.group_load`): ``unloadable`` (the next
  load fails) fails the task, naming the records; ``exposed`` (a load racing the cleaner can fail until the
  cleaner has compacted the way back's consumer-group records) is a warning with the offsets, or a failure with
  ``exposed="fail"``.

A fact that cannot be read (the coordinator not answering: retriable; no READ on ``__consumer_offsets``: fails
with that remedy) is never taken as "loads".
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.kafka.arguments import require_choice
from airflow_provider_kip848.kafka.errors import WrongGroupType
from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.rules.group_load import FIX, GroupLoad
from airflow_provider_kip848.operators.base import KafkaAdminBaseOperator, check_choice_arg, check_group_id_arg

#: what an ``exposed`` verdict does to the task
EXPOSED = ("warn", "fail")
#: what an operator can do about an unloadable or exposed group (said in the failure and the warning)
REMEDY = ("Keep the brokers leading this __consumer_offsets partition up (no rolling restart, no reassignment "
          "of the partition) until the log cleaner has compacted the records named, or until the brokers run a "
          "release with apache/kafka#23514; a coordinator that fails to load it serves none of its groups (read "
          "that broker's log for \"is not a consumer group\").")


class KafkaGroupLoadsOperator(KafkaAdminBaseOperator[dict[str, object]]):
    """Prove that ``group_id``, back on classic, still loads (see the module).

    :param group_type: the protocol the group has come back to; anything but ``classic`` (the online upgrade's
        own run) is not a way back to classic: nothing to prove, said in the result.
    :param exposed: ``warn`` (default) or ``fail`` when the records are exposed to a load racing the cleaner.
    :returns: ``{group_id, checked, coordinator_id, type, state, members, committed_partitions, load, message}``
        (``load``: the verdict, its evidence and the offsets behind it).
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "group_id", "group_type", "exposed")
    supported_backends = ("native",)

    def __init__(self, *, group_id: str, group_type: str = "classic", exposed: str = "warn",
                 **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        check_group_id_arg(group_id)
        check_choice_arg(exposed, "exposed", EXPOSED)
        self.group_id, self.group_type, self.exposed = group_id, group_type, exposed

    def run(self, context: Context) -> dict[str, object]:
        require_choice(self.exposed, "exposed", EXPOSED)
        if self.group_type != GroupType.CLASSIC.value:
            message = (f"Group {self.group_id!r} was moved to {self.group_type}, not back to classic: no "
                       f"downgrade, nothing for {FIX} to meet.")
            self.log.info("%s", message)
            return {"group_id": self.group_id, "checked": False, "message": message}
        hook = self.native_hook
        desc = hook.describe_group(self.group_id)  # from its coordinator (a coordinator not loading: retriable)
        if desc.type is not GroupType.CLASSIC:
            raise WrongGroupType(f"Group {self.group_id!r} is a {desc.type.value} group ({desc.state}), not "
                                 "classic: the way back has not brought it back, there is no classic group to "
                                 "prove.")
        committed = hook.group_offsets(self.group_id).committed
        verdict = hook.group_load(self.group_id)
        members = sorted(m.client_id or m.member_id for m in desc.members)
        result: dict[str, object] = {
            "group_id": self.group_id, "checked": True, "coordinator_id": desc.coordinator_id,
            "type": desc.type.value, "state": desc.state.value, "members": members,
            "committed_partitions": len(committed), "load": verdict.to_dict(),
        }
        served = (f"Group {self.group_id!r} is served by its coordinator (node {desc.coordinator_id}): classic, "
                  f"{desc.state}, {len(members)} member(s), {len(committed)} committed partition(s)")
        if verdict.status is GroupLoad.UNLOADABLE or (verdict.status is GroupLoad.EXPOSED and self.exposed == "fail"):
            raise AirflowFailException(f"{served}, but {verdict.evidence}. {REMEDY}")
        message = f"{served}; its records: {verdict.status.value} ({verdict.evidence})."
        if verdict.status is GroupLoad.EXPOSED:
            message += f" {REMEDY}"
            self.log.warning("%s", message)
        else:
            self.log.info("%s", message)
        return {**result, "message": message}
