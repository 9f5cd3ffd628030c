"""The fleet page's facts: every group of a cluster with its owner, its verdicts and its links, filtered.

:func:`read_fleet` reads one inventory through a ``kafka_admin`` connection and the ownership map through
:func:`~airflow_provider_kip848.hooks.ownership.read_ownership_map` (the reader the fleet migration DAG uses);
:func:`fleet_summary` (pure) joins them: each group's application and team are the map's answer
(:meth:`~airflow_provider_kip848.fleet.ownership.OwnershipMap.owners`, the rules the fleet plan applies: first
matching rule; none: ``unowned``; rules of two applications: both, flagged, as the plan refuses the group).

Filters (:data:`FILTERS`: application, team, readiness, type, state) are applied here, on the server: a
filter value that matches nothing leaves an empty table whose note names that filter, never every group. The
counts (by type, state, readiness) stay those of the whole inventory read.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

from airflow_provider_kip848.changecontrol.run_artifacts import PROVIDER_DAG_IDS
from airflow_provider_kip848.fleet.ownership import GroupOwner, OwnershipMap
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.ownership import DEFAULT_OWNERSHIP_VARIABLE, read_ownership_map
from airflow_provider_kip848.kafka.errors import ConnectionNotFound, InvalidArgument, Kip848Error
from airflow_provider_kip848.kafka.inert import visible
from airflow_provider_kip848.kafka.inventory import GroupInventory, InventoryEntry, Readiness
from airflow_provider_kip848.kafka.model import GroupState, GroupType

URL_PREFIX = "/kip848"
#: migration -> readiness -> the example DAG that runs it (no DAG: nothing to run until the reason is fixed)
MIGRATION_DAGS: dict[str, dict[str, str]] = {
    "classic_to_consumer": {Readiness.READY_ONLINE: "kip848_consumer_rolling_upgrade",
                            Readiness.OFFLINE_ONLY: "kip848_consumer_offline_migration"},
    "consumer_to_classic": {Readiness.READY_ONLINE: "kip848_consumer_offline_migration",
                            Readiness.OFFLINE_ONLY: "kip848_consumer_offline_migration"},
    "classic_to_streams": {Readiness.READY_ONLINE: "kip1071_streams_offline_migration",
                           Readiness.OFFLINE_ONLY: "kip1071_streams_offline_migration"},
    "streams_to_classic": {Readiness.READY_ONLINE: "kip1071_streams_rollback_to_classic",
                           Readiness.OFFLINE_ONLY: "kip1071_streams_rollback_to_classic"},
}
READINESS_ORDER = [r.value for r in (Readiness.READY_ONLINE, Readiness.OFFLINE_ONLY, Readiness.BLOCKED,
                                     Readiness.UNKNOWN)]
UNKNOWN = "unknown"
#: the owner of a group that no rule of the ownership map matches (also a filter value)
UNOWNED = "unowned"
#: the page's filters (query parameters), in the order the page shows them
FILTERS = ("app", "team", "readiness", "type", "state")
FILTER_NAMES = {"app": "application", "team": "team", "readiness": "readiness", "type": "type", "state": "state"}
#: the DAGs whose runs keep the fleet page refreshing while one is active: every DAG of the provider (each
#: changes groups, their configs or the cluster's features, which the page shows)
PROVIDER_DAGS = PROVIDER_DAG_IDS


# -- filters (pure) -----------------------------------------------------------------------------


def _display_state(state: str) -> str:
    return UNKNOWN if state == GroupState.UNKNOWN.value else state


def check_filters(given: Mapping[str, str | None]) -> dict[str, str]:
    """The filters that are set (an empty value is the form's "any"), with readiness, type and state checked
    against the values they can take: a value that can never match is refused (InvalidArgument), not shown as
    an empty fleet. Application and team are names of the ownership map (or ``unowned``): one it does not know
    matches nothing, which the page says."""
    out = {k: str(v).strip() for k, v in given.items() if k in FILTERS and v is not None and str(v).strip()}
    allowed = {"readiness": READINESS_ORDER, "type": [t.value for t in GroupType],
               "state": sorted({_display_state(s.value) for s in GroupState})}
    for key, values in allowed.items():
        if key in out and out[key] not in values:
            raise InvalidArgument(f"filter {key}={out[key]!r} is not one of {', '.join(values)}",
                                  remedy=f"Choose the {FILTER_NAMES[key]} from the page's list, or leave it empty.")
    return out


def _matches(row: Mapping[str, Any], key: str, value: str) -> bool:
    owner = row["owner"]
    if key in ("app", "team"):
        if owner["status"] == UNKNOWN:
            return False  # the map could not be read: no owner is known, none is guessed
        if value == UNOWNED:
            return owner["status"] == UNOWNED
        names = {c[key] for c in owner["claims"]} | {owner[key]}
        # the page shows (and its filter sends back) a name with an invisible character as its escape (pages.py)
        return value in names or value in {visible(n) for n in names if isinstance(n, str)}
    if key == "readiness":
        return any(v["readiness"] == value for v in row["verdicts"])
    if key == "state":
        return _display_state(row["state"]) == value
    return bool(row[key] == value)


def filter_groups(rows: list[dict[str, Any]], filters: Mapping[str, str],
                  ownership_error: str | None = None,
                  ) -> tuple[list[dict[str, Any]], str | None]:  # Any: the page's rows, JSON for the template
    """(the rows every filter matches, why there are none: the filters that match no group alone, or that
    no group matches them all together; None when some row is shown or nothing is filtered)."""
    shown = [r for r in rows if all(_matches(r, k, v) for k, v in filters.items())]
    if shown or not filters:
        return shown, None
    alone = [f"{FILTER_NAMES[k]} {v!r}" for k, v in filters.items() if not any(_matches(r, k, v) for r in rows)]
    if alone:
        note = "No group matches " + " and ".join(alone)
        if ownership_error and any(k in ("app", "team") for k in filters):
            note += f" (the ownership map could not be read: {ownership_error})"
        return [], note + "."
    together = ", ".join(f"{FILTER_NAMES[k]} {v!r}" for k, v in filters.items())
    return [], f"No group matches all of these filters together: {together}."


def filter_query(filters: Mapping[str, str], **extra: str | None) -> str:
    """The query string that keeps the filters (and ``extra``, e.g. the connection) in a link."""
    params = {k: v for k, v in {**extra, **filters}.items() if v}
    return urlencode(params, quote_via=quote)


# -- the summary (pure) -------------------------------------------------------------------------


def group_links(entry: InventoryEntry, ui_base: str = "/") -> dict[str, object]:
    """The pages of one group: the UI's DAG runs whose conf names it (the single-group DAGs), the runs of the
    fleet migration DAG whose plan moves it (the fleet runs page: their conf names applications, not groups),
    and the DAG of each migration its verdicts allow."""
    runs = f"{ui_base}dag_runs?{urlencode({'conf_contains': json.dumps(entry.group_id)}, quote_via=quote)}"
    fleet_runs = f"{ui_base}{URL_PREFIX.lstrip('/')}/runs?{urlencode({'group_id': entry.group_id}, quote_via=quote)}"
    dags = {}
    for v in entry.verdicts:
        dag_id = MIGRATION_DAGS.get(v.migration, {}).get(v.readiness)
        if dag_id:
            dags[v.migration] = {"dag_id": dag_id, "url": f"{ui_base}dags/{dag_id}"}
    return {"runs": runs, "fleet_runs": fleet_runs, "dags": dags}


def _owner(owner: GroupOwner | None) -> dict[str, Any]:
    if owner is None:
        return {"status": UNKNOWN, "app": None, "team": None, "claims": [], "conflict": False}
    return {"status": "owned" if owner.owned else UNOWNED, "app": owner.app, "team": owner.team,
            "claims": [{"app": a, "team": t} for a, t in owner.claims], "conflict": owner.conflict}


def _group_row(entry: InventoryEntry, ui_base: str, owner: GroupOwner | None) -> dict[str, Any]:
    return {
        "group_id": entry.group_id,
        "type": entry.type.value,
        "state": entry.state.value,
        "members": entry.member_count,
        "is_mixed": entry.is_mixed,
        "lag": entry.lag,
        "assignor": entry.assignor,
        "error": entry.error,
        "offsets_error": entry.offsets_error,
        "verdicts": [{"migration": v.migration, "readiness": v.readiness.value, "reason": v.reason,
                      "remedy": v.remedy} for v in entry.verdicts],
        "owner": _owner(owner),
        "links": group_links(entry, ui_base),
    }


def fleet_summary(inventory: GroupInventory, conn_id: str, ui_base: str = "/", *,
                  ownership: OwnershipMap | None = None, ownership_variable: str = DEFAULT_OWNERSHIP_VARIABLE,
                  ownership_error: str | None = None, filters: Mapping[str, str] | None = None,
                  active_runs: int | None = None) -> dict[str, Any]:  # Any: the page's JSON (template and /json)
    """What the page shows, as plain JSON: counts by type, state and readiness, and one row per group (with its
    owner from ``ownership``; None: not read, ``ownership_error`` says why, every owner ``unknown``) that the
    ``filters`` (:func:`check_filters`) keep. ``ui_base``: the Airflow UI's base path, for the links.
    ``active_runs``: runs of the provider's DAGs queued or running (the page refreshes while there are)."""
    filters = dict(filters or {})
    by_type_state: dict[str, Counter[str]] = {}
    for e in inventory.entries:
        by_type_state.setdefault(e.type.value, Counter())[e.state.value] += 1
    warnings = []
    if inventory.unanswered_brokers:
        warnings.append("Incomplete: brokers " + ", ".join(f"{n} ({err})" for n, err in
                                                           sorted(inventory.unanswered_brokers.items()))
                        + " did not answer ListGroups; the groups they coordinate may be missing.")
    if inventory.cluster_error:
        warnings.append(f"The cluster-wide facts could not be read, every verdict is unknown: "
                        f"{inventory.cluster_error}")
    if inventory.absent:
        warnings.append("Not found on the cluster: " + ", ".join(inventory.absent))
    if ownership is None:
        warnings.append(f"Owners unknown: the ownership map (Variable {ownership_variable}) could not be read: "
                        f"{ownership_error}")
    owners = ownership.owners(e.group_id for e in inventory.entries) if ownership is not None else {}
    rows = [_group_row(e, ui_base, owners.get(e.group_id)) for e in inventory.entries]
    shown, note = filter_groups(rows, filters, ownership_error if ownership is None else None)
    conflicts = [r["group_id"] for r in rows if r["owner"]["conflict"]]
    return {
        "conn_id": conn_id,
        "error": None,
        "warnings": warnings,
        "taken_at": inventory.taken_at.isoformat(),
        "elapsed_s": round(inventory.elapsed_s, 3),
        "complete": inventory.complete,
        "unanswered_brokers": {str(k): v for k, v in sorted(inventory.unanswered_brokers.items())},
        "cluster_error": inventory.cluster_error,
        "absent": list(inventory.absent),
        "group_count": len(inventory),
        "by_type": dict(sorted(Counter(e.type.value for e in inventory.entries).items())),
        "by_state": dict(sorted(Counter(e.state.value for e in inventory.entries).items())),
        "by_type_state": {t: dict(sorted(c.items())) for t, c in sorted(by_type_state.items())},
        "readiness": inventory.readiness_counts(),
        "unknown_groups": len(inventory.unknown),
        "ownership": {"variable": ownership_variable, "source": ownership.source if ownership else None,
                      "error": ownership_error, "apps": list(ownership.apps) if ownership else [],
                      "teams": list(ownership.teams) if ownership else [], "conflicts": conflicts,
                      "unowned": sum(1 for r in rows if r["owner"]["status"] == UNOWNED)},
        "filters": filters,
        "filter_note": note,
        "shown_count": len(shown),
        "active_runs": active_runs,
        "groups": shown,
    }


def error_summary(conn_id: str, exc: BaseException) -> dict[str, Any]:  # Any: the page's JSON, as fleet_summary
    """What the page shows when there is no inventory: the error, never an empty fleet."""
    return {"conn_id": conn_id, "error": str(exc), "error_type": type(exc).__name__, "groups": None}


# -- reading (I/O) ------------------------------------------------------------------------------


def read_owners(variable: str) -> tuple[OwnershipMap | None, str | None]:
    """(the ownership map in Airflow Variable ``variable``, None) or (None, why it could not be read)."""
    try:
        return read_ownership_map(variable=variable), None
    except Kip848Error as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - a secrets backend's failure: said on the page, owners unknown
        return None, f"{type(exc).__name__}: {exc}"


def group_ids_param(raw: str | None) -> list[str] | None:
    """``a,b`` -> ["a", "b"] (each checked by the inventory: a bad id is a 400); None (no ``group_ids``): every
    group. Given but naming none (``group_ids=`` or ``,``): [], which the inventory refuses (a 400), never the
    whole fleet."""
    return None if raw is None else [g.strip() for g in raw.split(",") if g.strip()]


def read_fleet(conn_id: str, group_ids: Iterable[str] | None, timeout_s: float | None, ui_base: str, *,
               filters: Mapping[str, str | None] | None = None,
               ownership_variable: str = DEFAULT_OWNERSHIP_VARIABLE, may_read_ownership: bool = True,
               active_runs: int | None = None) -> tuple[int, dict[str, Any]]:  # Any: the page's JSON
    """(HTTP status, summary) of the cluster behind ``conn_id``: 200, 404 (no such connection), 400 (bad
    input) or 502 (the cluster did not answer) with the error. The owners are read from the Variable
    ``ownership_variable`` unless the user may not read it (``may_read_ownership``: then they are unknown, and
    the page says why)."""
    try:
        checked = check_filters(filters or {})
    except InvalidArgument as exc:  # before the cluster is read: nothing was asked of it
        return 400, {**error_summary(conn_id, exc), "refused": "a filter"}
    try:
        with KafkaGroupAdminHook(conn_id) as hook:
            inventory = hook.inventory(group_ids, timeout_s=timeout_s)
    except ConnectionNotFound as exc:
        return 404, error_summary(conn_id, exc)
    except (ValueError, TypeError) as exc:
        return 400, error_summary(conn_id, exc)
    except Kip848Error as exc:
        return 502, error_summary(conn_id, exc)
    if may_read_ownership:
        ownership, error = read_owners(ownership_variable)
    else:
        ownership, error = None, "this user may not read that Variable"
    return 200, fleet_summary(inventory, conn_id, ui_base, ownership=ownership, ownership_variable=ownership_variable,
                              ownership_error=error, filters=checked, active_runs=active_runs)


__all__ = ["FILTERS", "MIGRATION_DAGS", "PROVIDER_DAGS", "UNOWNED", "URL_PREFIX", "check_filters", "error_summary",
           "filter_groups", "filter_query", "fleet_summary", "group_ids_param", "group_links", "read_fleet",
           "read_owners"]
