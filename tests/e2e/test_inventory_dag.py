"""The first example DAG, run end to end with dag.test() against the real broker."""

from __future__ import annotations

import json
import re
import sys

from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import consume, create_topics, produce
from tests.conftest import REPO


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

        monkeypatch.setenv("AIRFLOW_CONN_KAFKA_ADMIN_DEFAULT", json.dumps({"conn_type": "kafka_admin", "host": bootstrap}))
        monkeypatch.syspath_prepend(str(REPO / "dags"))
        sys.modules.pop("kafka_cluster_inventory", None)
        from kafka_cluster_inventory import dag_object

        report_path = tmp_path / "inventory.txt"
        run = dag_object.test(run_conf={"report_path": str(report_path)}, use_executor=False)
        assert str(run.state) in ("success", "DagRunState.SUCCESS")
        text = report_path.read_text()
    finally:
        app.stop()

    assert re.search(r"^group\.version\s+1\s+0 - 1$", text, re.M), text
    assert re.search(r"^streams\.version\s+1\s+0 - 1$", text, re.M), text
    assert re.search(r"^metadata\.version\s+4\.3-IV0\s", text, re.M) or "4.2-IV1" in text, text
    assert re.search(rf"^{re.escape(classic)}\s+classic\s+Empty", text, re.M), text
    assert re.search(rf"^{re.escape(modern)}\s+consumer\s+Empty", text, re.M), text
    assert re.search(rf"^{re.escape(streams)}\s+streams\s+Stable", text, re.M), text
