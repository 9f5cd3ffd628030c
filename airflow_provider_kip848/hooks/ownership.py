"""The ownership map as the deployment keeps it: an Airflow Variable (or a file every worker reads).

One reader for everyone who needs the map: the fleet migration DAG's plan and recheck
(:mod:`airflow_provider_kip848.operators.fleet_tasks`) and the fleet view's owner columns
(:mod:`airflow_provider_kip848.plugins.fleet_data`). Both then ask the same
:class:`~airflow_provider_kip848.fleet.ownership.OwnershipMap`, so the page shows the owner a run would plan
with, never a second reading of the rules.

The Variable is read through the Task SDK (``airflow.sdk.Variable``): in a task through the execution API,
in the API server through the deployment's secrets backends and the metadata DB.
"""

from __future__ import annotations

from airflow.sdk import Variable

from airflow_provider_kip848.fleet.ownership import OwnershipMap
from airflow_provider_kip848.kafka.errors import InvalidArgument

#: the Variable the fleet migration DAG and the fleet view read the map from by default
DEFAULT_OWNERSHIP_VARIABLE = "kip848_ownership_map"


class OwnershipMapMissing(InvalidArgument):
    """No ownership map named, or the named Variable does not exist."""

    remedy = ("Create the Airflow Variable holding the ownership map (YAML or JSON, docs/fleet.md), or name the "
              "one that does (ownership_variable), or give ownership_file.")


def read_ownership_map(*, variable: str | None, file: str | None = None) -> OwnershipMap:
    """The ownership map in ``file`` (when given: it takes precedence) or in the Airflow Variable ``variable``.

    :raises OwnershipMapMissing: neither is named, or the Variable does not exist.
    :raises ~airflow_provider_kip848.fleet.ownership.OwnershipError: the map does not parse (every problem).
    """
    if file:
        return OwnershipMap.from_file(file)
    if not variable:
        raise OwnershipMapMissing("Name the ownership map: ownership_file or ownership_variable.")
    text = Variable.get(variable, default=None)
    if text is None:
        raise OwnershipMapMissing(f"There is no Airflow Variable {variable!r} holding the ownership map: create it "
                                  "(YAML or JSON, docs/fleet.md) or give ownership_file.")
    return OwnershipMap.from_text(text, source=f"Variable {variable}")


__all__ = ["DEFAULT_OWNERSHIP_VARIABLE", "OwnershipMapMissing", "read_ownership_map"]
