"""A run's conf keys against the DAG's Params: a key no Param declares fails the run's first task.

Airflow takes such a key in: ``DAG.create_dagrun`` merges the conf into the
Params (``deep_merge`` adds an unknown key as a Param of its own) and the task's
``ParamsDict.update`` does the same, so a run triggered with ``{"dry_rn": true}``
starts, and ``dry_run`` keeps its default: the real change. :func:`check_run_conf`
refuses it, naming the key and the closest Param. Every example DAG calls it in
its first task (the window guard, the controller task, the change lock, the
inventory's reads), so the run fails before the change lock and before anything
is read from the application or changed. A key that was a Param naming a path or URL
(``report_dir``, ``snapshot_dir``, ``audit_log``, ``validation_dir``, the inventory's
``report_path``) is refused saying where that location is configured now.

Airflow takes any JSON as a run's conf, and a Param's JSON schema does not refuse ``NaN`` (``NaN < minimum`` is
false, so ``minimum`` and ``maximum`` both pass it), while Python's ``json`` reads ``NaN`` and ``Infinity``. The
same first task holds the conf to the documents' bounds (:func:`~airflow_provider_kip848.kafka.documents.check_value`:
nesting, size, every number finite), naming the key, before any task converts a value with ``int()`` or ``float()``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.kafka.documents import check_value
from airflow_provider_kip848.kafka.errors import InvalidArgument

#: Params that named a path or URL, removed (docs/reliability.md, "No Param names a path"): where each location is
#: configured now. A run that still sends one is refused with this, never quietly given the deployment's location.
_ARTIFACTS = ("the connection's extra artifacts_url, else $KIP848_ARTIFACTS_URL (docs/deploy.md, section 8), in the "
              "run's own folder <dag_id>/<run_id>/")
REMOVED_PARAMS = {
    "report_dir": f"a run's report is written under {_ARTIFACTS}report",
    "snapshot_dir": f"a run's snapshots are written under {_ARTIFACTS}snapshots",
    "audit_log": ("audit records go to the connection's extra audit_log, else $KIP848_AUDIT_LOG, else the artifact "
                  "location's audit (docs/deploy.md, section 8)"),
    "validation_dir": ("the wave validation writes under the workers' $KIP848_VALIDATION_DIR, else the run's "
                       "validation folder of the artifact location (docs/validation.md)"),
    "report_path": ("the inventory's report file is written into the run's own report folder of the artifact "
                    "location: give its file name alone in report_file"),
}


def refuse_unknown_keys(conf: Mapping[str, object] | None, declared: Iterable[str], *, dag_id: str = "") -> None:
    """:class:`InvalidArgument` naming each key of ``conf`` that is not in ``declared``, with the closest Param;
    a removed Param that named a path (:data:`REMOVED_PARAMS`) with where that location is configured now."""
    names = sorted(declared)
    unknown = sorted(str(k) for k in (conf or {}) if k not in names)
    if not unknown:
        return
    removed = [k for k in unknown if k in REMOVED_PARAMS]
    typos = [k for k in unknown if k not in REMOVED_PARAMS]

    def closest(key: str) -> str:
        near = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
        return f"{key!r} (did you mean {near[0]!r}?)" if near else repr(key)

    of = f" of DAG {dag_id}" if dag_id else ""
    parts = []
    if removed:
        parts.append(f"The run's conf names a location, which a run never chooses (no Param{of} names a path): "
                     + "; ".join(f"{k!r}: {REMOVED_PARAMS[k]}" for k in removed) + ".")
    if typos:
        parts.append(f"The run's conf has key(s) no Param{of} declares: {', '.join(closest(k) for k in typos)}. "
                     "Airflow would pass them on unused while the Params they were meant for keep their defaults.")
    raise InvalidArgument(
        " ".join(parts) + " Nothing was done.",
        remedy=(f"Trigger the run again without {', '.join(map(repr, removed))} (the deployment's administrator "
                "sets those locations) and " if removed else "Trigger the run again ")
        + f"with the DAG's Param names only (the trigger form lists them: {', '.join(names)}).")


def check_run_conf(context: Mapping[str, Any]) -> None:  # Any: a task's Context, or a @task's keyword context
    """Fail the task (no retry) when the run's conf has a key the DAG's Params do not declare, or a value beyond
    the documents' bounds (a number that is not finite, nesting or text past the limits). A DAG that declares no
    Params takes free-form conf: only its bounds are checked."""
    dag = context.get("dag")
    declared = list(getattr(dag, "params", None) or {})
    conf = getattr(context.get("dag_run"), "conf", None) or {}
    try:
        check_value(conf, "the run's conf")
        if declared:
            refuse_unknown_keys(conf, declared, dag_id=getattr(dag, "dag_id", ""))
    except InvalidArgument as exc:
        raise AirflowFailException(str(exc)) from exc
