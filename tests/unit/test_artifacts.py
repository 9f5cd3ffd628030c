"""Where a run's artifacts go: one configured location, one folder per run, a clear error without one."""

from __future__ import annotations

import json

import pytest

from airflow_provider_kip848.changecontrol.artifacts import (
    ARTIFACTS_ENV,
    artifact_root,
    optional_run_location,
    require_run_location,
)
from airflow_provider_kip848.changecontrol.audit import audit_location
from airflow_provider_kip848.kafka.errors import ArtifactUnwritable


@pytest.fixture
def no_location(monkeypatch):
    monkeypatch.delenv(ARTIFACTS_ENV, raising=False)
    monkeypatch.delenv("KIP848_AUDIT_LOG", raising=False)


def test_the_param_then_the_connection_then_the_deployment(monkeypatch, no_location):
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_ART", json.dumps({"conn_type": "kafka_admin", "host": "b:9092",
                                                             "extra": {"artifacts_url": "s3://aws@bkt/cluster-a"}}))
    monkeypatch.setenv(ARTIFACTS_ENV, "/mnt/shared/kip848")
    assert artifact_root("/data/mine", "kafka_art") == "/data/mine"
    assert artifact_root(None, "kafka_art") == "s3://aws@bkt/cluster-a"
    assert artifact_root("None", "kafka_art") == "s3://aws@bkt/cluster-a"  # a rendered unset Param
    assert artifact_root("", "kafka_no_such_conn") == "/mnt/shared/kip848"


def test_every_run_has_its_own_folder(monkeypatch, no_location):
    monkeypatch.setenv(ARTIFACTS_ENV, "s3://aws@bkt/kip848/")
    one = require_run_location(None, None, "kip848_consumer_rolling_upgrade", "manual__2026-11-24T12:00:00+00:00",
                               "snapshots")
    two = require_run_location(None, None, "kip848_consumer_rolling_upgrade", "manual__2026-11-24T12:05:00+00:00",
                               "snapshots")
    assert one == "s3://aws@bkt/kip848/kip848_consumer_rolling_upgrade/manual__2026-11-24T12_00_00_00_00/snapshots"
    assert one != two


def test_without_a_location_a_snapshot_fails_saying_how_and_a_report_is_skipped(no_location):
    with pytest.raises(ArtifactUnwritable, match=f"Set \\${ARTIFACTS_ENV}"):
        require_run_location(None, None, "d", "r", "snapshots")
    assert optional_run_location(None, None, "d", "r", "report") is None


def test_audit_records_follow_the_artifact_location(no_location):
    assert audit_location(None, None, "s3://aws@bkt/kip848") == "s3://aws@bkt/kip848/audit"
    assert audit_location(None, None, "/mnt/shared/kip848") == "/mnt/shared/kip848/audit.jsonl"
    assert audit_location("/x/audit.jsonl", None, "/mnt/shared/kip848") == "/x/audit.jsonl"
