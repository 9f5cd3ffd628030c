"""The example DAGs' Params forms refuse bad input before a run starts (the check the trigger form runs).

Each case is one bad value in one DAG's form: the DAG bag of ``dags/`` is loaded as the scheduler would,
the form's defaults are overlaid with the value, and Airflow's own ``ParamsDict.validate()`` must raise
``ParamValidationError`` naming the param and what it accepts. The operators' bad-input table (the same
mistakes when they get past a form, e.g. through the REST API or another DAG) is
``tests/integration/test_bad_operator_input.py``.
"""

from __future__ import annotations

import copy

import pytest
from airflow.sdk.exceptions import ParamValidationError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_kip848.kafka.arguments import require_group_id
from airflow_provider_kip848.kafka.errors import InvalidGroupId
from tests.conftest import REPO


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}, f"the example DAGs do not import: {bag.import_errors}"
    return bag


#: What a form needs beyond its defaults to be valid (the control each case departs from by one value).
VALID = {"kafka_group_config_change": {"group_id": "orders"}, "kip848_consumer_rolling_upgrade": {"group_id": "orders"},
         "kip848_consumer_offline_migration": {"group_id": "orders"},
         "kip1071_streams_rollback_to_classic": {"application_id": "wordcount"},
         "kip1071_delete_streams_group": {"group_id": "wordcount"}}

