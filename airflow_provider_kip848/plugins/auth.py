"""Who may read a DAG's runs through the provider's plugin pages: the REST API's own checks, for plugin apps.

Airflow does not protect plugin apps: each route of the reports app depends on :func:`signed_in_user` (the JWT
of the ``Authorization: Bearer`` header or of the UI's session cookie, resolved by the API server's
``get_user``: 401 without a valid one) and checks :func:`refused_access` for every DAG it shows: the user must
be allowed to read the DAG's runs, task instances and XComs (``is_authorized_dag(GET)`` for each access entity,
with the DAG's team), as the REST API checks them and as the fleet runs page does
(``fleet_view.authorized_dag_reader``, which takes its DAG from the query string; the reports pages take it
from the path or read many DAGs at once, hence these two functions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

if TYPE_CHECKING:
    from airflow.api_fastapi.auth.managers.models.base_user import BaseUser

#: what a page about a DAG's runs reads of it: its runs, their task instances and their XComs
DAG_READ_ACCESS = ("RUN", "TASK_INSTANCE", "XCOM")

_bearer = HTTPBearer(auto_error=False)


async def signed_in_user(request: Request,
                         credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)] = None,
                         ) -> BaseUser:
    """The signed-in user (bearer token or the UI's cookie); 401 without a valid token."""
    # The API server's security module: ~2 s to import and only the API server serves requests, while every
    # Airflow process (scheduler, each task) loads plugins: imported where a request is served.
    from airflow.api_fastapi.core_api.security import get_user  # noqa: PLC0415 - see above

    return await get_user(request, None, credentials)


def refused_access(user: BaseUser, dag_id: str) -> list[str]:
    """The access entities of :data:`DAG_READ_ACCESS` the user may not read for ``dag_id`` (empty: allowed)."""
    # The API server's auth manager and the metadata DB's models: imported where a request is served (see above).
    from airflow.api_fastapi.app import get_auth_manager  # noqa: PLC0415 - see above
    from airflow.api_fastapi.auth.managers.models.resource_details import (  # noqa: PLC0415 - see above
        DagAccessEntity,
        DagDetails,
    )
    from airflow.models.dag import DagModel  # noqa: PLC0415 - see above

    details = DagDetails(id=dag_id, team_name=DagModel.get_team_name(dag_id))
    manager = get_auth_manager()
    return [entity.lower() for entity in DAG_READ_ACCESS
            if not manager.is_authorized_dag(method="GET", access_entity=DagAccessEntity[entity], details=details,
                                             user=user)]


def require_dag_reader(user: BaseUser, dag_id: str, what: str) -> None:
    """403 unless the user may read ``dag_id``'s runs, task instances and XComs (``what``: the page, for the
    message)."""
    if refused := refused_access(user, dag_id):
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            f"Forbidden: {what} reads the runs, task instances and XComs of DAG {dag_id!r}; this user "
                            f"may not read its {', '.join(refused)}")


__all__ = ["DAG_READ_ACCESS", "refused_access", "require_dag_reader", "signed_in_user"]
