"""The deployment's controllers, by name: a run chooses a name, never code.

Two things make up the registry, and both belong to whoever deploys Airflow:

* **Kinds**: controller classes, registered by entry point in the group
  ``airflow_provider_kip848.controllers`` (``command = ...:CommandController``
  ships with the provider; a team's own package adds ``mycompany = ...``). A
  kind is loaded only when an entry of the registry uses it.
* **Entries**: one per application, in a YAML or JSON file named by the Airflow
  configuration option ``[kip848] controllers`` (environment:
  ``AIRFLOW__KIP848__CONTROLLERS``), read by every worker::

      version: 1
      controllers:
        orders:                          # the name a run or an ownership map uses
          kind: command
          description: orders consumers under supervisord on app-01
          target:                        # the kind's arguments (checked against its schema)
            ssh_conn_id: app01
            commands: {stop: ..., start: ..., status: ...}

A run's Params (``app_controller``, ``app_controller_args``) and the fleet's
ownership map name an entry; :meth:`ControllerRegistry.resolve` checks the name
and the run's arguments (only those the kind declares ``run=True``) and builds
the controller. Anything else (a module path, an unknown name, an undeclared
argument) is refused with :class:`ControllerRefused` before anything is
imported from the run's words or executed. A refusal names what was wrong and
nothing of the deployment: not the registry's file, not the other entries (the
person triggering a run reads it; the deployment's administrators have the
file). An entry's own problems (an unknown key, a number that is not finite)
block that entry only, and are told to a run naming it; a problem of the file
as a whole (its syntax, its version) blocks every entry and names none.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import yaml

from airflow_provider_kip848.controllers.errors import ControllerRefused, ControllerRegistryInvalid
from airflow_provider_kip848.controllers.named import NamedController
from airflow_provider_kip848.controllers.protocol import ApplicationController
from airflow_provider_kip848.controllers.schema import NUMBER_LIMIT, check_arguments, missing_required
from airflow_provider_kip848.kafka.arguments import (
    CONTROLLER_NAME_PATTERN,
    load_strict,
    show_id,
    similar_group_ids,
)

#: the entry-point group through which packages register controller classes (kinds)
ENTRY_POINT_GROUP = "airflow_provider_kip848.controllers"
#: the Airflow configuration option naming the registry file
CONFIG_SECTION, CONFIG_OPTION = "kip848", "controllers"
#: the registry's format version
FORMAT_VERSION = 1
#: what a controller's name may look like (never a module path: no ':' or '/')
NAME_PATTERN = CONTROLLER_NAME_PATTERN
_ENTRY_KEYS = ("kind", "description", "target")
#: how the registry is named in messages: the option, never the file (a run's reader is not the deployment's admin)
REGISTRY = f"the controller registry ([{CONFIG_SECTION}] {CONFIG_OPTION})"


@dataclass(frozen=True)
class ControllerEntry:
    """One application's controller as the deployment configured it."""

    name: str
    kind: str
    target: Mapping[str, Any] = field(default_factory=dict)  # Any: registry arguments (YAML values)
    description: str = ""
    #: what is wrong with the entry as written (it cannot be resolved; other entries can)
    problems: tuple[str, ...] = ()


