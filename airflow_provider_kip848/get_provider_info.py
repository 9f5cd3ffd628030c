"""Provider metadata Airflow discovers through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from airflow_provider_kip848 import __version__
from airflow_provider_kip848.hooks.connection_form import CONN_FIELDS, CONN_TYPE, UI_FIELD_BEHAVIOUR

INTEGRATION = "Apache Kafka group administration (KIP-848, KIP-1071)"


def get_provider_info() -> dict:
    # Kept import-light: Airflow calls this at start-up for every provider.
    return {
        "package-name": "airflow-provider-kip848",
        "name": "Kafka KIP-848 / KIP-1071 group administration",
        "description": (
            "Consumer-group and Kafka Streams-group administration as reviewed, "
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
                                   "airflow_provider_kip848.hooks.members", "airflow_provider_kip848.hooks.instances",
                                   "airflow_provider_kip848.hooks.platform_watch"],
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
                    "airflow_provider_kip848.operators.groups",
                    "airflow_provider_kip848.operators.preflight",
                    "airflow_provider_kip848.operators.topology",
                    "airflow_provider_kip848.operators.lint",
                    "airflow_provider_kip848.operators.validation",
                    "airflow_provider_kip848.operators.approval",
                    "airflow_provider_kip848.operators.lock",
                    "airflow_provider_kip848.operators.metrics",
                    "airflow_provider_kip848.operators.application",
                    "airflow_provider_kip848.operators.window",
                    "airflow_provider_kip848.operators.fleet",
                    "airflow_provider_kip848.operators.wave_validation",
                    "airflow_provider_kip848.operators.group_load",
                ],
            }
        ],
        # the report tasks' "Report" button (operators/report_link.py): the run's report page of the reports plugin
        "extra-links": ["airflow_provider_kip848.operators.report_link.ReportLink"],
        "sensors": [
            {"integration-name": INTEGRATION, "python-modules": ["airflow_provider_kip848.sensors.group",
                                                                   "airflow_provider_kip848.sensors.group_empty"]}
        ],
        "triggers": [
            {"integration-name": INTEGRATION, "python-modules": ["airflow_provider_kip848.triggers.group",
                                                                   "airflow_provider_kip848.triggers.move",
                                                                   "airflow_provider_kip848.triggers.platform",
                                                                   "airflow_provider_kip848.triggers.spark"]}
        ],
        # the deployment's application controllers (docs/controllers.md): a run names one, never code
        "config": {
            "kip848": {
                "description": "airflow-provider-kip848: settings of the deployment (not of a run). Besides the "
                               "options below, <dag_id>_schedule gives that DAG a maintenance-window schedule "
                               "(five cron fields and an IANA zone, e.g. '0 2 * * SAT Europe/Berlin'; unset: "
                               "none, the DAG runs when triggered; a value that does not read fails the DAG's "
                               "import). See docs/deploy.md.",
                "options": {
                    "controllers": {
                        "description": "The application controller registry: a YAML or JSON file every worker "
                                       "reads, naming each application's controller (kind and target). DAG runs "
                                       "and the fleet's ownership map choose a controller by its name here; "
                                       "unset, every name is refused. See docs/controllers.md.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "/etc/airflow/kip848-controllers.yaml",
                        "default": None,
                    },
                    "ownership_dir": {
                        "description": "The folder of the fleet's ownership map files, on every worker. A fleet "
                                       "run's ownership_file names a map here by its file name alone (never a "
                                       "path: a name with a separator, '..', a leading dot, or a link leading "
                                       "out of the folder is refused before anything is read). Unset: maps come "
                                       "from Airflow Variables only. See docs/fleet.md.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "/etc/airflow/kip848-ownership",
                        "default": None,
                    },
                    "ownership_variable_prefix": {
                        "description": "The prefix of every Airflow Variable that holds a fleet ownership map. A "
                                       "fleet run's ownership_variable (and the fleet view's) must start with it; "
                                       "any other Variable is refused before it is read, so a run cannot make the "
                                       "plan read another Variable and show parts of it. See docs/fleet.md.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "kip848_",
                        "default": "kip848_",
                    },
                    "default_deferrable": {
                        "description": "The mode of the provider's waits (KafkaGroup*Sensor) when a DAG does not "
                                       "choose one (deferrable=None, the default): True waits in the triggerer "
                                       "(no worker slot held; needs a triggerer process), False pokes in a worker. "
                                       "An explicit deferrable= in the DAG wins. A value that is not true or false "
                                       "fails the DAG's import. See docs/operators.md.",
                        "version_added": "0.1.0",
                        "type": "boolean",
                        "example": "False",
                        "default": "True",
                    },
                    "max_window_hours": {
                        "description": "The longest maintenance window a run may give (hours, above 0 and at "
                                       "most 24). A longer one is refused by the window guard, naming the swap "
                                       "of start and end that would make it short (05:00-02:00 is 21 h). A value "
                                       "that is not such a number fails every guard (never a silent default). "
                                       "See docs/reliability.md.",
                        "version_added": "0.1.0",
                        "type": "float",
                        "example": "8",
                        "default": "12",
                    },
                },
            },
        },
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
