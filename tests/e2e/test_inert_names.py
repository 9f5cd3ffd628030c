"""A group id is text in the approval a person signs and in the run's report (issue 45, item 6).

The issue's group: ``orders-app](https://evil.example/approve) **APPROVED BY SECURITY** [x``, a real classic group
on the session broker, gets a group config through kafka_group_config_change (``dag.test``), triggered by a user
whose id is as hostile. The approval body, as Airflow stores it and its REST API serves it to the UI, and the
report written at the end parse (markdown-it, CommonMark with raw HTML on, GFM tables, strikethrough, linkify) to
the same structure as the same run's on a plain group: no link, bold, heading, HTML, cell or line from the name;
nothing Airflow's UI would autolink; every character of the name shown. In the browser: tests/deploy/
test_approval_ui.py.
"""

from __future__ import annotations

from airflow_provider_kip848.kafka.model import GroupState, GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import consume, create_topics, produce
from tests.conftest import wait_until
from tests.e2e.helpers import approve, run_dag, state
from tests.unit.test_inert_names import FORGED, assert_inert

KEY = "streams.num.standby.replicas"


def test_the_forged_group_id_is_text_in_the_approval_and_the_report(airflow_db, kafka_conn, bootstrap, unique,
                                                                     run_files):
    topic = unique("inert-cfg")
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, ["1"])
    hostile, plain = f"{FORGED} {unique('g')}", unique("plain-cfg")
    shown: dict[str, dict[str, str]] = {}
    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        for group in (hostile, plain):
            assert consume(bootstrap, group, [topic], 1, group_protocol="classic")
            wait_until(lambda g=group: (lambda d: d.type is GroupType.CLASSIC and d.state is GroupState.EMPTY)(
                admin.describe_group(g)), timeout=60, what=f"{group!r} Empty")
        for group, user in ((hostile, f"<b>{FORGED}</b>"), (plain, "plain-user")):
            conf = {"group_id": group, "key": KEY, "value": "2", "action": "set", "for_group_type": "streams"}
            run, answers, report = run_dag("kafka_group_config_change", conf, decide=approve, triggered_by=user)
            assert state(run) == "success" and report["outcome"] == "changed", report
            assert admin.describe_group_config(group).dynamic == {KEY: "2"}
            shown[group] = {"approval": answers[0]["body"],
                            "report": run_files.report_md("kafka_group_config_change", run.run_id)}
    assert f"Not `<b>{FORGED}</b>`: they triggered this run" in shown[hostile]["approval"]
    assert_inert(shown[hostile], shown[plain], hostile)
    assert_inert(shown[hostile], shown[plain], f"<b>{FORGED}</b>")