def number_problems(value: object, where: str) -> list[str]:
    """Every number under ``value`` that is not finite or lies beyond +-2^53, by its path (``where.key[0]``)."""
    problems: list[str] = []
    stack: list[tuple[object, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, Mapping):
            stack.extend((v, f"{path}.{k}") for k, v in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            problems.append(f"{path}: {item!r} is not a finite number")
        elif isinstance(item, (int, float)) and not isinstance(item, bool) and abs(item) > NUMBER_LIMIT:
            problems.append(f"{path}: {item!r} is beyond +-2^53")
    return sorted(problems)


def registry_location() -> str | None:
    """The registry file the deployment names (``[kip848] controllers``), or None."""
    # Importing Airflow's configuration initialises it for the AIRFLOW_HOME of that moment: it is read when asked,
    # so a process (the demo, the test harness) may import this module before it points Airflow at its home
    from airflow.sdk.configuration import conf  # noqa: PLC0415 - deferred: its import initialises Airflow's config

    value = conf.get(CONFIG_SECTION, CONFIG_OPTION, fallback=None)
    return str(value).strip() or None if value is not None else None


def _kinds() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


class ControllerRegistry:
    """The deployment's controller entries and the installed kinds."""

    def __init__(self, entries: Mapping[str, ControllerEntry], source: str,
                 kinds: Mapping[str, EntryPoint] | None = None) -> None:
        self.entries = dict(entries)
        self.source = source
        self.kinds = dict(kinds) if kinds is not None else _kinds()

    # -- reading ------------------------------------------------------------------------------------

    @classmethod
    def load(cls, location: str | None = None) -> ControllerRegistry:
        """The registry of this deployment (``location``: a file, else ``[kip848] controllers``). No
        configured registry is an empty one: every name is then refused, saying how to configure one."""
        location = location or registry_location()
        if location is None:
            return cls({}, source="(none: [kip848] controllers is not set)")
        path = Path(location.removeprefix("file://"))
        try:
            text = path.read_text()
        except OSError as exc:  # the reason, not the path (str(exc) names the file)
            raise ControllerRegistryInvalid(f"cannot read {REGISTRY}: {exc.strerror or type(exc).__name__}") \
                from None
        return cls.from_text(text, source=str(path))

    @classmethod
    def from_text(cls, text: str, source: str = "(text)") -> ControllerRegistry:
        """Parse a registry (YAML or JSON) strictly. A problem of the file as a whole refuses it (every problem at
        once, naming no entry); an entry's problems are kept with it (:meth:`resolve` refuses that entry)."""
        try:
            raw = load_strict(text, finite=False) if text.strip() else {}  # a NaN blocks only its entry
        except (ValueError, yaml.YAMLError) as exc:  # a name given twice is refused, never silently replaced
            raise ControllerRegistryInvalid(f"{REGISTRY} is not valid YAML/JSON: {_syntax_error(exc)}") from None
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ControllerRegistryInvalid(f"{REGISTRY} must be a mapping with 'controllers'")
        problems: list[str] = []
        unknown = sorted(set(raw) - {"version", "controllers"})
        if unknown:
            problems.append(f"unknown top-level key(s) {', '.join(map(str, unknown))} (allowed: version, "
                            "controllers)")
        version = raw.get("version", FORMAT_VERSION)
        if isinstance(version, bool) or version != FORMAT_VERSION:
            problems.append(f"version {raw.get('version')!r} is not {FORMAT_VERSION}")
        declared = raw.get("controllers") or {}
        if not isinstance(declared, dict):
            problems.append("controllers must be a mapping of name -> entry")
            declared = {}
        misnamed = sum(1 for name in declared if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name))
        if misnamed:  # counted, not shown: the message reaches whoever names another entry
            problems.append(f"{misnamed} entry name(s) do not match {NAME_PATTERN}")
        if problems:
            raise ControllerRegistryInvalid(f"{REGISTRY} is not valid: " + "; ".join(problems))
        return cls({name: cls._entry(name, body) for name, body in declared.items()}, source=source)

    @staticmethod
    def _entry(name: str, body: object) -> ControllerEntry:
        """One entry as written, with its problems (an entry that cannot be used still exists, refused by name)."""
        where = f"controllers.{name}"
        if not isinstance(body, dict):
            return ControllerEntry(name=name, kind="", problems=(f"{where}: must be a mapping with kind and "
                                                                 "target",))
        problems = []
        extra = sorted(map(str, set(body) - set(_ENTRY_KEYS)))
        if extra:
            problems.append(f"{where}: unknown key(s) {', '.join(extra)} (allowed: {', '.join(_ENTRY_KEYS)})")
        kind, target = body.get("kind"), body.get("target") or {}
        if not isinstance(kind, str) or not kind:
            problems.append(f"{where}.kind: required (a registered controller kind)")
        if not isinstance(target, dict):
            problems.append(f"{where}.target: must be a mapping")
            target = {}
        problems += number_problems(target, f"{where}.target")
        return ControllerEntry(name=name, kind=kind if isinstance(kind, str) else "", target=target,
                               description=str(body.get("description") or ""), problems=tuple(problems))

    # -- resolving ----------------------------------------------------------------------------------

    def names(self) -> list[str]:
        return sorted(self.entries)

    @staticmethod
    def _refuse(what: str) -> ControllerRefused:
        """A refusal of the run's words: what was wrong, nothing of the registry (its file, its other entries)."""
        return ControllerRefused(what)

    def entry(self, name: object) -> ControllerEntry:
        """The entry named ``name``, or :class:`ControllerRefused` (a module path, an unknown name)."""
        if not isinstance(name, str) or not name:
            raise self._refuse(f"No application controller named (got {name!r}).")
        # a look-alike name (a Cyrillic letter, a no-break space) prints like a real one: show_id gives its code
        # points; that a configured name is close is said without saying which
        hint = " (a configured name is spelled alike: check this one's spelling)" \
            if similar_group_ids(name, self.entries) else ""
        if ":" in name or "/" in name or not re.fullmatch(NAME_PATTERN, name):
            raise self._refuse(f"{show_id(name)} is not a controller name{hint}: a run names a controller of the "
                               "deployment's registry, never a module or a class.")
        if name not in self.entries:
            raise self._refuse(f"No application controller named {show_id(name)} in this deployment's "
                               f"registry{hint}.")
        return self.entries[name]

    def kind(self, entry: ControllerEntry) -> type[ApplicationController]:
        """The class registered for the entry's kind (loaded now, only this one)."""
        point = self.kinds.get(entry.kind)
        if point is None:
            kinds = ", ".join(sorted(self.kinds)) or "none"
            raise ControllerRegistryInvalid(
                f"controllers.{entry.name}: kind {entry.kind!r} is not installed (entry-point group "
                f"{ENTRY_POINT_GROUP}: {kinds})")
        try:
            loaded = point.load()
        except ImportError as exc:  # a kind whose optional dependencies are not installed on this worker
            raise ControllerRegistryInvalid(
                f"controllers.{entry.name}: kind {entry.kind!r} ({point.value}) cannot be loaded: {exc} (install "
                f"its extra, e.g. airflow-provider-kip848[{entry.kind}], on every worker)") from exc
        if not (isinstance(loaded, type) and issubclass(loaded, ApplicationController)):
            raise ControllerRegistryInvalid(f"kind {entry.kind!r} ({point.value}) is not an ApplicationController")
        return loaded

    def resolve(self, name: object, args: object = None) -> NamedController:
        """The controller named ``name``, built with its registry target and the run's ``args`` (only those
        its kind declares for a run). Nothing of the run's words is imported or executed."""
        entry = self.entry(name)
        if entry.problems:
            raise ControllerRegistryInvalid("; ".join(entry.problems))
        if args is None:
            args = {}
        if not isinstance(args, Mapping):
            raise self._refuse(f"The arguments of controller {entry.name!r} must be a mapping, not "
                               f"{type(args).__name__}.")
        cls = self.kind(entry)
        target_problems = check_arguments(cls.schema, entry.target, what=f"controllers.{entry.name}.target")
        if target_problems:
            raise ControllerRegistryInvalid("; ".join(target_problems))
        try:
            run_schema = cls.run_arguments(entry.target)
        except ValueError as exc:
            raise ControllerRegistryInvalid(f"controllers.{entry.name} (kind {entry.kind}): {exc}") from exc
        problems = check_arguments(run_schema, args, what=f"arguments of controller {entry.name!r}")
        if problems:
            raise ControllerRefused("; ".join(problems) + ".")
        missing = missing_required(cls.schema, entry.target, args)
        if missing:
            raise ControllerRegistryInvalid(f"controllers.{entry.name}: required argument(s) {', '.join(missing)} "
                                            "are given neither by the target nor by the run")
        missing = missing_required(run_schema, entry.target, args)
        if missing:  # the run's to give
            raise self._refuse(f"Controller {entry.name!r} needs the run argument(s) {', '.join(missing)} "
                               f"(declared: {', '.join(f'{k}: {a.type}' for k, a in sorted(run_schema.items()))}).")
        run_args = dict(args)
        try:
            controller = cls(**{**entry.target, **run_args})
        except (TypeError, ValueError) as exc:
            raise ControllerRegistryInvalid(f"controllers.{entry.name} (kind {entry.kind}): {exc}") from exc
        return NamedController(name=entry.name, kind=entry.kind, description=entry.description,
                               controller=controller, args=run_args, fingerprint=fingerprint(entry, run_args))


def _syntax_error(exc: Exception) -> str:
    """A parser's complaint and where, without the file's text: PyYAML quotes the lines around the error, and a
    repeated key is named (it can be another entry's name)."""
    text = str(exc)
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        text = f"{exc.problem or exc.context or type(exc).__name__}{where}"
    return re.sub(r"^the key .* is repeated", "a key is repeated", text, flags=re.DOTALL)


def fingerprint(  # Any: registry arguments (YAML values), checked by the schema
        entry: ControllerEntry, args: Mapping[str, Any]) -> str:
    """A hash of what the controller does: its registry entry (kind, target) and the run's arguments."""
    text = json.dumps({"kind": entry.kind, "target": entry.target, "args": dict(args)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def resolve_controller(name: object, args: object = None, *, location: str | None = None) -> NamedController:
    """:meth:`ControllerRegistry.resolve` on the deployment's registry."""
    return ControllerRegistry.load(location).resolve(name, args)


def registry_summary(  # Any: the platform's answer, JSON of several shapes
        location: str | None = None) -> dict[str, Any]:
    """The names of the deployment's controllers and where they are configured: for its administrators (a
    refusal a run reads shows none of it)."""
    registry = ControllerRegistry.load(location)
    return {"source": registry.source, "controllers": {n: {"kind": e.kind, "description": e.description}
                                                       for n, e in sorted(registry.entries.items())}}


def dumps(  # Any: registry arguments (YAML values), checked by the schema
        entries: Mapping[str, Mapping[str, Any]]) -> str:
    """A registry's text for ``entries`` (name -> {kind, target, description}): what the harness and the docs'
    examples write."""
    return json.dumps({"version": FORMAT_VERSION, "controllers": dict(entries)}, indent=2, sort_keys=True)


__all__ = ["CONFIG_OPTION", "CONFIG_SECTION", "ENTRY_POINT_GROUP", "NAME_PATTERN", "ControllerEntry",
           "ControllerRegistry", "dumps", "registry_location", "registry_summary", "resolve_controller"]
