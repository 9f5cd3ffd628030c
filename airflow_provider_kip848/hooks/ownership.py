"""The ownership map as the deployment keeps it: an Airflow Variable, or a file of the deployment's ownership folder.

One reader for everyone who needs the map: the fleet migration DAG's plan and recheck
(:mod:`airflow_provider_kip848.operators.fleet_tasks`) and the fleet view's owner columns
(:mod:`airflow_provider_kip848.plugins.fleet_data`). Both then ask the same
:class:`~airflow_provider_kip848.fleet.ownership.OwnershipMap`, so the page shows the owner a run would plan
with, never a second reading of the rules.

The Variable is read through the Task SDK (``airflow.sdk.Variable``): in a task through the execution API,
in the API server through the deployment's secrets backends and the metadata DB.

A file is chosen by its *name* in the folder the deployment configures (``[kip848] ownership_dir``), never by a
path: a run that could name a path could make the worker read any file it can (``/etc/passwd``, a SASL
``client.properties``) and show parts of it in the errors. The name is one plain file name
(``runpaths.plain_name``), and a link in the folder pointing out of it is refused before anything is read.
Messages name the file as the run gave it, never the folder's path.

A Variable is chosen by a name that starts with the deployment's prefix for ownership maps (``[kip848]
ownership_variable_prefix``, default ``kip848_``), checked before anything is read: a run that could name any
Variable could make the plan read another team's Variable (a credential, a connection string) and show its key
names or a parser's excerpt of it in the plan's errors.
"""

from __future__ import annotations

import re
from pathlib import Path

from airflow.sdk import Variable
from airflow.sdk.configuration import conf

from airflow_provider_kip848.changecontrol.runpaths import given, plain_name
from airflow_provider_kip848.fleet.ownership import OwnershipError, OwnershipMap
from airflow_provider_kip848.kafka.errors import InvalidArgument

#: the Variable the fleet migration DAG and the fleet view read the map from by default
DEFAULT_OWNERSHIP_VARIABLE = "kip848_ownership_map"
#: the prefix every Variable holding an ownership map has (``ownership_variable`` names one of them)
VARIABLE_PREFIX_OPTION, DEFAULT_VARIABLE_PREFIX = "ownership_variable_prefix", "kip848_"
#: what a Variable's name may hold (Airflow's own keys are free text: a name with blanks or quotes is refused)
_VARIABLE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,250}")
#: the deployment's folder of ownership map files (``ownership_file`` names one of them)
OWNERSHIP_DIR_SECTION, OWNERSHIP_DIR_OPTION = "kip848", "ownership_dir"
#: how the folder is named in messages (its path never is)
OWNERSHIP_DIR = f"the deployment's ownership folder ([{OWNERSHIP_DIR_SECTION}] {OWNERSHIP_DIR_OPTION})"


class OwnershipMapMissing(InvalidArgument):
    """No ownership map named, the named Variable does not exist, or the named file is not in the deployment's
    ownership folder (or no folder is configured)."""

    remedy = ("Create the Airflow Variable holding the ownership map (YAML or JSON, docs/fleet.md), or name the "
              f"one that does (ownership_variable), or give the name of a map file of {OWNERSHIP_DIR} "
              "(ownership_file).")


def ownership_file_location(name: object) -> Path:
    """The real path of the map file ``name`` in the deployment's ownership folder.

    :raises InvalidArgument: ``name`` is not a plain file name, or it is a link leading out of the folder.
    :raises OwnershipMapMissing: no folder is configured, or no such file is in it.
    """
    checked = plain_name(name, "ownership_file", where=OWNERSHIP_DIR)
    folder = given(conf.get(OWNERSHIP_DIR_SECTION, OWNERSHIP_DIR_OPTION, fallback=None))
    if folder is None:
        raise OwnershipMapMissing(f"ownership_file {checked!r} names a map of {OWNERSHIP_DIR}, but this deployment "
                                  "configures none.",
                                  remedy=f"Ask the deployment's administrator to set [{OWNERSHIP_DIR_SECTION}] "
                                         f"{OWNERSHIP_DIR_OPTION} (docs/fleet.md), or use ownership_variable.")
    base = Path(folder).expanduser().resolve()
    path = (base / checked).resolve()
    if not path.is_relative_to(base):
        raise InvalidArgument(f"ownership_file {checked!r} leads out of {OWNERSHIP_DIR} (a link): refused, nothing "
                              "read.", remedy="Name a map file that is in the folder itself.")
    if not path.is_file():
        raise OwnershipMapMissing(f"There is no ownership map {checked!r} in {OWNERSHIP_DIR}.")
    return path


def ownership_variable_name(name: object) -> str:
    """``name`` when it may name an ownership map's Variable: a plain name starting with the deployment's prefix
    (``[kip848] ownership_variable_prefix``, default ``kip848_``). Checked before the Variable is read.

    :raises InvalidArgument: any other name (the Variable is not read, and nothing of it is shown).
    """
    prefix = given(conf.get(OWNERSHIP_DIR_SECTION, VARIABLE_PREFIX_OPTION, fallback=None)) or DEFAULT_VARIABLE_PREFIX
    if not isinstance(name, str) or not _VARIABLE_NAME.fullmatch(name) or not name.startswith(prefix):
        raise InvalidArgument(
            f"ownership_variable {name!r} is not the name of an ownership map's Variable: those start with "
            f"{prefix!r} ([{OWNERSHIP_DIR_SECTION}] {VARIABLE_PREFIX_OPTION}); it was not read.",
            remedy=f"Name the Variable that holds the ownership map (e.g. {DEFAULT_OWNERSHIP_VARIABLE}), or ask the "
                   "deployment's administrator to keep the map in a Variable with that prefix.")
    return name


def read_ownership_map(*, variable: str | None, file: str | None = None) -> OwnershipMap:
    """The ownership map in the file named ``file`` of the deployment's ownership folder (when given: it takes
    precedence) or in the Airflow Variable ``variable``.

    :raises InvalidArgument: ``file`` is not a plain file name, or leads out of the folder; ``variable`` is not an
        ownership map's name (:func:`ownership_variable_name`).
    :raises OwnershipMapMissing: neither is named, the Variable does not exist, or no such file is in the folder.
    :raises ~airflow_provider_kip848.fleet.ownership.OwnershipError: the map does not parse (every problem).
    """
    if given(file) is not None:
        path = ownership_file_location(file)
        source = f"file {file} of {OWNERSHIP_DIR}"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise OwnershipError(source, [f"cannot be read: {exc.strerror or type(exc).__name__}"]) from exc
        return OwnershipMap.from_text(text, source=source, json_only=path.suffix.lower() == ".json")
    if not variable:
        raise OwnershipMapMissing("Name the ownership map: ownership_file or ownership_variable.")
    text = Variable.get(ownership_variable_name(variable), default=None)
    if text is None:
        raise OwnershipMapMissing(f"There is no Airflow Variable {variable!r} holding the ownership map: create it "
                                  "(YAML or JSON, docs/fleet.md) or give ownership_file.")
    return OwnershipMap.from_text(text, source=f"Variable {variable}")


__all__ = ["DEFAULT_OWNERSHIP_VARIABLE", "OWNERSHIP_DIR_OPTION", "OWNERSHIP_DIR_SECTION", "OwnershipMapMissing",
           "ownership_file_location", "ownership_variable_name", "read_ownership_map"]
