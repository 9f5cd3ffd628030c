"""Kafka cluster inventory: what a migration starts from.

The first thing every runbook of the Kafka docs does is look: which feature
levels are finalized (``kafka-features describe``), which groups exist and of
which type (``kafka-groups --list``). This DAG does exactly that, through the
provider's hook, and renders one plain-text report. It changes nothing.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task

from airflow_provider_kip848.changecontrol.runpaths import NAME_FORM_PATTERN
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.model import feature_level_name
from airflow_provider_kip848.operators.report import write_report_file
from airflow_provider_kip848.operators.run_conf import check_run_conf
from airflow_provider_kip848.operators.schedule import deployment_schedule

#: Features the KIP-848 / KIP-1071 runbooks care about, in the order they are checked.
MIGRATION_FEATURES = ("metadata.version", "group.version", "streams.version", "share.version")
DAG_ID = "kafka_cluster_inventory"


@dag(
    dag_id=DAG_ID,
    schedule=deployment_schedule(DAG_ID),  # None unless the deployment sets [kip848] <dag_id>_schedule (docs/deploy.md)
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["kafka", "kip848", "read-only"],
    params={
        "kafka_conn_id": Param(
            "kafka_admin_default",
            type="string",
            title="Kafka connection",
            description="A connection of type kafka_admin.",
        ),
        "report_file": Param(
            None,
            type=["null", "string"],
            pattern=NAME_FORM_PATTERN,
            title="Write the report to this file of the run's report folder too",
            description="A file name alone (inventory.txt), never a path: it is written in this run's own report "
                        "folder of the deployment's artifact location (docs/deploy.md). Empty keeps the report in "
                        "the task log and XCom only.",
        ),
    },
    doc_md=__doc__,
)
def kafka_cluster_inventory():
    # each read is a first task: a run's conf key no Param declares (a typo) fails the run there
    @task
    def describe_cluster(params: dict | None = None, **context) -> dict:
        check_run_conf(context)
        return KafkaGroupAdminHook(params["kafka_conn_id"]).describe_cluster().to_dict()

    @task
    def describe_features(params: dict | None = None, **context) -> dict:
        check_run_conf(context)
        return KafkaGroupAdminHook(params["kafka_conn_id"]).describe_features().to_dict()

    @task
    def list_groups(params: dict | None = None, **context) -> list[dict]:
        check_run_conf(context)
        return [g.to_dict() for g in KafkaGroupAdminHook(params["kafka_conn_id"]).list_groups()]

    @task
    def report(cluster: dict, features: dict, groups: list[dict], params: dict | None = None, **context) -> str:
        text = render_inventory(cluster, features, groups)
        print(text)
        if params.get("report_file"):  # a name in the run's own folder, checked; never a path the run chooses
            write_report_file(context, params["report_file"], text + "\n", param="report_file")
        return text

    report(describe_cluster(), describe_features(), list_groups())


def render_inventory(cluster: dict, features: dict, groups: list[dict]) -> str:
    """A plain-text report in the layout of ``kafka-features describe`` and ``kafka-groups --list``."""
    lines = [
        f"Cluster {cluster['cluster_id']}: {len(cluster['brokers'])} broker(s), controller {cluster['controller_id']}",
        "",
        f"{'FEATURE':<36}{'FINALIZED':>12}{'SUPPORTED':>22}",
    ]
    ordered = [n for n in MIGRATION_FEATURES if n in features] + sorted(set(features) - set(MIGRATION_FEATURES))
    for name in ordered:
        f = features[name]
        lo, hi = (feature_level_name(name, f[k]) for k in ("supported_min", "supported_max"))
        finalized = feature_level_name(name, f["finalized_level"])
        lines.append(f"{name:<36}{finalized:>12}{lo + ' - ' + hi:>22}")
    width = max([36, *(len(g["group_id"]) + 2 for g in groups)])
    lines += ["", f"{'GROUP':<{width}}{'TYPE':<10}STATE"]
    for g in groups:
        lines.append(f"{g['group_id']:<{width}}{g['type']:<10}{g['state']}")
    if not groups:
        lines.append("(no groups)")
    return "\n".join(lines)


dag_object = kafka_cluster_inventory()
