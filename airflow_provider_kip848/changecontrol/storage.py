"""Durable locations for snapshots and reports: a local path or any Airflow ObjectStoragePath URL.

``/data/snapshots/x.json`` is a local file; ``file:///...``, ``s3://...``,
``gs://...`` (any fsspec scheme with its Airflow provider installed) go
through ``airflow.sdk.ObjectStoragePath`` and its connection (``conn_id``
in the URL's user part, as Airflow documents).

Every write is all-or-nothing: local files (and ``file://`` URLs) through a
temporary file, fsync and rename (:mod:`airflow_provider_kip848.kafka.files`);
object stores through one PUT, which their readers see whole or not at all.
:func:`write_once` never replaces an existing artifact. A location that cannot
be read or written is an :class:`ArtifactUnwritable` naming it, not a raw
``OSError``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from airflow.sdk import ObjectStoragePath

from airflow_provider_kip848.kafka.errors import ArtifactUnwritable
from airflow_provider_kip848.kafka.files import atomic_write_text, create_once

T = TypeVar("T")


def storage_path(location: str) -> Path | ObjectStoragePath:
    """A local ``Path`` for a plain path (or a ``file://`` URL without a connection), an
    ``ObjectStoragePath`` for any other URL."""
    if not isinstance(location, str) or not location.strip() or location.strip() in ("file://", "file:///"):
        # Path("") is the worker's current directory: an artifact would land wherever the task happens to run
        raise ArtifactUnwritable(f"The artifact location {location!r} names no place.",
                                 remedy="Give a path every worker mounts or an ObjectStorage URL "
                                        "(s3://conn@bucket/prefix ...).")
    if location.startswith("file:///"):
        return Path(location.removeprefix("file://"))
    if "://" in location:
        return ObjectStoragePath(location)
    try:
        return Path(location).expanduser()
    except RuntimeError:  # ~user with no such user: Python cannot tell the home directory
        user = location[1:].split("/", 1)[0]
        raise ArtifactUnwritable(f"The artifact location {location!r} starts with ~{user}, but this worker has no "
                                 f"user {user!r}.",
                                 remedy="Give the location as an absolute path every worker mounts, or an "
                                        "ObjectStorage URL.") from None


def inside(folder: str, name: str) -> str | None:
    """The location of the plain file ``name`` in ``folder`` (``<folder>/<name>``), or None when, resolved, it
    leads out of the folder (a symbolic link there pointing elsewhere: never followed out). Object stores have no
    links: there the name alone decides (``runpaths.plain_name`` checks it first)."""
    location = f"{folder.rstrip('/')}/{name}"
    path, base = storage_path(location), storage_path(folder)
    if isinstance(path, Path) and isinstance(base, Path) and not path.resolve().is_relative_to(base.resolve()):
        return None
    return location


def _io(location: str, what: str, call: Callable[[], T]) -> T:
    try:
        return call()
    except OSError as exc:
        raise ArtifactUnwritable(f"Cannot {what} {location}: {exc.strerror or exc}.") from exc


def read_with(location: str, call: Callable[[], T]) -> T:
    """``call()``, a read of ``location`` (listing a folder ...): an ``OSError`` becomes :class:`ArtifactUnwritable`
    naming the location."""
    return _io(location, "read", call)


def exists(location: str) -> bool:
    return _io(location, "check", lambda: storage_path(location).exists())


def read_text(location: str) -> str:
    def read() -> str:
        with storage_path(location).open("r") as fh:
            return str(fh.read())

    return _io(location, "read", read)


def write_text(location: str, text: str) -> None:
    """Write ``text`` at ``location``, replacing what is there, all or nothing."""
    path = storage_path(location)

    def write() -> None:
        if isinstance(path, Path):
            atomic_write_text(path, text)
            return
        with path.open("w") as fh:  # type: ignore[no-untyped-call]  # untyped in the Task SDK; one PUT: an object store shows the old object or the whole new one
            fh.write(text)

    _io(location, "write", write)


def write_once(location: str, text: str) -> bool:
    """Create ``location`` with ``text``; False (and nothing written) when something is already there."""
    path = storage_path(location)

    def write() -> bool:
        if isinstance(path, Path):
            return create_once(path, text)
        if path.exists():
            return False
        with path.open("w") as fh:  # type: ignore[no-untyped-call]  # untyped in the Task SDK
            fh.write(text)
        return True

    return _io(location, "write", write)


def quarantine(location: str) -> str:
    """Move an unreadable leftover aside (``<name>.unreadable-<UTC time>``) and return its new place.

    Kept, not deleted: it may be evidence of what the killed attempt saw.
    """
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = f"{location}.unreadable-{stamp}"
    path = storage_path(location)

    def move() -> None:
        path.rename(storage_path(target))  # type: ignore[arg-type]

    _io(location, "move aside", move)
    return target


def append_line(location: str, line: str) -> None:
    """Append one line (object stores that cannot append get read + rewrite)."""
    path = storage_path(location)

    def append() -> None:
        if isinstance(path, Path):
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as fh:
                fh.write(line.rstrip("\n") + "\n")
            return
        old = read_text(location) if path.exists() else ""
        write_text(location, old + line.rstrip("\n") + "\n")

    _io(location, "append to", append)

