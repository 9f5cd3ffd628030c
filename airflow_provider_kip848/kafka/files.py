"""Files a later task reads, written so that a reader sees the old content or the whole new one.

A worker killed halfway through ``open(path, "w").write(...)`` leaves an empty
or truncated file, and the task's retry then trips over it (a snapshot that is
"not JSON"). Writing a temporary file in the same directory, fsyncing it and
renaming it over the target makes the write all-or-nothing on POSIX file
systems; :func:`create_once` links the finished file in place, so a
write-once artifact (a snapshot, an audit record) is never replaced.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

#: mode of the files written here (the temporary file starts at 0600)
FILE_MODE = 0o644


def _finished_temp(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, FILE_MODE)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def _fsync_dir(directory: Path) -> None:
    """Make the rename itself durable (a crash right after it must not bring the old name back)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step (temporary file, fsync, rename)."""
    tmp = _finished_temp(path, text)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def create_once(path: Path, text: str) -> bool:
    """Create ``path`` with ``text`` unless it exists (then False and nothing changes); all or nothing."""
    tmp = _finished_temp(path, text)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    _fsync_dir(path.parent)
    return True
