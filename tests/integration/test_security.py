"""Security on a SASL_PLAINTEXT listener with ACLs on: which permission is missing, bad credentials, and secrets.

* A principal with some ACLs but not the one an action needs gets ``AuthorizationFailed`` naming the
  operation and the resource (``ALTER on CLUSTER``, ``ALTER_CONFIGS on GROUP 'x'`` ...) and the
  ``kafka-acls`` command that grants it, from both backends; a super user then sees that nothing changed.
* Wrong credentials fail the task with ``AuthenticationFailed`` (not retried), without the secret.
* With the password in the Airflow connection, no task log, XCom, file written (snapshot, audit
  log, run report) nor process (argument list or environment of the Kafka tools) holds it.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.cli import KafkaCliHook
from airflow_provider_kip848.kafka.api import take_snapshot
from airflow_provider_kip848.kafka.errors import AuthenticationFailed, AuthorizationFailed
from airflow_provider_kip848.kafka.model import TopicPartition
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.features import KafkaFeatureOperator
from airflow_provider_kip848.operators.group_config import KafkaGroupConfigOperator
from airflow_provider_kip848.operators.members import KafkaRemoveGroupMembersOperator
from airflow_provider_kip848.operators.offsets import (
    KafkaCompareGroupOffsetsOperator,
    KafkaRestoreGroupOffsetsOperator,
    KafkaSnapshotGroupOffsetsOperator,
)
from airflow_provider_kip848.operators.preflight import KafkaMigrationPreflightOperator
from kip848_harness.clients import consume, create_topics, produce
from kip848_harness.kafka_cluster import LocalKafka
from tests.conftest import RecordingTI, is_child_of, process_cmdlines, start_or_fail, wait_until

#: quotes, backslash, '=', ':', '#', a space and non-ASCII: everything a JAAS string or a properties file can trip on
ADMIN_PASSWORD = 'adm1n-S3cret:"q" \\b=s #h ünï'
OPERATOR_PASSWORD = "0perator-pw-7f3a"
TOPIC = "sec-topic"
CONFIG_GROUP, DESCRIBE_GROUP, OFFSETS_GROUP, SECRETS_GROUP = "sec-config", "sec-describe", "sec-offsets", "sec-secrets"


@pytest.fixture(scope="module")
def secured(tmp_path_factory, kafka_version, pytestconfig):
    """A broker with a SASL listener: ``admin`` (super user) and ``operator`` (only the ACLs granted below)."""
    broker = LocalKafka(tmp_path_factory.mktemp("secured"), version=kafka_version, die_with_parent=True,
                        sasl_users={"admin": ADMIN_PASSWORD, "operator": OPERATOR_PASSWORD}, super_users=["admin"])
    start_or_fail(broker, pytestconfig)
    try:
        plain = broker.bootstrap_servers  # the harness's PLAINTEXT listener (ANONYMOUS is a super user)
        create_topics(plain, {TOPIC: 2})
        produce(plain, TOPIC, (f"v{i}" for i in range(20)), keys=(f"k{i}" for i in range(20)))
        for group in (DESCRIBE_GROUP, OFFSETS_GROUP, SECRETS_GROUP):
            consume(plain, group, [TOPIC], 20, group_protocol="consumer")
        # everything the actions below need except the one permission each test takes away
        grants = [
            (ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE_CONFIGS),  # the broker's group.* bounds
            (ResourceType.GROUP, CONFIG_GROUP, AclOperation.DESCRIBE_CONFIGS),     # not ALTER_CONFIGS
            (ResourceType.GROUP, CONFIG_GROUP, AclOperation.DESCRIBE),             # its type, before a config
            (ResourceType.GROUP, OFFSETS_GROUP, AclOperation.DESCRIBE),            # not READ
            (ResourceType.TOPIC, TOPIC, AclOperation.READ),
        ]                                                                          # and nothing on DESCRIBE_GROUP
        acl_admin = AdminClient({"bootstrap.servers": plain})
        bindings = [AclBinding(rt, name, ResourcePatternType.LITERAL, "User:operator", "*", op, AclPermissionType.ALLOW)
                    for rt, name, op in grants]
        for future in acl_admin.create_acls(bindings).values():
            future.result(30)
        everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                      AclOperation.ANY, AclPermissionType.ANY)
        wait_until(lambda: len(acl_admin.describe_acls(everything).result(10)) == len(grants), what="ACLs")
        with KafkaAdmin(ClientSettings(plain)) as admin:
            admin.update_feature("streams.version", 0, action="downgrade")  # so that an upgrade has work to do
        yield broker
    finally:
        broker.stop()


def sasl_settings(broker, user="admin", password=ADMIN_PASSWORD, **kw) -> ClientSettings:
    return ClientSettings(broker.sasl_bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                          sasl_mechanism="SCRAM-SHA-512", sasl_username=user, sasl_password=password, **kw)


def set_sasl_connection(monkeypatch, conn_id: str, broker, user: str, password: str, kafka_version: str, **extra) -> str:
    conn = {"conn_type": "kafka_admin", "host": broker.sasl_bootstrap_servers, "login": user, "password": password,
            "extra": {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
                      "kafka_version": kafka_version, "request_timeout_ms": 10000, **extra}}
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))
    return conn_id


def _snapshot_then_rewind(broker, tmp_path: Path, group: str) -> str:
    """A snapshot of ``group`` on disk, then its commits moved back to 0 (as a lossy conversion would)."""
    with KafkaAdmin(ClientSettings(broker.bootstrap_servers)) as admin:
        ends = {TopicPartition(p.topic, p.partition): p.log_end for p in admin.group_offsets(group).partitions}
        admin.alter_group_offsets(group, ends)  # fully consumed (an earlier case may have left it rewound)
        snapshot = take_snapshot(admin, group)
        path = tmp_path / f"{group}.json"
        path.write_text(snapshot.to_json())
        admin.alter_group_offsets(group, {tp: 0 for tp in snapshot.committed})
    return str(path)


# -- missing permissions -------------------------------------------------------------------------------------

def _feature_upgrade(scene):
    return KafkaFeatureOperator(task_id="enable", kafka_conn_id=scene["conn"], backend=scene["backend"],
                                feature="streams.version", level=1).execute({"ti": RecordingTI()})


def _group_config_change(scene):
    return KafkaGroupConfigOperator(task_id="cfg", kafka_conn_id=scene["conn"], backend=scene["backend"],
                                    group_id=CONFIG_GROUP, set_configs={"streams.num.standby.replicas": 1}
                                    , allow_absent_group=True).execute({"ti": RecordingTI()})


def _describe(scene):
    hook_cls = KafkaCliHook if scene["backend"] == "cli" else KafkaGroupAdminHook
    with hook_cls(scene["conn"]) as hook:
        return hook.describe_group(DESCRIBE_GROUP)


def _offsets_restore(scene):
    return KafkaRestoreGroupOffsetsOperator(task_id="restore", kafka_conn_id=scene["conn"], backend=scene["backend"],
                                       group_id=OFFSETS_GROUP, snapshot_path=scene["snapshot"]
                                       ).execute({"ti": RecordingTI()})


def _cluster_state(admin: KafkaAdmin) -> tuple:
    return (admin.describe_features().level("streams.version"), admin.describe_group_config(CONFIG_GROUP).dynamic,
            admin.describe_group(DESCRIBE_GROUP).to_dict(), admin.group_offsets(OFFSETS_GROUP).committed)


# (case id, action(scene), missing operation, resource type, resource name, action words in the message)
PERMISSION_CASES = [
    ("feature-upgrade-needs-alter-on-cluster", _feature_upgrade, "ALTER", "CLUSTER", None,
     "upgrade of streams.version"),
    ("group-config-change-needs-alter-configs-on-group", _group_config_change, "ALTER_CONFIGS", "GROUP", CONFIG_GROUP,
     f"change the configs of group '{CONFIG_GROUP}'"),
    ("describe-needs-describe-on-group", _describe, "DESCRIBE", "GROUP", DESCRIBE_GROUP,
     f"describe group '{DESCRIBE_GROUP}'"),
    ("offsets-restore-needs-read-on-group", _offsets_restore, "READ", "GROUP", OFFSETS_GROUP,
     f"commit offsets for group '{OFFSETS_GROUP}'"),
]


@pytest.mark.parametrize("backend", ["native", "cli"])
@pytest.mark.parametrize("action, operation, resource_type, resource_name, doing",
                         [pytest.param(*c[1:], id=c[0]) for c in PERMISSION_CASES])
def test_missing_permission_is_named_and_nothing_changes(secured, kafka_version, monkeypatch, tmp_path, backend,
                                                         action, operation, resource_type, resource_name, doing):
    conn = set_sasl_connection(monkeypatch, "kafka_operator", secured, "operator", OPERATOR_PASSWORD, kafka_version)
    snapshot = _snapshot_then_rewind(secured, tmp_path, OFFSETS_GROUP) if action is _offsets_restore else None
    with KafkaAdmin(sasl_settings(secured)) as superuser:  # the check goes through the SASL listener as admin
        before = _cluster_state(superuser)
        try:
            action({"conn": conn, "backend": backend, "snapshot": snapshot})
        except AirflowFailException as failed:  # an operator: the task fails, not retried, with the cause
            assert str(failed) == str(failed.__cause__)
            error = failed.__cause__
        except AuthorizationFailed as refused:  # a hook call
            error = refused
        else:
            pytest.fail("the restricted principal was allowed")
        assert isinstance(error, AuthorizationFailed), f"{type(error).__name__}: {error}"
        assert not error.retriable
        assert (error.operation, error.resource_type, error.resource_name) == (operation, resource_type, resource_name)
        message = str(error)
        permission = f"{operation} on {resource_type}" + (f" '{resource_name}'" if resource_name else "")
        assert f"Not authorized to {doing}" in message or f"Not authorized to validate {doing}" in message
        assert f"User:operator needs {permission}" in message
        assert "kafka-acls --add --allow-principal User:operator --operation" in message
        assert OPERATOR_PASSWORD not in message
        assert _cluster_state(superuser) == before, "nothing changed (read back by a super user)"


@pytest.mark.parametrize("backend", ["native", "cli"])
def test_wrong_password_fails_the_task_with_an_authentication_error(secured, kafka_version, monkeypatch, backend):
    wrong = OPERATOR_PASSWORD + "-wrong"
    conn = set_sasl_connection(monkeypatch, "kafka_wrong", secured, "operator", wrong, kafka_version)
    with KafkaAdmin(sasl_settings(secured)) as superuser:
        before = superuser.describe_group_config(CONFIG_GROUP).dynamic
        with pytest.raises(AirflowFailException) as failed:
            _group_config_change({"conn": conn, "backend": backend})
        error = failed.value.__cause__
        assert isinstance(error, AuthenticationFailed) and not error.retriable
        message = str(failed.value)
        assert wrong not in message and OPERATOR_PASSWORD not in message
        assert secured.sasl_bootstrap_servers in message
        assert "Check the connection's username, password and SASL mechanism" in message
        assert superuser.describe_group_config(CONFIG_GROUP).dynamic == before


# -- secrets ---------------------------------------------------------------------------------------------------

class ProcessWatcher(threading.Thread):
    """Samples every process's argument list, and the environment of the Kafka tools this test spawns."""

    TOOL_MARKERS = (b"org.apache.kafka.tools.", b"kafka.admin.", b"org.apache.kafka.tools.consumer.group.")

    def __init__(self, secret: str) -> None:
        super().__init__(daemon=True)
        self.secret = secret.encode()
        self.stop_flag = threading.Event()
        self.argv_leaks: list[str] = []
        self.environ_leaks: list[str] = []
        self.tool_pids: set[int] = set()

    def run(self) -> None:
        me = os.getpid()
        while not self.stop_flag.is_set():
            for proc, argv in process_cmdlines():
                if self.secret in argv:
                    self.argv_leaks.append(argv.decode(errors="replace"))
                if not any(m in argv for m in self.TOOL_MARKERS):
                    continue
                if not is_child_of(proc, me):
                    continue  # another session's tools
                try:
                    environ = (proc / "environ").read_bytes()
                except OSError:
                    continue
                self.tool_pids.add(int(proc.name))
                if self.secret in environ or b"AIRFLOW_CONN_" in environ:
                    self.environ_leaks.append(argv.decode(errors="replace")[:200])
            self.stop_flag.wait(0.02)


