"""Where a run's artifacts go: one configured location, one folder per run, a clear error without one; a run
chooses at most a plain name inside a location the deployment configures (issue 45.1)."""

from __future__ import annotations

import json
import re

import pytest

from airflow_provider_kip848.changecontrol.artifacts import (
    ARTIFACTS_ENV,
    artifact_root,
    optional_run_location,
    require_run_location,
    write_run_file,
)
from airflow_provider_kip848.changecontrol.audit import audit_location
from airflow_provider_kip848.changecontrol.runpaths import (
    NAME_FORM_PATTERN,
    is_plain_name,
    path_segment,
    plain_name,
    safe_part,
)
from airflow_provider_kip848.kafka.errors import ArtifactUnwritable, InvalidArgument
from airflow_provider_kip848.operators.run_conf import refuse_unknown_keys


@pytest.fixture
def no_location(monkeypatch):
    monkeypatch.delenv(ARTIFACTS_ENV, raising=False)
    monkeypatch.delenv("KIP848_AUDIT_LOG", raising=False)


def test_the_connection_then_the_deployment_never_the_run(monkeypatch, no_location):
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_ART", json.dumps({"conn_type": "kafka_admin", "host": "b:9092",
                                                             "extra": {"artifacts_url": "s3://aws@bkt/cluster-a"}}))
    monkeypatch.setenv(ARTIFACTS_ENV, "/mnt/shared/kip848")
    assert artifact_root("kafka_art") == "s3://aws@bkt/cluster-a"
    assert artifact_root("kafka_no_such_conn") == "/mnt/shared/kip848"
    assert artifact_root(None) == "/mnt/shared/kip848"


def test_every_run_has_its_own_folder(monkeypatch, no_location):
    monkeypatch.setenv(ARTIFACTS_ENV, "s3://aws@bkt/kip848/")
    one = require_run_location(None, "kip848_consumer_rolling_upgrade", "manual__2026-11-24T12:00:00+00:00",
                               "snapshots")
    two = require_run_location(None, "kip848_consumer_rolling_upgrade", "manual__2026-11-24T12:05:00+00:00",
                               "snapshots")
    assert one == "s3://aws@bkt/kip848/kip848_consumer_rolling_upgrade/manual__2026-11-24T12_00_00_00_00/snapshots"
    assert one != two


def test_without_a_location_a_snapshot_fails_saying_how_and_a_report_is_skipped(no_location):
    with pytest.raises(ArtifactUnwritable, match=f"Set \\${ARTIFACTS_ENV}"):
        require_run_location(None, "d", "r", "snapshots")
    assert optional_run_location(None, "d", "r", "report") is None


def test_audit_records_follow_the_artifact_location(no_location):
    assert audit_location(None, None, "s3://aws@bkt/kip848") == "s3://aws@bkt/kip848/audit"
    assert audit_location(None, None, "/mnt/shared/kip848") == "/mnt/shared/kip848/audit.jsonl"
    assert audit_location("/x/audit.jsonl", None, "/mnt/shared/kip848") == "/x/audit.jsonl"


# -- issue 45.1: no Param names a path --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["../x", "..", ".", "a/b", "/etc/passwd", ".ssh", "a\\b", "x\x00y", "", " a",
                                  "a..b", "~root", "s3://conn@bucket/key", "x" * 201, None, 5])
def test_a_run_chooses_a_plain_name_never_a_path(name):
    assert not is_plain_name(name)
    with pytest.raises(InvalidArgument) as refused:
        plain_name(name, "report_file", where="this run's own report folder")
    message = str(refused.value)
    assert "report_file" in message and "is not a plain file name" in message and "never a path" in message
    assert len(message) < 600  # a long value is shortened, not echoed whole
    assert re.fullmatch(NAME_FORM_PATTERN, name) is None if isinstance(name, str) else True


@pytest.mark.parametrize("name", ["inventory.txt", "fleet.yaml", "a_b-c.1.json", "_x", "9"])
def test_plain_names_pass_the_check_and_the_form_alike(name):
    assert plain_name(name, "p", where="w") == name and re.fullmatch(NAME_FORM_PATTERN, name)


def test_names_from_the_cluster_are_one_segment_each():
    # a group id is anyone's choice: never a separator, never up, never hidden, never two ids in one file
    ids = ["orders", "a/b", "a_b", "a%2Fb", "..", ".", ".hidden", "../../../../etc/cron.d/x", "ü", "a b"]
    segments = [path_segment(i) for i in ids]
    assert segments[0] == "orders" and len(set(segments)) == len(ids)
    for segment in segments:
        assert "/" not in segment and not segment.startswith(".") and segment not in (".", "..")
    # run ids Airflow allows (its pattern takes dots): never a folder up
    assert safe_part("..") == "_." and safe_part(".") == "_" and not safe_part(".x").startswith(".")
    assert safe_part("manual__2026-11-24T12:00:00+00:00") == "manual__2026-11-24T12_00_00_00_00"


