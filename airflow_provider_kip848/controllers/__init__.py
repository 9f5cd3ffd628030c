"""Application controllers: how a migration stops, starts and rolls an application, and what the platform says
about its instances.

A deployment registers one controller per application (:mod:`.registry`: a YAML
file named by ``[kip848] controllers``; classes added by entry point); a run or
the fleet's ownership map chooses one *by name*. Shipped kinds:
:class:`~.command.CommandController` (the platform's own commands, on the
worker or over SSH). See docs/controllers.md.

This package's top level (the protocol, its facts, the schema, the verdicts)
imports no Airflow, so a process can name it before configuring Airflow (the
demo does); the registry (:mod:`.registry`, Airflow's configuration) and the
command controller (:mod:`.command`, Airflow connections) are imported from
their modules.
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
    InstanceLog,
)
from airflow_provider_kip848.controllers.schema import Arg
from airflow_provider_kip848.controllers.verdicts import instance_problems, lost_instances, member_instance

__all__ = [
    "GROUP_PROTOCOLS",
    "ApplicationController",
    "ApplicationStatus",
    "Arg",
    "ClientConfig",
    "ControllerError",
    "ControllerRefused",
    "ControllerRegistryInvalid",
    "Instance",
    "InstanceLog",
    "NamedController",
    "PlatformError",
    "instance_problems",
    "lost_instances",
    "member_instance",
]
