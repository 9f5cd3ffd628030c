"""The local Spark driver's class-data archive (spark.cds): which archive, and what a session does with it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from airflow_provider_kip848.spark import cds


@pytest.fixture
def java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    exe = home / "bin" / "java"
    exe.write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(home))
    monkeypatch.delenv("KIP848_SPARK_CDS", raising=False)
    return exe


def test_the_archive_name_changes_with_the_jars_the_java_and_the_options(tmp_path: Path, java: Path) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "a.jar").write_bytes(b"1")
    key = cds.archive_key(str(java), jars, ["conn:1", "-XX:TieredStopAtLevel=1"])
    assert key == cds.archive_key(str(java), jars, ["conn:1", "-XX:TieredStopAtLevel=1"])
    assert key != cds.archive_key(str(java), jars, ["conn:2", "-XX:TieredStopAtLevel=1"])
    (jars / "b.jar").write_bytes(b"2")
    assert key != cds.archive_key(str(java), jars, ["conn:1", "-XX:TieredStopAtLevel=1"])


def test_the_first_session_dumps_the_next_use_it_and_a_failed_dump_is_not_tried_again(
        tmp_path: Path, java: Path) -> None:
    first = cds.prepare(tmp_path, "4.2.0", ["x"])
    assert first.mode == "dump" and cds.status(first) == "building"
    assert any(o.startswith("-XX:ArchiveClassesAtExit=") for o in first.options())
    # a second process while the first dumps: no archive, no second dump
    assert cds.prepare(tmp_path, "4.2.0", ["x"]).mode == "off"
    # the dump finished (what finish() does when the JVM exited 0 and wrote it)
    assert first.path is not None and first.partial is not None
    first.partial.write_bytes(b"archive")
    first.partial.replace(first.path)
    assert first._marker is not None
    first._marker.unlink()
    used = cds.prepare(tmp_path, "4.2.0", ["x"])
    assert used.mode == "use" and f"-XX:SharedArchiveFile={used.path}" in used.options()
    assert cds.status(used) == "used"
    assert used.log is not None
    used.log.write_text("[warning][cds,dynamic] Unable to use shared archive. The top archive failed to load\n")
    assert cds.status(used) == "unusable"
    cds.finish(used)
    assert not used.log.exists() and used.path is not None and used.path.is_file()
    # another jar set whose dump failed: never tried again, the session runs without an archive
    other = cds.prepare(tmp_path, "4.2.0", ["y"])
    assert other.mode == "dump" and other.path is not None
    other.path.with_suffix(".failed").write_text("exit 1")
    assert other._marker is not None
    other._marker.unlink()
    again = cds.prepare(tmp_path, "4.2.0", ["y"])
    assert again.mode == "off" and again.options() == [] and cds.status(again) == "absent"


def test_a_stale_dump_marker_does_not_block_forever(tmp_path: Path, java: Path) -> None:
    first = cds.prepare(tmp_path, "4.2.0", ["x"])
    assert first._marker is not None
    old = time.time() - cds.STALE_DUMP_S - 60
    os.utime(first._marker, (old, old))
    assert cds.prepare(tmp_path, "4.2.0", ["x"]).mode == "dump"


def test_switched_off_or_without_java_there_is_no_archive(tmp_path: Path, java: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIP848_SPARK_CDS", "0")
    assert cds.prepare(tmp_path, "4.2.0", ["x"]).options() == []
    monkeypatch.delenv("KIP848_SPARK_CDS")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert cds.prepare(tmp_path, "4.2.0", ["x"]).mode == "off"
