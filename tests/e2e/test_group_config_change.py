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
        run, answers, report = run_dag("kafka_group_config_change", base,
                                       decide=approve)
        assert state(run) == "failed" and report["failed_tasks"] == ["validate"] and answers == []
        assert admin.describe_group_config(group).dynamic == {}
        # ... unless the DAG is told to configure it before its first start
        base["allow_absent_group"] = True
        run, answers, report = run_dag("kafka_group_config_change", base,
                                       decide=approve)
        assert state(run) == "success" and report["outcome"] == "changed"
        assert admin.describe_group_config(group).dynamic == {"streams.num.standby.replicas": "2"}
        assert "| group_config | `" in answers[0]["body"] and "(broker default) | 2 |" in answers[0]["body"]

        run, answers, report = run_dag("kafka_group_config_change", base,
                                       decide=approve)
        assert state(run) == "success" and report["outcome"] == "nothing_to_do" and answers == []

        run, answers, report = run_dag("kafka_group_config_change",
                                       {**base, "action": "delete"}, decide=reject)
        assert report["outcome"] == "rejected"
        assert admin.describe_group_config(group).dynamic == {"streams.num.standby.replicas": "2"}

        run, answers, report = run_dag("kafka_group_config_change",
                                       {**base, "value": "7"}, decide=approve)
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


def test_a_conf_key_no_param_declares_fails_the_run_before_the_lock(airflow_db, kafka_conn, bootstrap, unique,
                                                                      tmp_path, capfd):
    """Issue 31, class 4: ``dry_rn`` (a typo of the guard flag) would leave ``dry_run`` at its default, the real
    change (Airflow adds an unknown conf key as a Param of its own). The run fails at its first task, ``lock``,
    naming the key and the Param it probably meant; nothing after it runs and the group's configs are unchanged."""
    group = unique("cfg-typo")
    conf = {"group_id": group, "key": "streams.num.standby.replicas", "value": "2", "action": "set",
            "allow_absent_group": True, "dry_rn": True}
    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        capfd.readouterr()
        run, answers, report = run_dag("kafka_group_config_change", conf, decide=approve)
        out, err = capfd.readouterr()
        assert "'dry_rn' (did you mean 'dry_run'?)" in out + err
        assert state(run) == "failed" and report["failed_tasks"] == ["lock"] and answers == []
        states = {ti.task_id: ti.state for ti in run.get_task_instances()}
        assert states["validate"] == "upstream_failed" and states["apply"] != "success", states
        assert admin.describe_group_config(group).dynamic == {}


#: a run's conf that still names locations (issue 45.1): each Param that named a path or URL, removed
LOCATIONS = ("report_dir", "snapshot_dir", "audit_log", "validation_dir")


@pytest.mark.parametrize("dag_id, first_task", [("kafka_group_config_change", "lock"),
                                                ("kip848_fleet_migration", "window_guard")])
def test_a_conf_that_names_a_location_is_refused_and_nothing_is_written_there(
        dag_id, first_task, airflow_db, kafka_conn, bootstrap, unique, tmp_path, run_files, capfd):
    """Issue 45.1: ``report_dir``, ``snapshot_dir``, ``audit_log`` and ``validation_dir`` are no Params any more
    (a run could replace or append to any file the worker can write). A conf that still sends them fails the run at
    its first task, before the lock, saying where each location is configured now; nothing is written at the
    places they name (the files there are byte for byte as before, no new file), and the group is unchanged."""
    group = unique("cfg-where")
    victims = tmp_path / "elsewhere"
    (victims / "dags").mkdir(parents=True)
    planted = {victims / "authorized_keys": b"ssh-ed25519 AAAA legit\n", victims / "dags" / "dag.py": b"x = 1\n",
               victims / "audit.jsonl": b'{"record": "kept"}\n'}
    for path, content in planted.items():
        path.write_bytes(content)
    params = set(load_dag(dag_id).params)
    conf = {"report_dir": str(victims / "dags"), "snapshot_dir": str(victims), "audit_log": str(victims / "audit.jsonl"),
            "validation_dir": str(victims / "authorized_keys")}
    if "group_id" in params:
        conf |= {"group_id": group, "key": "streams.num.standby.replicas", "value": "2", "action": "set",
                 "allow_absent_group": True}
    else:
        conf |= {"prefixes": [f"{group}-"]}
    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        capfd.readouterr()
        run, answers, report = run_dag(dag_id, conf, decide=approve)
        out, err = capfd.readouterr()
        assert state(run) == "failed" and answers == [], report
        states = {ti.task_id: ti.state for ti in run.get_task_instances()}
        assert states[first_task] == "failed", states
        assert not {t for t, s in states.items() if s == "success"} - {"report", "wave_1.open", "wave_2.open"}, states
        for key, where in [("report_dir", "a run's report is written under the connection's extra artifacts_url, "
                                          "else $KIP848_ARTIFACTS_URL"),
                           ("snapshot_dir", "a run's snapshots are written under"),
                           ("audit_log", "audit records go to the connection's extra audit_log, else $KIP848_AUDIT_LOG"),
                           ("validation_dir", "the wave validation writes under the workers' $KIP848_VALIDATION_DIR")]:
            assert f"'{key}': {where}" in out + err, key
        assert {p: p.read_bytes() for p in victims.rglob("*") if p.is_file()} == planted, "a refused run wrote there"
        assert not run_files.audit.exists(), "no change, no audit record"
        if "group_id" in params:
            assert admin.describe_group_config(group).dynamic == {}
