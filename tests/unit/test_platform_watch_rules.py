"""The pure rules of the platform watched through a wait (issue 46, item 2; the real runs are in
tests/integration/test_platform_watch.py): what a look at the platform fails a wait on, and what a wait hands its
trigger (names and the baseline's instances, never a command; refused when it does not parse, never read as
"nothing to watch")."""

from __future__ import annotations

import json

import pytest

from airflow_provider_kip848.controllers import ApplicationStatus, Instance
from airflow_provider_kip848.controllers.verdicts import appeared_instances, lost_instances
from airflow_provider_kip848.hooks.platform_watch import PlatformWatch
from airflow_provider_kip848.kafka.errors import InvalidArgument


def _status(*instances: Instance, source: str = "supervisorctl -c /etc/orders.conf status orders:*") -> ApplicationStatus:
    return ApplicationStatus(known=True, instances=instances, source=source)


def _up(name: str, pid: str) -> Instance:
    return Instance(name=name, running=True, ready=True, incarnation=pid, state="RUNNING")


def test_an_instance_starting_again_without_a_pid_is_lost_and_one_up_as_another_process_too() -> None:
    """supervisord shows no pid for a process starting again (STARTING, BACKOFF): a crash loop never shows a new
    pid, so an instance of the start shown without one and not up is no longer the process of the start."""
    start = _status(_up("orders:orders_0", "100"), _up("orders:orders_1", "101"))
    looping = _status(_up("orders:orders_0", "100"),
                      Instance(name="orders:orders_1", running=True, ready=False, state="BACKOFF"))
    assert lost_instances(looping, start) == [
        "orders:orders_1 (BACKOFF) is no longer the process of the start (incarnation 101; now BACKOFF)"]
    replaced = _status(_up("orders:orders_0", "100"), _up("orders:orders_1", "202"))
    assert [p for p in lost_instances(replaced, start) if "101 -> 202" in p], lost_instances(replaced, start)
    assert lost_instances(start, start) == []


def test_the_empty_wait_fails_on_an_instance_running_again_not_on_one_still_stopping() -> None:
    stopped = _status(Instance(name="orders:orders_0", running=False, state="STOPPED"),
                      Instance(name="orders:orders_1", running=True, ready=False, state="STOPPING",
                               incarnation="101"))
    # the one stopping at the wait's start, still stopping (same process): nothing new
    assert appeared_instances(stopped, stopped) == []
    again = _status(Instance(name="orders:orders_0", running=True, ready=False, state="STARTING"),
                    Instance(name="orders:orders_1", running=False, state="STOPPED"))
    assert appeared_instances(again, stopped) == ["orders:orders_0 (STARTING) is running"]
    with pytest.raises(ValueError):
        appeared_instances(ApplicationStatus(known=False, reason="cannot tell"), stopped)


def test_a_watch_carries_names_and_instances_never_the_command_and_refuses_what_does_not_parse() -> None:
    start = _status(_up("orders:orders_0", "100"))
    watch = PlatformWatch.of("orders", {"host": "app-1"}, start.to_dict(), "lost")
    assert watch is not None
    carried = json.dumps(watch.to_dict())
    assert "supervisorctl" not in carried and "/etc/orders.conf" not in carried, carried
    assert PlatformWatch.from_dict(json.loads(carried)) == watch
    # nothing to watch: no controller, no baseline, or a baseline the controller could not tell
    assert PlatformWatch.of(None, None, start.to_dict(), "lost") is None
    assert PlatformWatch.of("None", None, start.to_dict(), "lost") is None
    assert PlatformWatch.of("orders", None, "None", "lost") is None
    assert PlatformWatch.of("orders", None, ApplicationStatus(known=False).to_dict(), "lost") is None
    assert PlatformWatch.from_dict(None) is None
    for bad in ({"rule": "lost"}, {**watch.to_dict(), "rule": "gone"}, {**watch.to_dict(), "baseline": "x"},
                {**watch.to_dict(), "every_s": float("nan")}, "orders"):
        with pytest.raises(InvalidArgument):
            PlatformWatch.from_dict(bad)
