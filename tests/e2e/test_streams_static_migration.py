"""kip1071_streams_offline_migration of a static Kafka Streams application (``group.instance.id`` in its config,
KAFKA-20169) on the session's 4.4.0 broker: it migrates, its stream threads join the streams group as
``<group.instance.id>-<n>``. (Refused on 4.3.1 at the preflight: tests/integration/test_streams_static_members.py.)"""

from __future__ import annotations

import time

from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC
from kip848_harness.clients import produce
from tests.e2e.helpers import approve, run_dag, state
from tests.e2e.test_streams_offline_migration import classic_wordcount, conf, count_of


def test_a_static_streams_application_migrates_on_44(airflow_db, kafka, kafka_conn, unique, tmp_path, controllers,
                                                      supervisor):
    assert kafka.version == "4.4.0", "static streams members need 4.4 brokers: the session's default"
    app_id, word = unique("wc-static"), f"st{time.time_ns()}"
    instance = f"{app_id}-host"
    admin = KafkaAdmin(ClientSettings(kafka.bootstrap_servers))
    # static on both protocols, two stream threads: the application's own files, read by its controller
    controller = classic_wordcount(kafka, admin, app_id, word, controllers, supervisor=supervisor,
                                   properties={"group.instance.id": instance, "num.stream.threads": "2"})
    try:
        classic = admin.describe_group(app_id)
        assert sorted(m.instance_id for m in classic.members) == [f"{instance}-1", f"{instance}-2"], classic
        run, answers, report = run_dag("kip1071_streams_offline_migration",
                                       conf(kafka, app_id, tmp_path, validate_with_spark=False), decide=approve)
        assert state(run) == "success" and report["outcome"] == "migrated", report
        checks = {c["name"]: c for c in report["results"]["preflight"]["checks"]}
        static = checks["static_membership"]
        assert static["status"] == "warn" and f"group.instance.id={instance}" in static["evidence"], static
        assert "brokers 4.4" in static["evidence"] and "<group.instance.id>-<n>" in static["remedy"]
        lint = {f["key"]: f for f in report["results"]["lint"]["findings"]}
        assert lint["group.instance.id"]["severity"] == "warn", lint
        assert f"group.instance.id={instance} (controller)" in answers[0]["body"], answers[0]["body"]
        desc = admin.describe_group(app_id)
        assert desc.type is GroupType.STREAMS and desc.state == "Stable"
        assert sorted(m.instance_id for m in desc.members) == [f"{instance}-1", f"{instance}-2"], desc
        produce(kafka.bootstrap_servers, WORDCOUNT_INPUT_TOPIC, [f"{word} c"])
        assert count_of(kafka.bootstrap_servers, word, 3) == 3, "the static streams app continued from the commits"
    finally:
        controller.remove()
        admin.close()
