"""Durable locations for snapshots and reports: a local path or any Airflow ObjectStoragePath URL.

``/data/snapshots/x.json`` is a local file; ``file:///...``, ``s3://...``,
``gs://...`` (any fsspec scheme with its Airflow provider installed) go
through ``airflow.sdk.ObjectStoragePath`` and its connection (``conn_id``
in the URL's user part, as Airflow documents).
"""

from __future__ import annotations

from pathlib import Path

from airflow.sdk import ObjectStoragePath


def storage_path(location: str) -> Path | ObjectStoragePath:
    """A local ``Path`` for a plain path, an ``ObjectStoragePath`` for a URL."""
    if "://" in location:
        return ObjectStoragePath(location)
    return Path(location).expanduser()


def exists(location: str) -> bool:
    return storage_path(location).exists()


def read_text(location: str) -> str:
    path = storage_path(location)
    with path.open("r") as fh:
        return fh.read()


def write_text(location: str, text: str) -> None:
    path = storage_path(location)
    parent = path.parent
    if not parent.exists():
        parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fh.write(text)


def append_line(location: str, line: str) -> None:
    """Append one line (object stores that cannot append get read + rewrite)."""
    path = storage_path(location)
    if isinstance(path, Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as fh:
            fh.write(line.rstrip("\n") + "\n")
        return
    old = read_text(location) if path.exists() else ""
    write_text(location, old + line.rstrip("\n") + "\n")