# (case id, dag id, {param: bad value}, fragment of the error)
CASES = [
    # kafka_enable_streams_protocol
    ("level-as-string", "kafka_enable_streams_protocol", {"level": "1"}, "is not of type 'integer'"),
    ("level-above-form-max", "kafka_enable_streams_protocol", {"level": 99}, "is greater than the maximum of 10"),
    ("level-negative", "kafka_enable_streams_protocol", {"level": -1}, "is less than the minimum of 0"),
    ("feature-not-offered", "kafka_enable_streams_protocol", {"feature": "metadata.version"},
     "'metadata.version' is not one of ['streams.version', 'group.version', 'share.version']"),
    ("dry-run-as-text", "kafka_enable_streams_protocol", {"dry_run": "yes"}, "is not of type 'boolean'"),
    # kafka_group_config_change
    ("config-empty-group-id", "kafka_group_config_change", {"group_id": ""}, "should be non-empty"),
    ("config-value-too-long", "kafka_group_config_change", {"value": "9" * 201}, "is too long"),
    ("approvers-not-a-list", "kafka_group_config_change", {"approvers": "alice"},
     "is not of type 'array'"),
    ("approval-age-negative", "kafka_group_config_change", {"approval_max_age_minutes": -5},
     "is less than the minimum of 0"),
    ("four-eyes-as-text", "kafka_group_config_change", {"four_eyes": "no"},
     "is not of type 'boolean'"),
    # kip1071_streams_offline_migration
    ("streams-empty-application-id", "kip1071_streams_offline_migration", {"application_id": ""},
     "should be non-empty"),
    ("standby-negative", "kip1071_streams_offline_migration", {"standby_replicas": -1}, "is less than the minimum of 0"),
    ("session-timeout-with-unit", "kip1071_streams_offline_migration", {"session_timeout_ms": "45s"},
     "is not of type 'null', 'integer'"),
    ("streams-client-version-not-a-release", "kip1071_streams_offline_migration", {"client_version": "4.x"},
     "does not match"),
    ("application-properties-as-text", "kip1071_streams_offline_migration",
     {"application_properties": "num.standby.replicas=1"}, "is not of type 'object'"),
    ("reader-unknown", "kip1071_streams_offline_migration", {"reader": "kafka"},
     "'kafka' is not one of ['connector', 'python']"),
    ("poll-too-fast", "kip1071_streams_offline_migration", {"poll_seconds": 0.1}, "is less than the minimum of 0.2"),
    ("controller-args-not-object", "kip1071_streams_offline_migration", {"app_controller_args": ["--fast"]},
     "is not of type 'object'"),
    # a run names a controller of the deployment's registry, never code: the form refuses a module path
    ("controller-as-module-path", "kip1071_streams_offline_migration", {"app_controller": "subprocess:Popen"},
     "does not match"),
    ("controller-as-path", "kip848_consumer_offline_migration", {"app_controller": "../../bin/sh"},
     "does not match"),
    ("remove-after-as-text", "kip1071_streams_offline_migration", {"remove_members_after": "soon"},
     "is not of type 'number'"),
    # a maintenance window's time is HH:MM on the clock of window_tz: an offset, or another shape, is refused by
    # the form (the guard refuses the rest of what cannot be what was meant: tests/unit/test_window_rules.py)
    ("window-start-with-offset", "kip848_consumer_offline_migration", {"window_start": "02:00+02:00"},
     "does not match"),
    ("window-end-zulu", "kip1071_streams_offline_migration", {"window_end": "05:00Z"}, "does not match"),
    ("window-start-without-colon", "kip1071_streams_rollback_to_classic", {"window_start": "0200"},
     "does not match"),
    ("window-end-24", "kip848_consumer_offline_migration", {"window_end": "24:00"}, "does not match"),
    ("window-days-empty", "kip1071_streams_rollback_to_classic", {"window_days": ""}, "should be non-empty"),
    # kip848_consumer_offline_migration
    ("offline-target-unknown", "kip848_consumer_offline_migration", {"target_protocol": "streams"},
     "'streams' is not one of ['consumer', 'classic']"),
    ("offline-start-deadline-zero", "kip848_consumer_offline_migration", {"start_timeout_minutes": 0},
     "is less than the minimum of 0.1"),
    ("offline-empty-group-id", "kip848_consumer_offline_migration", {"group_id": ""}, "should be non-empty"),
    # kip1071_streams_rollback_to_classic
    ("rollback-empty-application-id", "kip1071_streams_rollback_to_classic", {"application_id": ""},
     "should be non-empty"),
    ("rollback-instances-zero", "kip1071_streams_rollback_to_classic", {"expected_instances": 0},
     "is less than the minimum of 1"),
    # kip848_fleet_migration
    ("fleet-wave-size-zero", "kip848_fleet_migration", {"wave_size": 0}, "is less than the minimum of 1"),
    ("fleet-canary-negative", "kip848_fleet_migration", {"canary": -1}, "is less than the minimum of 0"),
    ("fleet-readiness-unknown", "kip848_fleet_migration", {"readiness": ["blocked"]},
     "'blocked' is not one of ['ready_online', 'offline_only']"),
    ("fleet-ratio-above-one", "kip848_fleet_migration", {"max_failed_ratio": 1.5}, "is greater than the maximum of 1"),
    ("fleet-apps-as-text", "kip848_fleet_migration", {"apps": "orders"}, "is not of type 'array'"),
    ("fleet-budget-as-text", "kip848_fleet_migration", {"max_failed_apps": "1"}, "is not of type 'null', 'integer'"),
    ("fleet-dry-run-as-text", "kip848_fleet_migration", {"dry_run": "no"}, "is not of type 'boolean'"),
    # an empty selection never widens to every application (issue 31.1): a blank prefix matches every group
    ("fleet-readiness-empty", "kip848_fleet_migration", {"readiness": []}, "[] should be non-empty"),
    ("fleet-prefix-empty", "kip848_fleet_migration", {"prefixes": [""]}, "'' should be non-empty"),
    ("fleet-app-empty", "kip848_fleet_migration", {"apps": ["orders", ""]}, "'' should be non-empty"),
    ("fleet-every-application-as-text", "kip848_fleet_migration", {"all_applications": "yes"},
     "is not of type 'boolean'"),
    # kip848_consumer_rolling_upgrade
    ("rolling-empty-group-id", "kip848_consumer_rolling_upgrade", {"group_id": ""}, "should be non-empty"),
    ("client-unknown", "kip848_consumer_rolling_upgrade", {"client": "go"},
     "'go' is not one of ['java', 'librdkafka']"),
    ("client-version-not-a-release", "kip848_consumer_rolling_upgrade", {"client_version": "latest"},
     "does not match"),
    ("client-properties-as-text", "kip848_consumer_rolling_upgrade",
     {"client_properties": "group.protocol=consumer"}, "is not of type 'object'"),
    ("max-lag-negative", "kip848_consumer_rolling_upgrade", {"max_lag": -1},
     "is less than the minimum of 0"),
    ("rollout-deadline-zero", "kip848_consumer_rolling_upgrade", {"rollout_timeout_minutes": 0},
     "is less than the minimum of 0.1"),
    ("duplicates-fractional", "kip848_consumer_rolling_upgrade", {"allowed_duplicates": 1.5},
     "is not of type 'integer'"),
    # kafka_disable_group_feature: the feature is an enum, never a name chosen by the run
    ("disable-feature-not-offered", "kafka_disable_group_feature", {"feature": "metadata.version"},
     "'metadata.version' is not one of ['streams.version', 'group.version', 'share.version']"),
    ("disable-level-negative", "kafka_disable_group_feature", {"level": -1}, "is less than the minimum of 0"),
    ("disable-dry-run-as-text", "kafka_disable_group_feature", {"dry_run": "no"}, "is not of type 'boolean'"),
    # kip1071_delete_streams_group
    ("delete-group-id-empty", "kip1071_delete_streams_group", {"group_id": ""}, "should be non-empty"),
    ("delete-group-id-blank-around", "kip1071_delete_streams_group", {"group_id": " app "}, "does not match"),
    # kafka_cluster_inventory
    ("conn-id-as-number", "kafka_cluster_inventory", {"kafka_conn_id": 5}, "is not of type 'string'"),
    ("report-file-number", "kafka_cluster_inventory", {"report_file": 5}, "5 is not of type 'null', 'string'"),
    # a run chooses at most a file NAME inside a location the deployment configures, never a path (issue 45.1)
    ("report-file-as-path", "kafka_cluster_inventory", {"report_file": "/home/airflow/.ssh/authorized_keys"},
     "does not match"),
    ("report-file-up", "kafka_cluster_inventory", {"report_file": "../../../dags/x.py"}, "does not match"),
    ("report-file-dots", "kafka_cluster_inventory", {"report_file": ".."}, "does not match"),
    ("report-file-hidden", "kafka_cluster_inventory", {"report_file": ".bashrc"}, "does not match"),
    ("report-file-backslash", "kafka_cluster_inventory", {"report_file": "a\\b.txt"}, "does not match"),
    ("ownership-file-up", "kip848_fleet_migration", {"ownership_file": "../../../../etc/passwd"}, "does not match"),
    ("ownership-file-absolute", "kip848_fleet_migration", {"ownership_file": "/etc/kafka/client.properties"},
     "does not match"),
    ("ownership-file-url", "kip848_fleet_migration", {"ownership_file": "s3://aws_default@bucket/map.yaml"},
     "does not match"),
]