def _verbose_task_logs(monkeypatch) -> None:
    """Task logs at DEBUG for this test (the session runs Airflow's logging at WARNING)."""
    import importlib

    for module in ("airflow._shared.logging.structlog", "airflow.sdk._shared.logging.structlog"):
        try:
            levels = importlib.import_module(module).PER_LOGGER_LEVELS
        except (ImportError, AttributeError):
            continue
        monkeypatch.setitem(levels, "airflow.task", logging.DEBUG)


def test_password_reaches_no_log_xcom_file_or_process(secured, kafka_version, monkeypatch, tmp_path, caplog, capfd):
    from airflow_provider_kip848.changecontrol.report import build_report, write_report

    _verbose_task_logs(monkeypatch)
    caplog.set_level(logging.DEBUG)
    for name in ("kafka", "kafka.net.selector", "airflow_provider_kip848"):
        caplog.set_level(logging.DEBUG, logger=name)
    conn = set_sasl_connection(monkeypatch, "kafka_sasl_admin", secured, "admin", ADMIN_PASSWORD, kafka_version,
                               audit_log=str(tmp_path / "audit" / "audit.jsonl"))
    bad = set_sasl_connection(monkeypatch, "kafka_sasl_bad", secured, "admin", ADMIN_PASSWORD + "x", kafka_version)
    spawned: list[tuple[list[str], dict[str, str] | None]] = []
    real_run = subprocess.run

    def recording_run(cmd, *args, **kwargs):  # records what the CLI backend spawns, then really runs it
        spawned.append((list(cmd), kwargs.get("env")))
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", recording_run)
    ti = RecordingTI()
    context = {"ti": ti}
    snapshot_path = str(tmp_path / "snapshots" / f"{SECRETS_GROUP}.json")
    results: dict[str, object] = {}
    failures: list[str] = []
    watcher = ProcessWatcher(ADMIN_PASSWORD)
    watcher.start()
    try:
        for backend in ("native", "cli"):
            common = {"kafka_conn_id": conn, "backend": backend}
            results[f"feature-{backend}"] = KafkaFeatureOperator(
                task_id="feature", feature="streams.version", level=1, dry_run=True, **common).execute(context)
            results[f"config-{backend}"] = KafkaGroupConfigOperator(
                task_id="config", group_id=SECRETS_GROUP, **common,
                set_configs={"consumer.heartbeat.interval.ms": 2000 if backend == "native" else 3000},
                    allow_absent_group=True).execute(context)
            if backend == "native":
                results["snapshot"] = KafkaSnapshotGroupOffsetsOperator(
                    task_id="snapshot", group_id=SECRETS_GROUP, path=snapshot_path, **common).execute(context)
                with KafkaAdmin(sasl_settings(secured)) as admin:  # a lossy conversion, for the restore to undo
                    admin.alter_group_offsets(SECRETS_GROUP, {TopicPartition(TOPIC, p): 0 for p in (0, 1)})
                results["restore"] = KafkaRestoreGroupOffsetsOperator(
                    task_id="restore", group_id=SECRETS_GROUP, snapshot_path=snapshot_path, **common).execute(context)
                results["members"] = KafkaRemoveGroupMembersOperator(
                    task_id="members", group_id=SECRETS_GROUP, all_members=True, **common).execute(context)
                results["preflight"] = KafkaMigrationPreflightOperator(
                    task_id="preflight", mode="classic_to_consumer", group_id=SECRETS_GROUP, **common).execute(context)
            results[f"compare-{backend}"] = KafkaCompareGroupOffsetsOperator(
                task_id="compare", group_id=SECRETS_GROUP, snapshot_path=snapshot_path, **common).execute(context)
            with pytest.raises(AirflowFailException) as failed:
                KafkaGroupConfigOperator(task_id="config", group_id=SECRETS_GROUP, kafka_conn_id=bad, backend=backend,
                                         set_configs={"consumer.heartbeat.interval.ms": 2500},
                                             allow_absent_group=True).execute(context)
            assert isinstance(failed.value.__cause__, AuthenticationFailed)
            failures.append(str(failed.value))
            with KafkaGroupAdminHook(conn) as hook:
                results[f"settings-{backend}"] = repr(hook.settings)
                results[f"test-connection-{backend}"] = hook.test_connection()
    finally:
        watcher.stop_flag.set()
        watcher.join()
    report_files = write_report(str(tmp_path / "report"), build_report(
        title="secrets", outcome="changed", context=context, results=results, failures=failures))
    logs = capfd.readouterr()

    # the checks see real activity (none of them is vacuous) ...
    assert results["restore"]["restored"] and results["compare-cli"]["preserved"]
    assert "Validated by the controller" in logs.out and "Restore sec-topic:0 to" in logs.out, "task logs captured"
    assert any("kafka-configs" in " ".join(cmd) or "ConfigCommand" in " ".join(cmd) for cmd, _ in spawned)
    assert watcher.tool_pids, "the watcher saw the Kafka tools run"
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"audit.jsonl", f"{SECRETS_GROUP}.json", "report.json", "report.md"}
    assert all(Path(f).is_file() for f in report_files.values())
    # ... and the password is in none of them
    secret = ADMIN_PASSWORD
    assert secret not in logs.out and secret not in logs.err, "task logs (stdout/stderr)"
    assert secret not in caplog.text, "Python logging of the provider and its clients"
    assert secret not in json.dumps([results, ti.xcom, failures], default=str), "results, XComs, error messages"
    for path in written:
        assert secret.encode() not in path.read_bytes(), f"{path} holds the password"
    assert watcher.argv_leaks == [], "argument lists"
    assert watcher.environ_leaks == [], "the Kafka tools' environment"
    for cmd, env in spawned:
        assert not any(secret in arg for arg in cmd)
        assert env is not None and not any(k.startswith("AIRFLOW_CONN_") or secret in v for k, v in env.items())
