"""The first example DAG, run end to end with dag.test() against the real broker; and what its one file may be."""

from __future__ import annotations

import contextlib
import json
import re
import sys
from pathlib import Path

import paramiko
import pytest
from airflow.sdk.exceptions import ParamValidationError

from airflow_provider_kip848.changecontrol.runpaths import ARTIFACTS_ENV, run_location
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import consume, create_topics, produce
from kip848_harness.sshd import LocalSshd, generate_key
from tests.conftest import REPO, RUN_TOKEN


def _inventory_dag(monkeypatch, bootstrap: str):
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_ADMIN_DEFAULT", json.dumps({"conn_type": "kafka_admin", "host": bootstrap}))
    monkeypatch.syspath_prepend(str(REPO / "dags"))
    sys.modules.pop("kafka_cluster_inventory", None)
    from kafka_cluster_inventory import dag_object

    return dag_object


def test_inventory_dag_reports_features_and_every_group_type(airflow_db, kafka, bootstrap, unique, monkeypatch, tmp_path):
    topic = unique("t")
    create_topics(bootstrap, {topic: 2, WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    produce(bootstrap, topic, [b"a", b"b"])
    classic, modern = unique("classic"), unique("consumer")
    consume(bootstrap, classic, [topic], 2, group_protocol="classic")
    consume(bootstrap, modern, [topic], 2, group_protocol="consumer")
    streams = unique("streams")
    app = kafka.start_wordcount(streams)
    try:
        produce(bootstrap, WORDCOUNT_INPUT_TOPIC, ["inventory test"])
        assert app.wait_for_log("State transition from REBALANCING to RUNNING", timeout=90), app.log_text()[-2000:]

        dag_object = _inventory_dag(monkeypatch, bootstrap)
        # the file goes into the run's own report folder of the deployment's artifact location, by its name
        monkeypatch.setenv(ARTIFACTS_ENV, str(tmp_path / "artifacts"))
        run = dag_object.test(run_conf={"report_file": "inventory.txt"}, use_executor=False)
        assert str(run.state) in ("success", "DagRunState.SUCCESS")
        written = Path(run_location(str(tmp_path / "artifacts"), dag_object.dag_id, run.run_id, "report"))
        assert sorted(p.name for p in written.iterdir()) == ["inventory.txt"]
        text = (written / "inventory.txt").read_text()
    finally:
        app.stop()

    assert re.search(r"^group\.version\s+1\s+0 - 1$", text, re.M), text
    assert re.search(r"^streams\.version\s+1\s+0 - 1$", text, re.M), text
    # a fresh cluster finalizes its release's latest production metadata.version (4.4.0: 4.4-IV2)
    line = re.escape(".".join(kafka.version.split(".")[:2]))
    assert re.search(rf"^metadata\.version\s+{line}-IV\d+\s", text, re.M), text
    assert re.search(rf"^{re.escape(classic)}\s+classic\s+Empty", text, re.M), text
    assert re.search(rf"^{re.escape(modern)}\s+consumer\s+Empty", text, re.M), text
    assert re.search(rf"^{re.escape(streams)}\s+streams\s+Stable", text, re.M), text


def _logs_in(server: LocalSshd, key: Path) -> bool:
    """Whether ``key`` logs in to ``server`` (a command runs), through a real SSH client."""
    try:
        with contextlib.closing(server.client(private_key_path=key)) as client:
            _, stdout, _ = client.exec_command("echo in", timeout=10)
            return stdout.channel.recv_exit_status() == 0 and stdout.read().strip() == b"in"
    except paramiko.AuthenticationException:
        return False


def test_a_run_cannot_point_the_inventory_at_the_workers_authorized_keys(airflow_db, kafka, bootstrap, unique,
                                                                           monkeypatch, tmp_path, capfd):
    """Issue 45.1, on a real sshd: a consumer group whose id is an attacker's SSH public key, then a run of the
    read-only inventory (no approval) whose conf points its report at the sshd user's ``authorized_keys``. Before,
    the run replaced that file with the report, the attacker's key logged in as the worker's user and the
    legitimate key was locked out. Now the removed ``report_path`` fails the run at its first tasks (saying where
    a run's report goes), and a path in ``report_file`` is refused by the form before the run exists: the file is
    byte for byte as before, the legitimate key logs in, the attacker's does not, nothing is written anywhere."""
    server = LocalSshd(tmp_path / "sshd")  # this test's own server: its authorized_keys is no other test's
    server.start()
    try:
        keys = server.authorized_keys_path
        before = keys.read_bytes()
        attacker = generate_key(tmp_path / "attacker_ed25519", f"attacker-{RUN_TOKEN}")
        public = " ".join(Path(f"{attacker}.pub").read_text().split()[:3])
        topic = unique("ak")
        create_topics(bootstrap, {topic: 1})
        produce(bootstrap, topic, [b"x"])
        assert consume(bootstrap, public, [topic], 1, group_protocol="classic")  # the group id IS the key line
        assert _logs_in(server, server.private_key_path) and not _logs_in(server, attacker)  # the control

        dag_object = _inventory_dag(monkeypatch, bootstrap)
        artifacts = tmp_path / "artifacts"
        monkeypatch.setenv(ARTIFACTS_ENV, str(artifacts))
        capfd.readouterr()
        run = dag_object.test(run_conf={"report_path": str(keys)}, use_executor=False)
        out, err = capfd.readouterr()
        assert not _logs_in(server, attacker), "the attacker's key logs in"
        assert keys.read_bytes() == before, "authorized_keys changed"
        assert str(run.state) in ("failed", "DagRunState.FAILED")
        states = {ti.task_id: ti.state for ti in run.get_task_instances()}
        assert {states[t] for t in ("describe_cluster", "describe_features", "list_groups")} == {"failed"}, states
        assert states["report"] == "upstream_failed", states
        assert ("'report_path': the inventory's report file is written into the run's own report folder of the "
                "artifact location: give its file name alone in report_file") in out + err
        for path in (str(keys), f"../../../..{keys}", "authorized_keys"):
            with pytest.raises(ParamValidationError, match="Invalid input for param report_file"):
                dag_object.test(run_conf={"report_file": path if path != "authorized_keys" else f"/{path}"},
                                use_executor=False)

        assert keys.read_bytes() == before, "authorized_keys changed"
        assert _logs_in(server, server.private_key_path), "the legitimate key is locked out"
        assert not _logs_in(server, attacker), "the attacker's key logs in"
        assert not artifacts.exists() or not list(artifacts.rglob("*")), "a refused run wrote a file"
        assert sorted(p.name for p in keys.parent.iterdir() if p.name.startswith("authorized_keys")) == \
            ["authorized_keys"]
    finally:
        server.stop()