@pytest.mark.parametrize("dag_id, bad, fragment", [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_params_form_refuses_bad_value(dagbag, dag_id, bad, fragment):
    dag = dagbag.dags.get(dag_id)  # the parsed DAG (get_dag() would consult the metadata DB)
    assert dag is not None, f"{dag_id} is not in dags/"
    (key, value), = bad.items()
    params = copy.deepcopy(dag.params)
    assert key in params, f"{dag_id} has no param {key!r} (the case is stale)"
    params.update(VALID.get(dag_id, {}))
    params.validate()  # the control: the form with valid values passes ...
    with pytest.raises(ParamValidationError) as err:  # ... and the one bad value is refused, naming the param
        params[key] = value
        params.validate()
    message = str(err.value)
    assert f"Invalid input for param {key}:" in message
    assert fragment in message


#: The form field of each DAG that names the group (what the operators then refuse if it is unusable).
GROUP_FIELDS = [("kafka_group_config_change", "group_id"), ("kip848_consumer_rolling_upgrade", "group_id"),
                ("kip848_consumer_offline_migration", "group_id"), ("kip1071_streams_offline_migration", "application_id"),
                ("kip1071_streams_rollback_to_classic", "application_id"), ("kip1071_delete_streams_group", "group_id")]


@pytest.mark.parametrize("dag_id, field", GROUP_FIELDS)
def test_generated_group_ids_the_form_accepts_are_ids_the_provider_accepts(dagbag, dag_id, field):
    """Generated ids (blanks, control and invisible characters, look-alikes): the trigger form and the
    operators agree, so an id the form lets through never fails the run for being unusable, and an id
    with blanks around it or an invisible character is refused before the run starts."""
    dag = dagbag.dags[dag_id]
    seen: set[str] = set()
    accepted = refused = 0

    @given(st.one_of(st.text(max_size=8), st.sampled_from(["orders", " orders", "orders ", "ord\u200bers",
                                                           "orders\n", "оrders", "\ufefforders", "a b",
                                                           "ord\u00a0ers", "orders\u3000v2", "\u0301orders",
                                                           "orde\u0301rs", "ord\ufe0fers"])))
    @settings(max_examples=150, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    def case(group_id):
        nonlocal accepted, refused
        seen.add(group_id)
        params = copy.deepcopy(dag.params)
        params.update(VALID.get(dag_id, {}))
        try:
            params[field] = group_id  # assigning validates the value, as the form does
            params.validate()
        except ParamValidationError as err:
            refused += 1
            assert f"Invalid input for param {field}:" in str(err)
            with pytest.raises(InvalidGroupId):
                require_group_id(group_id)
            return
        accepted += 1
        assert require_group_id(group_id) == group_id

    case()
    assert len(seen) >= 100 and accepted >= 10 and refused >= 10, (len(seen), accepted, refused)


#: Fields a user must fill (the form marks them required; every other field is optional).
REQUIRED = {"kafka_group_config_change": {"group_id"}, "kip848_consumer_rolling_upgrade": {"group_id"},
            "kip848_consumer_offline_migration": {"group_id"}, "kip1071_streams_rollback_to_classic": {"application_id"},
            "kip1071_delete_streams_group": {"group_id"}}


def test_every_form_can_be_submitted_with_its_defaults_and_only_the_required_fields(dagbag):
    """Airflow's trigger form treats a non-nullable string whose value is "" as a required field left
    empty (the Trigger button stays disabled): an optional text field must be nullable with a None
    default. The control: every form validates with its defaults plus the required fields."""
    assert set(dagbag.dags) >= {"kafka_group_config_change", "kip848_consumer_rolling_upgrade",
                                "kip848_consumer_offline_migration", "kip1071_streams_rollback_to_classic",
                                "kip1071_streams_offline_migration", "kafka_enable_streams_protocol",
                                "kafka_cluster_inventory"}
    for dag_id, dag in dagbag.dags.items():
        params = copy.deepcopy(dag.params)
        for key in params.keys():
            param = params.get_param(key)
            schema = getattr(param, "schema", {}) or {}
            types = schema.get("type")
            nullable = isinstance(types, list) and "null" in types
            if param.value == "" and not nullable:
                assert key in REQUIRED.get(dag_id, set()), f"{dag_id}.{key}: optional text must be nullable (None)"
        params.update(VALID.get(dag_id, {}))
        params.validate()
        assert set(VALID.get(dag_id, {})) == REQUIRED.get(dag_id, set()), "the required fields are the only ones filled"


def test_every_report_task_links_to_its_report_page(dagbag):
    """The report task of every DAG that writes a run report carries the "Report" extra link (operators/report_link.py):
    the inventory's report is plain text in its log (no run folder), so it has none."""
    from airflow_provider_kip848.operators.report_link import ReportLink

    linked = {dag_id for dag_id, dag in dagbag.dags.items()
              if any(isinstance(link, ReportLink) for link in dag.get_task("report").operator_extra_links)}
    assert linked == set(dagbag.dags) - {"kafka_cluster_inventory"}
    # only the report task: the link names the run's report, not the task it sits on
    fleet = dagbag.dags["kip848_fleet_migration"]
    assert [t.task_id for t in fleet.tasks if t.operator_extra_links] == ["report"]


#: the Params that named a path or URL before issue 45.1 (a run still sending one is refused by the first task)
REMOVED_PATH_PARAMS = ("report_dir", "snapshot_dir", "audit_log", "validation_dir", "report_path")


def test_no_param_names_a_path(dagbag):
    """No DAG declares a Param that names a path or URL: the removed ones are gone from every form, and a Param
    that chooses a file (``*_file``) takes a plain name only (the form's pattern of ``runpaths``)."""
    from airflow_provider_kip848.changecontrol.runpaths import NAME_FORM_PATTERN
    from airflow_provider_kip848.operators.run_conf import REMOVED_PARAMS

    assert set(REMOVED_PATH_PARAMS) == set(REMOVED_PARAMS)
    file_params = []
    for dag_id, dag in dagbag.dags.items():
        assert not set(dag.params.keys()) & set(REMOVED_PATH_PARAMS), dag_id
        for key in dag.params.keys():
            if key.endswith(("_file", "_path", "_dir", "_url", "_log")):
                assert dag.params.get_param(key).schema.get("pattern") == NAME_FORM_PATTERN, (dag_id, key)
                file_params.append((dag_id, key))
    assert sorted(file_params) == [("kafka_cluster_inventory", "report_file"),
                                   ("kip848_fleet_migration", "ownership_file")]


def test_no_dag_fills_a_path_argument_from_a_param(dagbag):
    """Operator arguments that take a path or URL (``path``, ``snapshot_path``, ``output_dir``, ``audit_log`` ...)
    are written in the DAG's code: their templates read no Param, except the connection's name handed to the
    ``kip848_run_location`` macro (the connection's configured location, never one the run names)."""
    import re

    allowed = "kip848_run_location(params.kafka_conn_id,"
    checked = 0
    for dag_id, dag in dagbag.dags.items():
        for task in dag.tasks:
            for field in getattr(task, "template_fields", ()):
                if not re.search(r"path|dir|_log$|url|file|location", field):
                    continue
                raw = getattr(task, field, None)
                text = str(raw) if raw is not None else ""
                checked += 1
                assert "params" not in text.replace(allowed, ""), (dag_id, task.task_id, field, text)
    assert checked >= 20, checked
