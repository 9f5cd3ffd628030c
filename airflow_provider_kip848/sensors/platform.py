"""A wait that asks the application's platform (its controller) about the instances: the registry name and a
run's arguments resolved into a :class:`~airflow_provider_kip848.controllers.NamedController`, asked once and
closed, its failures turned into the task's (retried when the platform may answer later). Shared by the Migrated
and the Empty waits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.controllers import ControllerError, NamedController
from airflow_provider_kip848.hooks.instances import named_controller, task_error
from airflow_provider_kip848.kafka.errors import Kip848Error

__all__ = ["ControllerAware"]

T = TypeVar("T")


class ControllerAware:
    """A wait that takes the application's controller (a registry name and a run's arguments) for the
    platform's word on its instances."""

    controller: str | None
    controller_args: dict[str, object] | str | None

    def _named(self) -> NamedController | None:
        try:
            return named_controller(self.controller, self.controller_args)
        except Kip848Error as exc:  # a name or argument the registry refuses: bad input, never retried
            raise AirflowFailException(str(exc)) from exc

    def _baseline(self) -> dict[str, object] | None:
        """The platform's status the wait judges against (``baseline``: the start's), when the wait has one."""
        baseline = getattr(self, "baseline", None)
        return baseline if isinstance(baseline, dict) else None

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
