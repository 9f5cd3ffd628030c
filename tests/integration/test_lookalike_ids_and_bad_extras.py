"""Issue 31, classes 2 and 8, against the real session broker: ids that look right but are not, and connection
extras or controller refusals that must become provider errors.

Class 2: a group id with a space-like or invisible character is refused naming it by code point; one in another
Unicode normalization form (a decomposed 'ü') is matched only exactly: refused as unknown, the similar id shown
with the code points that differ; an Empty wait on an id the cluster never listed fails instead of passing.
Class 8: a connection extra that cannot be read (``request_timeout_ms: "30s"``, a timeout of 0, a ``~user`` path
the worker lacks, an artifacts location that names no place) fails the first task with
``InvalidClientSettings`` / ``ArtifactUnwritable``; a ``metadata.version`` downgrade the KRaft controller refuses
is ``InvalidFeatureLevel`` carrying the controller's own reason. Each time the cluster is unchanged.
"""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol.artifacts import require_run_location
from airflow_provider_kip848.kafka import errors as kafka_errors
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.features import KafkaFeatureOperator
from airflow_provider_kip848.operators.group_config import KafkaGroupConfigOperator
from airflow_provider_kip848.sensors.group import KafkaGroupEmptySensor, KafkaGroupLagSensor
from kip848_harness.clients import ConsumerProcess, consume, create_topics, produce
from tests.conftest import RecordingTI, set_kafka_connection, wait_until

# The waits below are run by calling execute() in the test, where no triggerer runs: they poke (deferrable=False;
# the default is the deployment's [kip848] default_deferrable, True).
TOPIC = "lookalike-topic"
NFC = "lookalike-gr\u00fcppe"  # what the application's config says
NFD = "lookalike-gru\u0308ppe"  # the same word typed decomposed: prints the same, another group for Kafka
BUSY = "lookalike-busy"
GONE = "lookalike-deleted"
SETTING = {"consumer.session.timeout.ms": 20000}


@pytest.fixture(scope="module")
def scene(kafka, tmp_path_factory):
    """A group named with a precomposed 'ü' (commits, no members), a live one, and one to delete."""
    bootstrap = kafka.bootstrap_servers
    create_topics(bootstrap, {TOPIC: 1})
    produce(bootstrap, TOPIC, (f"v{i}" for i in range(4)))
    for group in (NFC, GONE):
        consume(bootstrap, group, [TOPIC], 4, group_protocol="consumer")
    work = tmp_path_factory.mktemp("lookalike")
    busy = ConsumerProcess.start(bootstrap, BUSY, [TOPIC], protocol="consumer", client_id="lookalike-busy",
                                 log_file=str(work / "busy.log"))
    try:
        with KafkaAdmin(ClientSettings(bootstrap)) as admin:
            wait_until(lambda: len(admin.describe_group(BUSY).members) == 1, what="busy member")
            wait_until(lambda: sum(admin.group_offsets(BUSY).committed.values()) == 4, what="busy member's commit")
        yield {"bootstrap": bootstrap, "work": work}
    finally:
        busy.stop()


def fingerprint(admin: KafkaAdmin) -> tuple:
    """What no case may change: feature levels, group configs (also of the look-alike ids), offsets, listing."""
    features = {n: f.finalized_level for n, f in admin.describe_features().features.items()}
    configs = {g: admin.describe_group_config(g).dynamic for g in (NFC, NFD, BUSY)}
    offsets = {g: admin.group_offsets(g).committed for g in (NFC, BUSY)}
    # this module's groups (all named lookalike-*): other tests' groups on the worker's broker change on their own
    listing = sorted((g.group_id, g.type.value, g.state) for g in admin.list_groups()
                     if g.group_id.startswith("lookalike") and g.group_id != GONE)
    return features, configs, offsets, listing


# -- class 2: ids that look right but are not -------------------------------------------------------------------


