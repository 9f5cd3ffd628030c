"""A SASL listener (SCRAM-SHA-256/512, PLAIN) with ACLs on: credentials, errors, and secrets kept out of sight."""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import threading

import pytest

from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.cli import KafkaCliHook
from airflow_provider_kip848.kafka.cli.backend import KafkaCli
from airflow_provider_kip848.kafka.cli.tools import KafkaTools
from airflow_provider_kip848.kafka.errors import AuthenticationFailed, AuthorizationFailed
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.kafka_cluster import LocalKafka
from tests.conftest import is_child_of, process_cmdlines, start_or_fail

PASSWORD = 'kip848-S3cr3t"pw\\with=special #chars'


@pytest.fixture(scope="module")
def sasl_kafka(tmp_path_factory, kafka_version, pytestconfig):
    broker = LocalKafka(tmp_path_factory.mktemp("sasl"), version=kafka_version, die_with_parent=True,
                        sasl_users={"admin": PASSWORD, "reader": "reader-pw"}, super_users=["admin"])
    start_or_fail(broker, pytestconfig)
    yield broker
    broker.stop()


def _settings(broker, mechanism="SCRAM-SHA-512", user="admin", password=PASSWORD, **kw):
    return ClientSettings(broker.sasl_bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                          sasl_mechanism=mechanism, sasl_username=user, sasl_password=password, **kw)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_right_credentials_work_with_both_backends(sasl_kafka, kafka_version, mechanism):
    settings = _settings(sasl_kafka, mechanism)
    with KafkaAdmin(settings) as native:
        assert native.describe_features().level("group.version") == 1
        assert native.describe_cluster().brokers[0].port == int(sasl_kafka.sasl_bootstrap_servers.rsplit(":", 1)[1])
        cli = KafkaCli(settings, KafkaTools(version=kafka_version))
        assert cli.describe_features() == native.describe_features()


@pytest.mark.parametrize("backend", ["native", "cli"])
def test_wrong_password_is_a_clear_authentication_error(sasl_kafka, kafka_version, backend):
    settings = _settings(sasl_kafka, "SCRAM-SHA-256", password="not-the-password", request_timeout_ms=10000)
    admin = KafkaAdmin(settings) if backend == "native" else KafkaCli(settings, KafkaTools(version=kafka_version))
    with admin, pytest.raises(AuthenticationFailed) as err:
        admin.describe_features()
    message = str(err.value)
    assert "not-the-password" not in message
    assert re.search(r"invalid credentials|[Aa]uthentication", message)
    assert "Check the connection's username, password and SASL mechanism" in message


@pytest.mark.parametrize("backend", ["native", "cli"])
def test_principal_without_acl_gets_an_authorization_error_and_nothing_changes(sasl_kafka, kafka_version, backend):
    reader = _settings(sasl_kafka, "SCRAM-SHA-256", user="reader", password="reader-pw", request_timeout_ms=10000)
    admin = KafkaAdmin(reader) if backend == "native" else KafkaCli(reader, KafkaTools(version=kafka_version))
    with admin, pytest.raises(AuthorizationFailed) as err:
        admin.update_feature("streams.version", 0, action="downgrade")
    assert "CLUSTER" in str(err.value) or "ALTER" in str(err.value)
    with KafkaAdmin(_settings(sasl_kafka)) as superuser:
        assert superuser.describe_features().level("streams.version") == 1


class ArgvWatcher(threading.Thread):
    """Samples every process's argument list while the provider runs, looking for the secret."""

    def __init__(self, secret: str) -> None:
        super().__init__(daemon=True)
        self.secret = secret.encode()
        self.stop_flag = threading.Event()
        self.leaks: list[str] = []
        self.kafka_tool_runs = 0
        self.command_config_modes: set[str] = set()
        self.command_config_paths: set[str] = set()

    def run(self) -> None:
        me = os.getpid()
        while not self.stop_flag.is_set():
            for proc, argv in process_cmdlines():
                if self.secret in argv:
                    self.leaks.append(argv.decode(errors="replace"))
                if (b"org.apache.kafka.tools.FeatureCommand" in argv or b"ConfigCommand" in argv) \
                        and is_child_of(proc, me):  # not another session's tools (a parallel worker's, another run's)
                    self.kafka_tool_runs += 1
                    args = argv.split(b"\0")
                    if b"--command-config" in args:
                        path = args[args.index(b"--command-config") + 1].decode()
                        self.command_config_paths.add(path)
                        try:
                            self.command_config_modes.add(oct(os.stat(path).st_mode & 0o777))
                        except OSError:
                            pass
            self.stop_flag.wait(0.02)


def test_password_never_reaches_logs_results_or_process_arguments(sasl_kafka, kafka_version, monkeypatch, caplog, capfd,
                                                                  tmp_path):
    caplog.set_level(logging.DEBUG)
    conn = {"conn_type": "kafka_admin", "host": sasl_kafka.sasl_bootstrap_servers, "login": "admin",
            "password": PASSWORD, "extra": {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
                                            "kafka_version": kafka_version}}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SASL", json.dumps(conn))
    bad = {**conn, "password": PASSWORD + "-wrong"}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SASL_BAD", json.dumps(bad))
    # a private temp dir: the machine's /tmp is shared with other runs, which create and remove their own
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))

    watcher = ArgvWatcher(PASSWORD)
    watcher.start()
    outputs = []
    try:
        for hook_cls in (KafkaGroupAdminHook, KafkaCliHook):
            with hook_cls("kafka_sasl") as hook:
                outputs.append(hook.describe_features().to_dict())
                outputs.append(hook.update_feature("streams.version", 0, action="downgrade", dry_run=True).to_dict())
                outputs.append(hook.alter_group_config("sasl-group", {"streams.num.standby.replicas": 1},
                    allow_absent_group=True).to_dict())
                outputs.append(hook.describe_group_config("sasl-group").to_dict())
                outputs.append(repr(hook.settings))
                outputs.append(hook.test_connection())
            with hook_cls("kafka_sasl_bad") as hook:
                with pytest.raises(AuthenticationFailed) as err:
                    hook.describe_features()
                outputs.append(str(err.value))
                outputs.append(hook.test_connection())
    finally:
        watcher.stop_flag.set()
        watcher.join()
    captured = capfd.readouterr()
    assert watcher.kafka_tool_runs > 0, "the watcher saw the CLI tools run (the argv check is not vacuous)"
    assert watcher.leaks == []
    assert watcher.command_config_modes <= {"0o600"}
    assert PASSWORD not in caplog.text
    assert PASSWORD not in captured.out and PASSWORD not in captured.err
    assert PASSWORD not in json.dumps(outputs, default=str)
    assert watcher.command_config_paths, "the watcher saw the tools' --command-config files"
    assert all(p.startswith(str(private_tmp)) and not os.path.exists(p) for p in watcher.command_config_paths)
    assert list(private_tmp.glob("kip848-cli-*")) == [], "command-config files are removed"
