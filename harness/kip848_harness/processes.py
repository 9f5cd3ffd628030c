"""Child processes of the test harness (brokers, Streams apps): they must not outlive the Python that started them."""

from __future__ import annotations

import ctypes
import os
import signal
import time
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


def wait_visible(pid: int, marker: bytes, timeout: float = 10.0) -> bool:
    """Wait until ``/proc/<pid>/cmdline`` shows ``marker`` (True), or the process is gone (False).

    ``subprocess.Popen`` returns once the child's exec has closed its close-on-exec pipe, but Linux sets the new
    command line's bounds a moment later: a /proc scan right after a start can read an empty command line and
    miss the process (a status taken just after a start once listed one instance of two)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if marker in fh.read():
                    return True
        except OSError:
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