@pytest.mark.parametrize("group_id, error, fragments", [
    pytest.param(NFD, kafka_errors.GroupNotFound,
                 ["U+0075 U+0308", "similar ids: 'lookalike-grüppe' (at character 13 it has U+00FC where the "
                  "given id has U+0075 U+0308)", "Fix the group id"], id="decomposed-umlaut"),
    pytest.param("lookalike-gr\u00fcppe\u00a0x", kafka_errors.InvalidGroupId,
                 ["U+00A0 NO-BREAK SPACE at character 17 (space-like)"], id="no-break-space-inside"),
    pytest.param("lookalike\u2007busy", kafka_errors.InvalidGroupId, ["U+2007 FIGURE SPACE"], id="figure-space"),
    pytest.param("lookalike\u202fbusy", kafka_errors.InvalidGroupId, ["U+202F NARROW NO-BREAK SPACE"], id="narrow-nbsp"),
    pytest.param("lookalike\u3000busy", kafka_errors.InvalidGroupId, ["U+3000 IDEOGRAPHIC SPACE"], id="ideographic-space"),
    pytest.param("lookalike-busy\ufe0f", kafka_errors.InvalidGroupId, ["U+FE0F VARIATION SELECTOR-16"], id="variation-selector"),
    pytest.param("lookalike-\u0301busy", kafka_errors.InvalidGroupId, ["U+0301", "no letter under it"], id="lone-combining-mark"),
    pytest.param("lookalike-busy\u00ad", kafka_errors.InvalidGroupId, ["U+00AD SOFT HYPHEN"], id="soft-hyphen"),
])
def test_lookalike_group_ids_are_refused_showing_code_points_and_change_nothing(scene, kafka_conn, group_id, error,
                                                                                fragments):
    """Both the admin layer and the operator: the id is refused (or, for another normalization form, matched
    exactly and refused as unknown), the message names the characters by code point, nothing changes."""
    with KafkaAdmin(ClientSettings(scene["bootstrap"])) as admin:
        before = fingerprint(admin)
        with pytest.raises(error) as refused:
            admin.alter_group_config(group_id, SETTING)
        task = KafkaGroupConfigOperator(task_id="cfg", group_id=NFD if error is kafka_errors.GroupNotFound else NFC,
                                        set_configs=SETTING)
        if error is kafka_errors.InvalidGroupId:  # visible when the DAG is parsed
            with pytest.raises(kafka_errors.InvalidGroupId):
                KafkaGroupConfigOperator(task_id="cfg", group_id=group_id, set_configs=SETTING)
        else:
            with pytest.raises(AirflowFailException) as failed:
                task.execute({"ti": RecordingTI()})
            assert type(failed.value.__cause__) is kafka_errors.GroupNotFound and "U+00FC" in str(failed.value)
        assert fingerprint(admin) == before
    for fragment in fragments:
        assert fragment in str(refused.value)
    assert not refused.value.retriable


def test_an_empty_wait_on_an_id_the_cluster_never_listed_fails_naming_it_never_empty(scene, kafka_conn):
    """The live group is typed decomposed: before, the wait answered Empty at once while its member ran. Now it
    fails naming the similar id in code points; allow_absent is the explicit way to accept a missing group; a
    group the wait saw and that is deleted during it is empty."""
    with KafkaAdmin(ClientSettings(scene["bootstrap"])) as admin:
        before = fingerprint(admin)
        typo = "lookalike-bu\u0455y"  # Cyrillic 'ѕ' for the 's' of the live group
        sensor = KafkaGroupEmptySensor(task_id="empty", deferrable=False, group_id=typo, poll_interval=0.2, settle_seconds=0, timeout=30)
        sensor._apply_templated()
        with pytest.raises(AirflowFailException) as failed:
            sensor.poke({})
        message = str(failed.value)
        assert "does not exist on this cluster, and has not since this wait began" in message
        assert "'lookalike-busy' (at character 13 it has U+0073 where the given id has U+0455)" in message
        assert isinstance(failed.value.__cause__, kafka_errors.GroupNotFound) and "allow_absent=True" in message
        assert len(admin.describe_group(BUSY).members) == 1  # the real group was live all along

        allowed = KafkaGroupEmptySensor(task_id="empty", deferrable=False, group_id=NFD, poll_interval=0.2, settle_seconds=0,
                                        allow_absent="true", timeout=30)
        allowed._apply_templated()
        assert allowed.poke({}).is_done
        with pytest.raises(kafka_errors.InvalidArgument, match="allow_absent must be true or false"):
            KafkaGroupEmptySensor(task_id="empty", group_id=NFC, allow_absent="perhaps")

        seen = KafkaGroupEmptySensor(task_id="empty", deferrable=False, group_id=GONE, poll_interval=0.2, settle_seconds=0, timeout=30)
        seen._apply_templated()
        assert seen.poke({}).is_done  # Empty with its commits: seen
        admin.delete_group(GONE)
        wait_until(lambda: GONE not in admin.group_ids(), what="deleted group unlisted")
        again = seen.poke({})
        assert again.is_done and "no longer exists" in again.xcom_value["summary"]
        assert fingerprint(admin) == before


# -- class 8: errors are provider errors --------------------------------------------------------------------------


