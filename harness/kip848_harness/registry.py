"""The controller registry of the demo and the tests: a real registry file, written as a deployment would.

The demo and the test session point ``[kip848] controllers`` (the environment
variable ``AIRFLOW__KIP848__CONTROLLERS``) at one file and add an entry per
application they start, under a name the run then uses. Nothing here is a
shortcut: the DAGs read this file through the same
:class:`~airflow_provider_kip848.controllers.registry.ControllerRegistry` a
production deployment uses.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow_provider_kip848.controllers.registry import CONFIG_OPTION, CONFIG_SECTION, FORMAT_VERSION
from airflow_provider_kip848.kafka.files import atomic_write_text

#: the environment variable through which Airflow reads ``[kip848] controllers``
REGISTRY_ENV = f"AIRFLOW__{CONFIG_SECTION.upper()}__{CONFIG_OPTION.upper()}"


class RegistryFile:
    """A registry file that entries are added to (atomically: a reader never sees half a file)."""

    _lock = threading.Lock()

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def entries(self) -> dict[str, Any]:
        if not self.path.exists():
            return {}
        return dict(json.loads(self.path.read_text()).get("controllers") or {})

    def add(self, name: str, kind: str, target: Mapping[str, Any], description: str = "") -> str:
        """Add (or replace) the entry ``name``; returns the name (what a run's ``app_controller`` is)."""
        with self._lock:
            entries = self.entries()
            entries[name] = {"kind": kind, "target": dict(target), **({"description": description} if description
                                                                       else {})}
            self._write(entries)
        return name

    def remove(self, name: str) -> None:
        with self._lock:
            entries = self.entries()
            entries.pop(name, None)
            self._write(entries)

    def _write(self, entries: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, json.dumps({"version": FORMAT_VERSION, "controllers": entries},
                                                     indent=2, sort_keys=True))

    def activate(self) -> RegistryFile:
        """Point this process (and the ones it starts) at this registry."""
        if not self.path.exists():
            self._write({})
        os.environ[REGISTRY_ENV] = str(self.path)
        return self


__all__ = ["REGISTRY_ENV", "RegistryFile"]
