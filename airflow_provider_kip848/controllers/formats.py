"""Reading what a platform's own status and config commands print, strictly.

A command controller's ``status`` command prints the instances in one of three
formats, so a team can point it at the tool it already has:

* ``supervisorctl``: ``supervisorctl status 'orders:*'`` as is (one line per
  process: name, state, then ``pid N, uptime ...`` or a reason);
* ``systemd``: ``systemctl show -p Id,LoadState,ActiveState,SubState,MainPID,NRestarts,
  ExecMainStartTimestampMonotonic 'orders@*'`` as is (blocks of ``key=value`` separated by blank lines);
* ``json``: ``{"instances": [{"name": ..., "running": true, ...}]}`` (or the bare list), with the fields of
  :class:`~.protocol.Instance`, for any other platform (Nomad, a script).

Output that cannot be read is an error, never an empty application: a status
command that prints nothing (a wrong path, a missing group) must not read as
"every instance gone". The ``config`` command prints Java properties or a JSON
object.
"""

from __future__ import annotations

import re
from typing import Any

from airflow_provider_kip848.controllers.protocol import Instance
from airflow_provider_kip848.kafka.documents import load_strict

STATUS_FORMATS = ("json", "supervisorctl", "systemd")
CONFIG_FORMATS = ("properties", "json")
#: supervisord process states in which a process exists and may heartbeat
_SUPERVISOR_ALIVE = {"STARTING", "RUNNING", "BACKOFF", "STOPPING"}
_SUPERVISOR_STATES = _SUPERVISOR_ALIVE | {"STOPPED", "EXITED", "FATAL", "UNKNOWN"}
_SUPERVISOR_LINE = re.compile(r"^(?P<name>\S+)\s+(?P<state>[A-Z]+)\s*(?P<rest>.*)$")
_PID = re.compile(r"pid (\d+)")
#: systemd ActiveState values in which the unit's process exists
_SYSTEMD_ALIVE = {"active", "activating", "deactivating", "reloading", "refreshing"}
_JSON_FIELDS = set(Instance.__dataclass_fields__)


class FormatError(ValueError):
    """The output is not in the declared format (the message says what was expected and what came)."""


def _shown(text: str, limit: int = 300) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[:limit] + "...")


def parse_status(fmt: str, stdout: str) -> tuple[Instance, ...]:
    """The instances ``stdout`` lists in format ``fmt``; :class:`FormatError` when it is not readable."""
    if not stdout.strip():
        raise FormatError("the status command printed nothing: it must list the instances "
                          + ("(an empty JSON list [] when there are none)" if fmt == "json" else
                             f"as {fmt} prints them"))
    if fmt == "supervisorctl":
        return _supervisorctl(stdout)
    if fmt == "systemd":
        return _systemd(stdout)
    if fmt == "json":
        return _json_status(stdout)
    raise FormatError(f"unknown status format {fmt!r} (one of {', '.join(STATUS_FORMATS)})")


def _supervisorctl(stdout: str) -> tuple[Instance, ...]:
    out = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        match = _SUPERVISOR_LINE.match(line.strip())
        if match is None or match["state"] not in _SUPERVISOR_STATES:
            raise FormatError(f"not a supervisorctl status line: {_shown(line)}")
        state, rest = match["state"], match["rest"]
        pid = _PID.search(rest) if state in _SUPERVISOR_ALIVE else None
        out.append(Instance(name=match["name"], running=state in _SUPERVISOR_ALIVE, ready=state == "RUNNING",
                            incarnation=pid.group(1) if pid else None, state=state))
    return tuple(out)


