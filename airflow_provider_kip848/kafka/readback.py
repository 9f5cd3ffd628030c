"""Reading a change back until the brokers show it: what every change of :mod:`.api` ends with."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def read_back(read: Callable[[], T], done: Callable[[T], bool], timeout_s: float, interval_s: float = 0.1) -> T:
    """Read until ``done(value)`` or ``timeout_s``; return the last value read either way.

    In KRaft a feature level or a group config is a metadata record: the
    controller accepts it, and each broker applies it when the record reaches
    it. A describe sent right after the change can still see the old value
    (seen on a busy machine: an audit record would say "nothing changed"). The
    caller decides what a mismatch at the deadline means.
    """
    deadline = time.monotonic() + timeout_s
    value = read()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(interval_s)
        interval_s = min(interval_s * 2, 1.0)
        value = read()
    return value


__all__ = ["read_back"]
