"""Application controllers: how a migration stops, starts and rolls an application, and what the platform says
about its instances.

A deployment registers one controller per application (:mod:`.registry`: a YAML
file named by ``[kip848] controllers``; classes added by entry point); a run or
the fleet's ownership map chooses one *by name*. Shipped kinds:
:class:`~.command.CommandController` (the platform's own commands, on the
worker or over SSH). See docs/controllers.md.
"""

from airflow_provider_kip848.controllers.errors import (
    ControllerError,
    ControllerRefused,
    ControllerRegistryInvalid,
    PlatformError,
)
from airflow_provider_kip848.controllers.named import NamedController
from airflow_provider_kip848.controllers.protocol import (
    GROUP_PROTOCOLS,
    ApplicationController,
    ApplicationStatus,
    ClientConfig,
    Instance,
)
from airflow_provider_kip848.controllers.registry import (
    ENTRY_POINT_GROUP,
    ControllerEntry,
    ControllerRegistry,
    resolve_controller,
)
from airflow_provider_kip848.controllers.schema import Arg
from airflow_provider_kip848.controllers.verdicts import instance_problems, member_instance

__all__ = [
    "ENTRY_POINT_GROUP",
    "GROUP_PROTOCOLS",
    "ApplicationController",
    "ApplicationStatus",
    "Arg",
    "ClientConfig",
    "ControllerEntry",
    "ControllerError",
    "ControllerRefused",
    "ControllerRegistry",
    "ControllerRegistryInvalid",
    "Instance",
    "NamedController",
    "PlatformError",
    "instance_problems",
    "member_instance",
    "resolve_controller",
]
