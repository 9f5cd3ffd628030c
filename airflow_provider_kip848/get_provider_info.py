"""Provider metadata Airflow discovers through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from airflow_provider_kip848 import __version__
from airflow_provider_kip848.hooks.connection import CONN_FIELDS, CONN_TYPE, UI_FIELD_BEHAVIOUR

INTEGRATION = "Apache Kafka group administration (KIP-848, KIP-1071)"


def get_provider_info() -> dict:
    # Kept import-light: Airflow calls this at start-up for every provider.
    return {
        "package-name": "airflow-provider-kip848",
        "name": "Kafka KIP-848 / KIP-1071 group administration",
        "description": (
            "Consumer-group and Kafka Streams-group administration as reviewed, scheduled, "
            "approval-gated DAGs: feature flags, group configs, offsets snapshots, member removal, "
            "and classic -> consumer / classic -> streams migrations with PySpark validation."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://kafka.apache.org/documentation/#consumer_rebalance_protocol",
                "tags": ["software"],
            }
        ],
        "hooks": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_provider_kip848.hooks.admin", "airflow_provider_kip848.hooks.cli",
                                   "airflow_provider_kip848.hooks.members"],
            }
        ],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_provider_kip848.operators.features",
                    "airflow_provider_kip848.operators.group_config",
                    "airflow_provider_kip848.operators.offsets",
                    "airflow_provider_kip848.operators.members",
                    "airflow_provider_kip848.operators.preflight",
                    "airflow_provider_kip848.operators.lint",
                    "airflow_provider_kip848.operators.validation",
                    "airflow_provider_kip848.operators.approval",
                    "airflow_provider_kip848.operators.lock",
                    "airflow_provider_kip848.operators.metrics",
                    "airflow_provider_kip848.operators.application",
                    "airflow_provider_kip848.operators.window",
                    "airflow_provider_kip848.operators.fleet",
                    "airflow_provider_kip848.operators.wave_validation",
                ],
            }
        ],
        "sensors": [
            {"integration-name": INTEGRATION, "python-modules": ["airflow_provider_kip848.sensors.group"]}
        ],
        "triggers": [
            {"integration-name": INTEGRATION, "python-modules": ["airflow_provider_kip848.triggers.group",
                                                                   "airflow_provider_kip848.triggers.spark"]}
        ],
        "connection-types": [
            {
                "connection-type": CONN_TYPE,
                "hook-class-name": "airflow_provider_kip848.hooks.admin.KafkaGroupAdminHook",
                "hook-name": "Kafka group admin (KIP-848 / KIP-1071)",
                "conn-fields": CONN_FIELDS,
                "ui-field-behaviour": UI_FIELD_BEHAVIOUR,
            }
        ],
    }
