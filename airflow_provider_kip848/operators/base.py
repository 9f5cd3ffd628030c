"""What every operator of this provider shares: a connection, a backend choice, and error handling.

Bad input and refusals (a group that does not exist, a config out of the
broker's bounds, a non-empty group ...) fail the task at once with
``AirflowFailException``: retrying would only repeat them. An unreachable or
slow cluster raises the provider's retriable error, so the task's ``retries``
apply, which is safe because every operator reads the cluster state before it
changes anything.

Every change an operator applies is written to the audit trail
(:mod:`airflow_provider_kip848.changecontrol.audit`): one JSON line per change
with who triggered, who approved (the ``decision`` XComs of
``approval_task_ids``), the plan they saw, and the before/after values read
back from the cluster.

``backend`` chooses between the native backend and Kafka's CLI tools for the
actions both implement. An operator whose action only the native backend has
(member removal, snapshots, preflight, topic offsets, the lock) declares
``supported_backends = ("native",)`` and refuses ``backend="cli"`` when the DAG
is parsed, instead of silently using the native backend.

A ``dry_run`` argument is kept as the attribute ``dry_run_flag``:
``BaseOperator.dry_run()`` is a method, which an attribute of the same name
would hide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any, ClassVar, Generic, TypeVar

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol.artifacts import artifact_root
from airflow_provider_kip848.changecontrol.audit import Change, audit_location, record_changes
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.base import KafkaAdminBaseHook
from airflow_provider_kip848.hooks.cli import KafkaCliHook
from airflow_provider_kip848.hooks.connection import DEFAULT_CONN_ID
from airflow_provider_kip848.kafka.arguments import is_template, parse_flag, require_choice, require_group_id
from airflow_provider_kip848.kafka.errors import InvalidArgument, Kip848Error

BACKENDS = ("native", "cli")


# -- checks made when the DAG is parsed (templated values are checked when rendered) ------------

def check_group_id_arg(group_id: object) -> None:
    """Refuse a group id that cannot be right (empty, blanks around it, control characters) at parse time."""
    if group_id is not None and not is_template(group_id):
        require_group_id(group_id)


def check_flag_arg(value: object, name: str) -> None:
    """Refuse a guard flag that is neither true nor false at parse time (``parse_flag`` rules)."""
    if not is_template(value):
        parse_flag(value, name)


def check_choice_arg(value: object, name: str, choices: Sequence[str]) -> None:
    """Refuse a value outside ``choices`` at parse time."""
    if not is_template(value):
        require_choice(value, name, choices)


#: What an operator's ``run`` returns, and so its XCom: each operator names its own (a TypedDict where the shape is
#: fixed, ``dict[str, object]`` where it varies with the path taken, said at the operator).
ResultT = TypeVar("ResultT", bound=Mapping[str, object])


class KafkaAdminBaseOperator(BaseOperator, Generic[ResultT]):
    """Base of the provider's operators.

    Generic in its result (``KafkaAdminBaseOperator[SnapshotResult]``) so that ``execute``, ``run`` and
    ``audit_changes`` agree on what goes to XCom, and the type checker holds every subclass to it.

    :param kafka_conn_id: a ``kafka_admin`` connection.
    :param backend: ``native`` (default) or ``cli`` (Kafka's own tools) for the actions both implement.
    :param audit_log: where the audit records of the changes go (a local ``.jsonl`` path or an object
        storage URL); default: the connection's extra ``audit_log``, else ``$KIP848_AUDIT_LOG``, else
        ``$AIRFLOW_HOME/kip848/audit.jsonl``.
    :param approval_task_ids: tasks whose ``decision`` XCom authorised the change (quoted in the audit).
    """

    template_fields: tuple[str, ...] = ("kafka_conn_id", "audit_log")
    ui_color = "#e8f0fe"
    #: the backends this operator's action exists in (``backend`` must be one of them)
    supported_backends: ClassVar[tuple[str, ...]] = BACKENDS

    def __init__(self, *, kafka_conn_id: str = DEFAULT_CONN_ID, backend: str = "native",
                 audit_log: str | None = None,
                 approval_task_ids: Sequence[str] = ("approval", "recheck_approval"),
                 **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        if backend not in BACKENDS:
            raise InvalidArgument(f"backend must be one of {BACKENDS}, not {backend!r}.")
        if backend not in self.supported_backends:
            raise InvalidArgument(
                f"{type(self).__name__} (task {self.task_id}) cannot use backend={backend!r}: its action exists "
                f"in the {' and '.join(self.supported_backends)} backend only.",
                remedy="Leave backend at its default ('native').")
        self.kafka_conn_id = kafka_conn_id
        self.backend = backend
        self.audit_log = audit_log
        self.approval_task_ids = tuple(approval_task_ids)

    @cached_property
    def hook(self) -> KafkaAdminBaseHook:
        return KafkaCliHook(self.kafka_conn_id) if self.backend == "cli" else KafkaGroupAdminHook(self.kafka_conn_id)

    @cached_property
    def native_hook(self) -> KafkaGroupAdminHook:
        """Actions only the native backend has (member removal, snapshots, preflight facts)."""
        return self.hook if isinstance(self.hook, KafkaGroupAdminHook) else KafkaGroupAdminHook(self.kafka_conn_id)

    def execute(self, context: Context) -> ResultT:
        try:
            result = self.run(context)
            self._audit(context, result)
            return result
        except Kip848Error as exc:
            if exc.retriable:
                raise
            raise AirflowFailException(str(exc)) from exc
        finally:
            for name in ("hook", "native_hook"):
                if name in self.__dict__:
                    self.__dict__.pop(name).close()

    def run(self, context: Context) -> ResultT:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- audit ---------------------------------------------------------------

    def audit_changes(self, context: Context, result: ResultT) -> list[Change]:
        """``(kind, target, before, after)`` of each change ``run`` applied (read back); none by default."""
        return []

    def _audit(self, context: Context, result: ResultT) -> None:
        changes = self.audit_changes(context, result)
        if changes:
            hook = self.native_hook
            record_changes(context, self.task_id, changes, admin=hook,
                           location=audit_location(self.audit_log, hook.extra("audit_log"),
                                                   artifact_root(self.kafka_conn_id)),
                           approval_task_ids=self.approval_task_ids, log=self.log)
