"""Child processes of the test harness (brokers, Streams apps): they must not outlive the Python that started them."""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable


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


def find_processes(matches: Callable[[list[bytes]], bool]) -> list[tuple[int, list[bytes]]]:
    """Every live process on this machine whose argv ``matches`` (pid, argv), read from /proc: how the demo's
    controllers find *all* instances of an application, not only the ones they started."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[-1].split()[0]
        except OSError:
            continue
        if state != b"Z" and matches(argv):  # a zombie has exited: it cannot heartbeat
            found.append((int(entry.name), argv))
    return sorted(found)