def _systemd(stdout: str) -> tuple[Instance, ...]:
    out = []
    for block in re.split(r"\n\s*\n", stdout.strip()):
        props = {}
        for line in block.splitlines():
            key, sep, value = line.partition("=")
            if not sep:
                raise FormatError(f"not a systemctl show line (key=value): {_shown(line)}")
            props[key.strip()] = value.strip()
        missing = [k for k in ("Id", "ActiveState") if not props.get(k)]
        if missing:
            raise FormatError(f"systemctl show output lacks {', '.join(missing)}: pass -p Id,LoadState,ActiveState,"
                              f"SubState,MainPID,NRestarts,ExecMainStartTimestampMonotonic ({_shown(block)})")
        if props.get("LoadState") == "not-found":  # a mistyped unit is a broken status command, never "gone"
            raise FormatError(f"systemd has no unit {props['Id']!r} (LoadState=not-found): the status command names "
                              "a unit that does not exist; list the application's units by their exact names")
        active, sub = props["ActiveState"], props.get("SubState", "")
        pid = props.get("MainPID", "0")
        restarts = props.get("NRestarts")
        out.append(Instance(
            name=props["Id"], running=active in _SYSTEMD_ALIVE, ready=active == "active" and sub == "running",
            restarts=int(restarts) if restarts and restarts.isdigit() else None,
            incarnation=f"{pid}@{props.get('ExecMainStartTimestampMonotonic', '')}" if pid not in ("", "0") else None,
            state=f"{active}/{sub}" if sub else active))
    return tuple(out)


def _json_status(stdout: str) -> tuple[Instance, ...]:
    try:
        raw = load_strict(stdout, json_only=True, source="the status command's output")
    except ValueError as exc:  # bounded like every document the provider reads (size, nesting, finite numbers)
        raise FormatError(f"the status command's output is not JSON ({exc}): {_shown(stdout)}") from exc
    items = raw.get("instances") if isinstance(raw, dict) else raw
    if not isinstance(items, list):
        raise FormatError(f'expected {{"instances": [...]}} or a list, got {_shown(stdout)}')
    out = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise FormatError(f"instances[{index}] is not an object: {item!r}")
        unknown = sorted(set(item) - _JSON_FIELDS)
        if unknown:
            raise FormatError(f"instances[{index}]: unknown field(s) {', '.join(unknown)} "
                              f"(fields: {', '.join(sorted(_JSON_FIELDS))})")
        if not isinstance(item.get("name"), str) or not item["name"]:
            raise FormatError(f"instances[{index}]: 'name' (a non-empty string) is required")
        if not isinstance(item.get("running"), bool):
            raise FormatError(f"instances[{index}] ({item['name']}): 'running' (true or false) is required")
        for key, kinds in (("ready", (bool,)), ("restarts", (int,))):
            value = item.get(key)
            if value is not None and (not isinstance(value, kinds) or (key == "restarts" and isinstance(value, bool))):
                raise FormatError(f"instances[{index}] ({item['name']}): {key!r} has the wrong type: {value!r}")
        fields: dict[str, Any] = dict(item)
        if fields.get("incarnation") is not None:
            fields["incarnation"] = str(fields["incarnation"])
        out.append(Instance.from_dict(fields))
    return tuple(out)


def parse_config(fmt: str, stdout: str) -> dict[str, str]:
    """The client properties ``stdout`` holds in format ``fmt``; :class:`FormatError` when not readable."""
    if not stdout.strip():
        raise FormatError("the config command printed nothing: it must print the application's client properties")
    if fmt == "json":
        try:
            raw = load_strict(stdout, json_only=True, source="the config command's output")
        except ValueError as exc:
            raise FormatError(f"the config command's output is not JSON ({exc}): {_shown(stdout)}") from exc
        if not isinstance(raw, dict) or any(isinstance(v, (dict, list)) for v in raw.values()):
            raise FormatError(f"expected a flat JSON object of client properties, got {_shown(stdout)}")
        return {str(k): ("" if v is None else str(v).lower() if isinstance(v, bool) else str(v))
                for k, v in raw.items()}
    if fmt == "properties":
        props = {}
        for line in stdout.splitlines():
            text = line.strip()
            if not text or text.startswith(("#", "!")):
                continue
            match = re.match(r"^([^=:\s]+)\s*[=:]\s*(.*)$", text)
            if match is None:
                raise FormatError(f"not a property line (key=value): {_shown(line)}")
            props[match.group(1)] = match.group(2).strip()
        return props
    raise FormatError(f"unknown config format {fmt!r} (one of {', '.join(CONFIG_FORMATS)})")


__all__ = ["CONFIG_FORMATS", "STATUS_FORMATS", "FormatError", "parse_config", "parse_status"]
