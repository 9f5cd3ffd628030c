"""kafka_group_config_change end to end: Params form validation, approve, rerun, reject, out of bounds."""

from __future__ import annotations

import pytest

from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from tests.e2e.helpers import approve, load_dag, reject, run_dag, state


def test_group_config_change_paths(airflow_db, kafka_conn, bootstrap, unique, tmp_path):
    group = unique("cfg-dag")
    base = {"group_id": group, "key": "streams.num.standby.replicas", "value": "2", "action": "set"}
    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        # a group the cluster does not know is refused before the approval (a mistyped id) ...
        run, answers, report = run_dag("kafka_group_config_change", {**base, "report_dir": str(tmp_path / "0")},
                                       decide=approve)
        assert state(run) == "failed" and report["failed_tasks"] == ["validate"] and answers == []
        assert admin.describe_group_config(group).dynamic == {}
        # ... unless the DAG is told to configure it before its first start
        base["allow_absent_group"] = True
        run, answers, report = run_dag("kafka_group_config_change", {**base, "report_dir": str(tmp_path / "a")},
                                       decide=approve)
        assert state(run) == "success" and report["outcome"] == "changed"
        assert admin.describe_group_config(group).dynamic == {"streams.num.standby.replicas": "2"}
        assert "| group_config | `" in answers[0]["body"] and "(broker default) | 2 |" in answers[0]["body"]

        run, answers, report = run_dag("kafka_group_config_change", {**base, "report_dir": str(tmp_path / "b")},
                                       decide=approve)
        assert state(run) == "success" and report["outcome"] == "nothing_to_do" and answers == []

        run, answers, report = run_dag("kafka_group_config_change",
                                       {**base, "action": "delete", "report_dir": str(tmp_path / "c")}, decide=reject)
        assert report["outcome"] == "rejected"
        assert admin.describe_group_config(group).dynamic == {"streams.num.standby.replicas": "2"}

        run, answers, report = run_dag("kafka_group_config_change",
                                       {**base, "value": "7", "report_dir": str(tmp_path / "d")}, decide=approve)
        assert state(run) == "failed" and report["outcome"] == "failed" and report["failed_tasks"] == ["validate"]
        assert answers == [] and admin.describe_group_config(group).dynamic == {"streams.num.standby.replicas": "2"}


@pytest.mark.parametrize("conf, fragment", [
    ({"key": "no.such.key"}, "is not one of"),
    ({"action": "upsert"}, "is not one of"),
    ({"group_id": ""}, "should be non-empty"),
    ({"dry_run": "yes"}, "is not of type 'boolean'"),
])
def test_params_form_refuses_bad_input(airflow_db, conf, fragment):
    import copy

    from airflow.sdk.exceptions import ParamValidationError

    params = copy.deepcopy(load_dag("kafka_group_config_change").params)
    with pytest.raises(ParamValidationError, match=fragment):  # the same check the trigger form runs
        params.update({"group_id": "g", **conf})
        params.validate()
