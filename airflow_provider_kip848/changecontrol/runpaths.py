"""Per-run artifact paths, without Airflow: ``<root>/<dag_id>/<run_id>/<kind>``, and the names a run may choose.

Kept apart from :mod:`artifacts` (which reads connections through Airflow) so
that tools reading a finished run's artifacts (the demo, the test harness)
compute the same folder without importing Airflow before they configure it.

Where a run's files live is the deployment's to say (the connection's extra
``artifacts_url``, ``$KIP848_ARTIFACTS_URL``, ``[kip848]`` options: docs/deploy.md),
never a run's: a Param may choose at most a *name* inside such a location
(:func:`plain_name`), and a name that comes from the cluster or the ownership
map (a group id, an application) becomes one path segment (:func:`path_segment`),
so that nothing a run or a stored name says leads out of the run's folder.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from airflow_provider_kip848.kafka.errors import InvalidArgument

#: The environment variable naming the deployment's artifact location.
ARTIFACTS_ENV = "KIP848_ARTIFACTS_URL"
#: The connection extra naming a cluster's artifact location.
ARTIFACTS_EXTRA = "artifacts_url"
#: a plain file name: letters, digits, ``.``, ``_``, ``-``; not hidden (no leading ``.``), no ``..``, no separator
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,199}")
#: the same rule as a Param's JSON-schema ``pattern`` (the trigger form refuses anything else before a run starts)
NAME_FORM_PATTERN = r"^(?!.*\.\.)[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$"


def given(value: object) -> str | None:
    """A Param or extra that is set (a rendered template gives ``"None"`` for an unset one)."""
    if value is None:
        return None
    text = str(value).strip()
    return None if text in ("", "None") else text


def is_plain_name(value: object) -> bool:
    """``value`` is one plain file name (see :data:`NAME_FORM_PATTERN`)."""
    return isinstance(value, str) and bool(_NAME.fullmatch(value)) and ".." not in value


def plain_name(value: object, what: str, *, where: str) -> str:
    """``value`` when it is one plain file name; :class:`InvalidArgument` otherwise, naming ``what`` (the Param)
    and ``where`` (the location the deployment configures, as the user knows it: never its value)."""
    if is_plain_name(value):
        return str(value)
    shown = repr(value) if len(repr(value)) <= 120 else repr(value)[:117] + "..."
    raise InvalidArgument(
        f"{what}: {shown} is not a plain file name (letters, digits, '.', '_', '-'; no '/', no '..', not hidden): "
        f"{what} names a file in {where}, never a path. Nothing was read or written.",
        remedy=f"Give the file's name alone; the folder is the deployment's ({where}, docs/deploy.md).")


def path_segment(text: str) -> str:
    """One path segment for a name that comes from the cluster or a map (a group id, an application): every
    character but letters, digits and ``_.-~`` percent-encoded (``/`` and ``%`` among them) and a leading ``.``
    too, so the segment is never ``.``, ``..`` or hidden, and two names never share one."""
    segment = quote(str(text), safe="")
    return "%2E" + segment[1:] if segment.startswith(".") else segment


def safe_part(text: str) -> str:
    """A path segment from a DAG or run id (``manual__2026-11-24T12:00:00+00:00`` keeps its meaning); a run id
    of dots (``..``, which Airflow's run id pattern allows) or a leading dot does not lead up or hide a folder."""
    part = re.sub(r"[^A-Za-z0-9._=-]", "_", text)
    return "_" + part[1:] if part.startswith(".") else part


def run_location(root: str, dag_id: str, run_id: str, kind: str) -> str:
    """``<root>/<dag_id>/<run_id>/<kind>``: one folder per run, never another run's."""
    return "/".join([root.rstrip("/"), safe_part(dag_id), safe_part(run_id), kind])
