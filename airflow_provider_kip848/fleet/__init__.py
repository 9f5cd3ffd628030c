"""Fleet planning: which application owns each group, which applications move in which wave, when to stop.

Pure and Airflow-free (layer 1: it imports the Kafka core only). The fleet
migration DAG calls it with an inventory
(:meth:`~airflow_provider_kip848.kafka.native.KafkaAdmin.inventory`) and the
platform team's ownership map:

* :mod:`.ownership`: the map (prefix or regex -> application, team,
  controller, expected instances), parsed strictly from JSON or YAML;
* :mod:`.waves`: selection (a group moves with its application; an
  application with one blocked or unknown group is held back whole) and the
  wave plan (canary, wave size, blast radius, a hash per plan and per wave);
* :mod:`.budget`: the error budget that stops the remaining waves, and what
  remains of a plan once some groups are migrated (resumability).

docs/fleet.md describes the file format and the rules.
"""

from airflow_provider_kip848.fleet.applications import TARGET_TYPE, Application, PlannedGroup
from airflow_provider_kip848.fleet.budget import ErrorBudget, GroupResult, Remaining, WaveVerdict, remaining
from airflow_provider_kip848.fleet.ownership import (
    Conflict,
    GroupOwner,
    IdleApplication,
    OwnershipError,
    OwnershipMap,
    OwnershipNotApprovable,
    OwnershipRule,
)
from airflow_provider_kip848.fleet.selection import Selection, select
from airflow_provider_kip848.fleet.waves import Wave, WaveLimits, WavePlan, plan_waves

__all__ = [
    "TARGET_TYPE",
    "Application",
    "Conflict",
    "ErrorBudget",
    "GroupOwner",
    "GroupResult",
    "IdleApplication",
    "OwnershipError",
    "OwnershipMap",
    "OwnershipNotApprovable",
    "OwnershipRule",
    "PlannedGroup",
    "Remaining",
    "Selection",
    "Wave",
    "WaveLimits",
    "WavePlan",
    "WaveVerdict",
    "plan_waves",
    "remaining",
    "select",
]
