"""Application controllers: how a DAG stops and starts the application it migrates.

The provider does not own deployments. The offline migrations call a
controller at two points, "stop every instance" and "start with
``group.protocol=...``". In production this is a few lines against the
team's platform (scale a Kubernetes Deployment to 0 and back with a changed
ConfigMap, stop a systemd unit ...). The controller is named in the DAG's
Params as ``"module:Class"`` with keyword arguments, so the DAG file stays
the same everywhere.

The fleet migration (``dags/kip848_fleet_migration.py``) also calls ``roll``
(:class:`RollingApplicationController`) for the applications it moves online.

The embedded demo's controller (Kafka's WordCountDemo on the local broker) is
:class:`airflow_provider_kip848.testing.appcontrol.LocalWordCountController`.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol, runtime_checkable

from airflow_provider_kip848.kafka.errors import InvalidArgument


class ApplicationController(Protocol):
    """Stops and starts every instance of one application."""

    def stop(self) -> dict[str, Any]:
        """Stop every instance; return what was stopped (small JSON).

        Return ``"instances_gone": True`` only when the controller has *confirmed* that no instance is left
        (every process exited, the Deployment's pods terminated): nothing of the application can heartbeat
        again, so the empty wait forces out the members they left behind at once and needs no settle time
        (``KafkaGroupEmptySensor(instances_gone=...)``). Without it the wait gives the members
        ``remove_members_after`` to leave and the group ``empty_settle_seconds`` to stay Empty."""

    def start(self, group_protocol: str) -> dict[str, Any]:
        """Start the application with ``group.protocol``; return what was started (small JSON)."""


@runtime_checkable
class RollingApplicationController(ApplicationController, Protocol):
    """A controller that can also restart the instances one at a time (a Kubernetes rolling update with a
    changed ConfigMap): the fleet migration's online path. A controller without ``roll`` can only take the
    offline path (its applications need ``migration: offline`` in the ownership map)."""

    def roll(self, group_protocol: str) -> dict[str, Any]:
        """Restart every instance in turn with ``group.protocol`` while the others keep running; return what
        was rolled (small JSON)."""


def load_controller(spec: str, kwargs: dict[str, Any] | None = None) -> ApplicationController:
    """``"package.module:Factory"`` + kwargs -> a controller."""
    module, _, attr = str(spec).partition(":")
    if not module or not attr:
        raise InvalidArgument(f"controller spec {spec!r} is not 'module:Class'",
                              remedy="Name the controller as package.module:ClassName.")
    factory = getattr(importlib.import_module(module), attr)
    controller: ApplicationController = factory(**(kwargs or {}))
    return controller