@pytest.mark.parametrize("extra, error, fragments", [
    pytest.param({"request_timeout_ms": "30s"}, kafka_errors.InvalidClientSettings,
                 ["extra request_timeout_ms: request_timeout_ms must be a whole number from 100 to 3,600,000, not "
                  "'30s'", "without a unit"], id="timeout-with-a-unit"),
    pytest.param({"request_timeout_ms": 0}, kafka_errors.InvalidClientSettings, ["from 100 to 3,600,000, not 0"],
                 id="timeout-0"),
    pytest.param({"request_timeout_ms": 2.5}, kafka_errors.InvalidClientSettings, ["from 100 to 3,600,000, not 2.5"],
                 id="timeout-fraction"),
    # issue 45, item 4: past librdkafka's 3,600,000 ms (a bare ValueError inside confluent-kafka, retried by Airflow)
    # and numbers that are not finite (json.dumps writes NaN, Airflow's extra_dejson reads it back)
    pytest.param({"request_timeout_ms": 1e18}, kafka_errors.InvalidClientSettings,
                 ["extra request_timeout_ms: request_timeout_ms must be a whole number from 100 to 3,600,000, not "
                  "1e+18"], id="timeout-1e18"),
    pytest.param({"request_timeout_ms": 3_600_001}, kafka_errors.InvalidClientSettings,
                 ["from 100 to 3,600,000, not 3600001"], id="timeout-past-librdkafka-s-limit"),
    pytest.param({"request_timeout_ms": float("nan")}, kafka_errors.InvalidClientSettings,
                 ["extra request_timeout_ms: request_timeout_ms must be a whole number from 100 to 3,600,000, not nan"],
                 id="timeout-nan"),
    pytest.param({"request_timeout_ms": "Infinity"}, kafka_errors.InvalidClientSettings,
                 ["request_timeout_ms must be a whole number from 100 to 3,600,000, not 'Infinity'"],
                 id="timeout-infinity-as-text"),
    pytest.param({"security_protocol": "SSL", "ssl_cafile": "~no-such-user-kip848/ca.pem"}, kafka_errors.InvalidClientSettings,
                 ["ssl_cafile '~no-such-user-kip848/ca.pem' starts with ~no-such-user-kip848, but the worker has no "
                  "user 'no-such-user-kip848'", "absolute path"], id="cafile-of-an-unknown-user"),
])
def test_connection_extras_that_cannot_be_read_fail_the_first_task_with_a_provider_error(scene, monkeypatch, extra,
                                                                                         error, fragments):
    conn = set_kafka_connection(monkeypatch, "kafka_bad_extra", scene["bootstrap"], **extra)
    with KafkaAdmin(ClientSettings(scene["bootstrap"])) as admin:
        before = fingerprint(admin)
        for task in (KafkaGroupConfigOperator(task_id="cfg", kafka_conn_id=conn, group_id=NFC, set_configs=SETTING),
                     KafkaGroupEmptySensor(task_id="empty", kafka_conn_id=conn, group_id=NFC, settle_seconds=0)):
            with pytest.raises(AirflowFailException) as failed:
                if isinstance(task, KafkaGroupEmptySensor):
                    task._apply_templated()
                    task.poke({})
                else:
                    task.execute({"ti": RecordingTI()})
            cause = failed.value.__cause__
            assert type(cause) is error, f"{type(cause).__name__}: {cause}"
            assert not cause.retriable and "kafka_bad_extra" in str(cause)
            for fragment in fragments:
                assert fragment in str(failed.value)
        assert fingerprint(admin) == before


@pytest.mark.parametrize("cli_timeout, shown", [(float("nan"), "nan"), ("Infinity", "'Infinity'"), (1e18, "1e+18"),
                                                 (86_401, "86401")])
def test_a_cli_timeout_that_is_not_finite_or_past_a_day_fails_the_task_naming_the_extra(scene, monkeypatch,
                                                                                       cli_timeout, shown):
    """Issue 45, item 4: the CLI backend's ``cli_timeout`` (a subprocess's timeout: past threading's TIMEOUT_MAX an
    OverflowError inside the call) is refused before any tool runs, naming the connection and the extra."""
    conn = set_kafka_connection(monkeypatch, "kafka_bad_cli", scene["bootstrap"], cli_timeout=cli_timeout)
    with KafkaAdmin(ClientSettings(scene["bootstrap"])) as admin:
        before = fingerprint(admin)
        task = KafkaGroupConfigOperator(task_id="cfg", kafka_conn_id=conn, backend="cli", group_id=NFC,
                                        set_configs=SETTING)
        with pytest.raises(AirflowFailException) as failed:
            task.execute({"ti": RecordingTI()})
        cause = failed.value.__cause__
        assert type(cause) is kafka_errors.InvalidClientSettings and not cause.retriable, repr(cause)
        assert (f"Connection 'kafka_bad_cli', extra cli_timeout: cli_timeout must be a number from 0 to 86,400, not "
                f"{shown}") in str(failed.value)
        assert fingerprint(admin) == before


