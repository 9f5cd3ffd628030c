"""Waiting for a condition on a real cluster (tests, benchmarks, the demo): poll, never hang."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], object], timeout: float = 60.0, what: str = "condition",
               interval: float = 0.5) -> object:
    """Poll ``condition`` until it returns a truthy value and return it; raise ``TimeoutError`` after
    ``timeout`` s. An exception from ``condition`` counts as "not yet" (the cluster is settling)."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = condition()
        except Exception as exc:  # noqa: BLE001 - a transient error while the cluster settles
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}; last result: {last!r}")
