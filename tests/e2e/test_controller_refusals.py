"""A run chooses a controller by name, never code: anything else is refused before the change lock, and nothing runs.

The deployment's registry holds a controller whose every command (stop, start, status, config) would plant a
marker file. Runs of the offline consumer migration that name a module path, an unknown controller, or an
argument that controller does not declare are refused: the trigger form refuses the module path (the Param's
pattern) before a run exists; the others fail the ``controller`` task, which runs before ``lock``. The lock is
never taken, the marker never appears (no command of the controller ran), and the group is untouched. A refusal
names what was wrong, never the registry's file or its other entries (issue 45).

The same task refuses an entry whose template quotes its placeholder (``'{region}'``: the run's value would be
read as shell) and a run argument that is not a finite number, in a real DAG run and at the task itself.
"""

from __future__ import annotations

import math
import shlex

import pytest
from airflow.sdk.exceptions import AirflowFailException, ParamValidationError

from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.operators.application import KafkaApplicationControllerOperator
from kip848_harness.clients import ConsumerProcess, create_topics, produce
from tests.conftest import wait_until
from tests.e2e.helpers import approve, run_dag, state
from tests.e2e.test_consumer_offline_migration import DAG, conf


@pytest.fixture
def marked(controllers, unique, tmp_path):
    """A registered controller whose every command plants ``marker`` (and that declares one run parameter)."""
    marker = tmp_path / "marker"
    plant = f"touch {shlex.quote(str(marker))}"
    name = controllers.add(unique("marked"), "command", {
        "commands": {"stop": plant, "start": f"{plant} {{region}}", "status": f"{plant}; echo '[]'",
                     "config": f"{plant}; echo group.protocol=consumer"},
        "params": {"region": {"type": "string", "enum": ["eu", "us"], "default": "eu"}}})
    return name, marker


@pytest.fixture
def quoted(controllers, unique, tmp_path):
    """A registered controller whose stop quotes its placeholder (the issue's ``argv.sh stop '{region}'``) and
    whose every command plants ``marker``; and a numeric run parameter."""
    marker = tmp_path / "quoted-marker"
    plant = f"touch {shlex.quote(str(marker))}"
    name = controllers.add(unique("quoted"), "command", {
        "commands": {"stop": f"{plant}; echo stop '{{region}}'", "start": plant, "status": f"{plant}; echo '[]'"},
        "params": {"region": {"type": "string", "default": "eu"}}})
    numeric = controllers.add(unique("numeric"), "command", {
        "commands": {"stop": f"{plant} --drain={{drain}}", "start": plant, "status": f"{plant}; echo '[]'"},
        "params": {"drain": {"type": "number", "minimum": 0, "maximum": 600, "default": 30}}})
    return name, numeric, marker


def test_a_run_naming_code_an_unknown_controller_or_an_undeclared_argument_is_refused_before_the_lock(
        airflow_db, kafka_conn, native, bootstrap, unique, tmp_path, marked, quoted, controllers, capfd):
    name, marker = marked
    quoted_name, numeric, quoted_marker = quoted
    topic, group = unique("refused-in"), unique("refused")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, [b"1", b"2"])
    member = ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id="app-0",
                                   log_file=str(tmp_path / "app.log"))
    try:
        wait_until(lambda: native.describe_group(group).state == "Stable", timeout=60, what="the application runs")
        # a module path: the trigger form's pattern refuses it, no run is created
        with pytest.raises(ParamValidationError, match="app_controller"):
            run_dag(DAG, conf(tmp_path, group, None, "subprocess:Popen"), decide=approve)

        # an argument the controller does not declare: the run fails at the controller task, before the lock
        run_conf = conf(tmp_path, group, None, name, app_controller_args={"shell": "rm -rf /"})
        capfd.readouterr()
        run, answers, report = run_dag(DAG, run_conf, decide=approve)
        out, err = capfd.readouterr()  # the task log, as dag.test prints it: the refusal's own words
        assert f"arguments of controller {name!r}: undeclared argument(s) shell (declared: region)" in out + err
        assert state(run) == "failed" and answers == [], report
        states = {ti.task_id: ti.state for ti in run.get_task_instances()}
        assert states["controller"] == "failed", states
        assert states["lock"] == "upstream_failed", states  # the change lock was never taken
        assert not any(states[t] == "success" for t in ("stop_application", "start_application")), states
        assert report["outcome"] == "failed" and report["failed_tasks"] == ["controller"], report
        # an entry whose stop quotes its placeholder: the same task refuses it, naming the step, the placeholder
        # and why; the run's hostile value never reaches a shell
        hostile = f"eu; touch {tmp_path / 'X'}"
        capfd.readouterr()
        run, answers, report = run_dag(DAG, conf(tmp_path, group, None, quoted_name,
                                                 app_controller_args={"region": hostile}), decide=approve)
        out, err = capfd.readouterr()
        assert f"controllers.{quoted_name} (kind command): commands.stop: {{region}} sits inside single quotes" \
            in out + err
        assert state(run) == "failed" and answers == [], report
        states = {ti.task_id: ti.state for ti in run.get_task_instances()}
        assert (states["controller"], states["lock"]) == ("failed", "upstream_failed"), states
        assert str(controllers.path) not in out + err
        assert not (tmp_path / "X").exists() and not quoted_marker.exists()

        # a number that is not finite, or past its maximum: refused by the same task
        for value in (math.nan, math.inf, 601):
            with pytest.raises(AirflowFailException, match=f"arguments of controller {numeric!r}: drain must be"):
                KafkaApplicationControllerOperator(task_id="controller", controller=numeric,
                                                   controller_args={"drain": value},
                                                   group_protocol="consumer").execute({})

        # an unknown controller is refused by the same task (the one the DAG runs before its lock), naming
        # neither the registry's file nor the controllers it holds; a DAG run of it would end as the one above
        unknown = unique("nope")
        with pytest.raises(AirflowFailException, match=f"No application controller named {unknown!r}") as err:
            KafkaApplicationControllerOperator(task_id="controller", controller=unknown,
                                               group_protocol="consumer").execute({})
        assert "Controllers of this deployment" not in str(err.value)
        assert str(controllers.path) not in str(err.value)
        assert not any(n in str(err.value) for n in (name, quoted_name, numeric)), str(err.value)
        assert not marker.exists() and not quoted_marker.exists(), "no command of the controllers ran"
        assert native.group_listing(group).type is GroupType.CLASSIC
        assert [m.client_id for m in native.describe_group(group).members] == ["app-0"], "the application is untouched"
    finally:
        member.stop()