@pytest.mark.parametrize("root, fragment", [
    pytest.param("~no-such-user-kip848/artifacts", "starts with ~no-such-user-kip848, but this worker has no user",
                 id="artifacts-of-an-unknown-user"),
    pytest.param("file://", "names no place", id="artifacts-url-without-a-path"),
])
def test_an_artifacts_location_that_names_no_place_is_refused_before_anything_is_written(scene, monkeypatch, root,
                                                                                        fragment, tmp_path):
    monkeypatch.chdir(tmp_path)
    conn = set_kafka_connection(monkeypatch, "kafka_bad_artifacts", scene["bootstrap"], artifacts_url=root)
    with pytest.raises(kafka_errors.ArtifactUnwritable) as refused:
        require_run_location(conn, "some_dag", "manual__1", "snapshots")
    assert fragment in str(refused.value) and not refused.value.retriable
    assert list(tmp_path.iterdir()) == []  # nothing written where the worker happens to run


def test_a_metadata_version_downgrade_the_controller_refuses_carries_its_reason(scene, kafka_conn):
    """The KRaft controller refuses a metadata.version downgrade that could lose metadata; its reason is only in
    the UpdateFeatures response (kafka-python prints it inside its error). Validated only (dry run): the shared
    broker is never changed, and the controller answers the same."""
    with KafkaAdmin(ClientSettings(scene["bootstrap"])) as admin:
        before = fingerprint(admin)
        current = admin.describe_features().level("metadata.version")
        task = KafkaFeatureOperator(task_id="feat", feature="metadata.version", level=current - 1, action="downgrade",
                                    dry_run=True)
        with pytest.raises(AirflowFailException) as failed:
            task.execute({"ti": RecordingTI()})
        cause = failed.value.__cause__
        assert isinstance(cause, kafka_errors.InvalidFeatureLevel), f"{type(cause).__name__}: {cause}"
        assert "The controller refused" in str(cause) and not cause.retriable
        assert "Refusing to perform the requested downgrade" in str(cause) or "metadata" in cause.what
        assert "Request '" not in str(cause)  # the reason, not the request dump
        assert fingerprint(admin) == before


def test_the_cli_backend_carries_the_controllers_reason_for_a_refused_downgrade(scene, cli):
    """kafka-features prints the controller's refusal as "Can not downgrade ...": the CLI backend raises
    InvalidFeatureLevel (not retriable) with that reason, as the native backend does (before: a KafkaToolError
    saying only "1 out of 1 operation(s) failed"). Validated only (dry run): the shared broker is never changed."""
    with KafkaAdmin(ClientSettings(scene["bootstrap"])) as admin:
        before = fingerprint(admin)
        current = cli.describe_features().level("metadata.version")
        with pytest.raises(kafka_errors.InvalidFeatureLevel) as refused:
            cli.update_feature("metadata.version", current - 1, action="downgrade", dry_run=True)
        message = str(refused.value)
        assert message.startswith("kafka-features: Can not downgrade metadata.version to ")
        assert "Refusing to perform the requested downgrade because it might delete metadata" in message
        assert not refused.value.retriable
        assert fingerprint(admin) == before


def test_a_lag_wait_on_an_id_the_cluster_never_listed_fails_naming_it_never_caught_up(scene, kafka_conn):
    """The lag of a group that does not exist is unknown, not 0: a lag wait on the decomposed id of a group fails at
    its first poll, as the Empty wait does, naming the similar id by the code points that differ."""
    with KafkaAdmin(ClientSettings(scene["bootstrap"])) as admin:
        before = fingerprint(admin)
        sensor = KafkaGroupLagSensor(task_id="lag", deferrable=False, group_id=NFD, max_lag=0, poll_interval=0.2, timeout=30)
        sensor._apply_templated()
        with pytest.raises(AirflowFailException) as failed:
            sensor.poke({})
        message = str(failed.value)
        assert "does not exist on this cluster; similar ids: 'lookalike-grüppe'" in message
        assert "U+00FC" in message and "U+0308" in message  # the code points that differ, not two equal prints
        assert "no lag to drain (unknown, not 0)" in message
        assert isinstance(failed.value.__cause__, kafka_errors.GroupNotFound)
        caught_up = KafkaGroupLagSensor(task_id="lag", deferrable=False, group_id=NFC, max_lag=0, poll_interval=0.2, timeout=30)
        caught_up._apply_templated()
        assert caught_up.poke({}).is_done  # the real id: its commits are at the log end
        assert fingerprint(admin) == before