def test_a_removed_path_param_says_where_its_location_is_configured_now():
    with pytest.raises(InvalidArgument) as refused:
        refuse_unknown_keys({"report_dir": "/home/u/.ssh", "snapshot_dir": "/x", "audit_log": "/y",
                             "validation_dir": "/z", "dry_rn": True}, ["dry_run", "group_id"], dag_id="d")
    message = str(refused.value)
    assert "'report_dir': a run's report is written under the connection's extra artifacts_url, else " \
           "$KIP848_ARTIFACTS_URL" in message
    assert "'audit_log': audit records go to the connection's extra audit_log, else $KIP848_AUDIT_LOG" in message
    assert "'snapshot_dir'" in message and "'validation_dir'" in message
    assert "'dry_rn' (did you mean 'dry_run'?)" in message and "Nothing was done." in message
    assert "/home/u/.ssh" not in message  # the value is not echoed: the key is what is wrong
    with pytest.raises(InvalidArgument, match="'report_path': the inventory's report file is written into the run's "
                                              "own report folder"):
        refuse_unknown_keys({"report_path": "/etc/x"}, ["kafka_conn_id", "report_file"])


def test_a_run_file_is_written_by_its_name_in_the_runs_own_folder(tmp_path, monkeypatch, no_location):
    monkeypatch.setenv(ARTIFACTS_ENV, str(tmp_path / "root"))
    outside = tmp_path / "authorized_keys"
    outside.write_text("ssh-ed25519 AAAA legit\n")
    written = write_run_file(None, "kafka_cluster_inventory", "manual__1", "report", "inventory.txt", "text\n",
                             param="report_file")
    assert written == f"{tmp_path}/root/kafka_cluster_inventory/manual__1/report/inventory.txt"
    assert (tmp_path / "root/kafka_cluster_inventory/manual__1/report/inventory.txt").read_text() == "text\n"
    folder = tmp_path / "root/kafka_cluster_inventory/manual__1/report"
    (folder / "keys").symlink_to(outside)
    for name, what in [("keys", "leads out of this run's own report folder"), (str(outside), "not a plain file name"),
                       ("../../../../authorized_keys", "not a plain file name")]:
        with pytest.raises(InvalidArgument, match=what):
            write_run_file(None, "kafka_cluster_inventory", "manual__1", "report", name, "evil\n",
                           param="report_file")
    assert outside.read_text() == "ssh-ed25519 AAAA legit\n"
    assert sorted(p.name for p in folder.iterdir()) == ["inventory.txt", "keys"]


def test_an_ownership_file_is_a_name_in_the_deployments_folder(tmp_path, monkeypatch):
    from airflow_provider_kip848.hooks.ownership import OwnershipMapMissing, ownership_file_location

    folder, outside = tmp_path / "maps", tmp_path / "secret.yaml"
    folder.mkdir()
    outside.write_text("password: hunter2\n")
    (folder / "fleet.yaml").write_text("rules: []\n")
    (folder / "link.yaml").symlink_to(outside)
    monkeypatch.delenv("AIRFLOW__KIP848__OWNERSHIP_DIR", raising=False)
    with pytest.raises(OwnershipMapMissing, match=r"but this deployment configures none") as refused:
        ownership_file_location("fleet.yaml")
    assert "ownership_dir" in refused.value.remedy
    monkeypatch.setenv("AIRFLOW__KIP848__OWNERSHIP_DIR", str(folder))
    assert ownership_file_location("fleet.yaml") == (folder / "fleet.yaml").resolve()
    for name, error, what in [("link.yaml", InvalidArgument, "leads out of the deployment's ownership folder"),
                              ("../secret.yaml", InvalidArgument, "not a plain file name"),
                              (str(outside), InvalidArgument, "not a plain file name"),
                              ("nope.yaml", OwnershipMapMissing, "There is no ownership map 'nope.yaml'")]:
        with pytest.raises(error, match=what) as refused:
            ownership_file_location(name)
        assert "hunter2" not in str(refused.value) and str(folder) not in str(refused.value)


def test_a_run_names_a_kafka_admin_connection_never_another_type(monkeypatch):
    """``kafka_conn_id`` is a run's choice: a connection of another type (an SSH host, a database) is refused before
    anything connects to its host or reads its extras, and its host is not shown."""
    from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
    from airflow_provider_kip848.kafka.errors import ConnectionNotFound

    monkeypatch.setenv("AIRFLOW_CONN_APP_HOST_SSH", json.dumps({"conn_type": "ssh", "host": "app-01.internal",
                                                                "port": 22, "login": "deploy"}))
    with pytest.raises(ConnectionNotFound, match="'app_host_ssh' is of type 'ssh', not kafka_admin") as refused:
        _ = KafkaGroupAdminHook("app_host_ssh").connection
    assert "app-01.internal" not in str(refused.value) and not refused.value.retriable
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_OK", json.dumps({"conn_type": "kafka_admin", "host": "b:9092"}))
    assert KafkaGroupAdminHook("kafka_ok").connection.host == "b:9092"
