"""Child processes of the test harness (brokers, Streams apps): they must not outlive the Python that started them."""

from __future__ import annotations

import ctypes
import os
import signal


def die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Ask Linux to SIGTERM this process when the Python that started it dies (a ``preexec_fn``)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def send_signal(pid: int, sig: int) -> None:
    """Signal ``pid``; a process already gone is not an error."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
