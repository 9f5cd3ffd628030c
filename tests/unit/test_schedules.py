"""No example DAG runs on a schedule by surprise (issue 32, item 2).

The DAGs have no schedule unless the deployment sets ``[kip848] <dag_id>_schedule``; a value that does not read fails
the DAG file's import (never a fallback); a run nobody triggered by hand is refused when it would name a controller the
deployment did not configure or act on the example's application. The same refusal in a real deployment, on the run
Airflow's scheduler starts: tests/deploy/test_trigger_forms.py."""

from __future__ import annotations

import importlib.util
import uuid

import pytest
from airflow.sdk import CronTriggerTimetable

from airflow_provider_kip848.changecontrol.schedule import (
    UNATTENDED_RUN_TYPES,
    WindowSchedule,
    parse_schedule,
    refuse_unattended_run,
    schedule_option,
)
from airflow_provider_kip848.kafka.errors import InvalidSchedule, UnattendedRunRefused
from airflow_provider_kip848.operators.schedule import deployment_schedule
from tests.conftest import REPO

DAGS = sorted(p.stem for p in (REPO / "dags").glob("*.py"))
STREAMS = "kip1071_streams_offline_migration"


def import_dag_file(name: str):
    """The DAG file imported as the dag-processor does (a module of its own each time)."""
    spec = importlib.util.spec_from_file_location(f"{name}_{uuid.uuid4().hex}", REPO / "dags" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def env_name(dag_id: str) -> str:
    return f"AIRFLOW__KIP848__{schedule_option(dag_id).upper()}"


def test_the_option_reads_five_cron_fields_and_a_zone_else_nothing():
    assert parse_schedule(None, "o") is None and parse_schedule("  ", "o") is None
    assert parse_schedule("0 2 * * SAT Europe/Berlin", "o") == WindowSchedule("0 2 * * SAT", "Europe/Berlin")
    assert parse_schedule(" 30  1 * * sun  UTC ", "o") == WindowSchedule("30 1 * * sun", "UTC")


@pytest.mark.parametrize(("value", "says"), [
    ("0 2 * * SAT", "has 5 field(s): it needs five cron fields"),  # no zone: whose 02:00?
    ("@weekly UTC", "a preset (@weekly) says neither the hour nor the time zone"),
    ("0 2 * * SAT UTC extra", "has 7 field(s)"),
    ("0 2 * * SAT Mars/Olympus", "its last field 'Mars/Olympus' is not a usable time zone"),
    ("0 2 * * SAT Etc/GMT+2", "is not what its name seems to say"),
])
def test_a_schedule_that_does_not_read_is_refused_naming_the_option(value, says):
    with pytest.raises(InvalidSchedule) as err:
        parse_schedule(value, "[kip848] x_schedule")
    assert "[kip848] x_schedule" in str(err.value) and says in str(err.value)
    assert "e.g. '0 2 * * SAT" in str(err.value)  # the remedy shows the form


def test_the_deployment_option_gives_a_cron_timetable_on_its_zone(monkeypatch):
    assert deployment_schedule("some_dag") is None
    monkeypatch.setenv(env_name("some_dag"), "0 2 * * SAT Europe/Berlin")
    timetable = deployment_schedule("some_dag")
    assert isinstance(timetable, CronTriggerTimetable)
    assert (timetable.expression, str(timetable.timezone)) == ("0 2 * * SAT", "Europe/Berlin")
    monkeypatch.setenv(env_name("some_dag"), "61 2 * * SAT UTC")  # five fields, but no minute 61: Airflow's check
    with pytest.raises(InvalidSchedule, match=r"\[kip848\] some_dag_schedule = '61 2 \* \* SAT' UTC: the cron "
                                              r"expression does not read"):
        deployment_schedule("some_dag")


@pytest.mark.parametrize("dag_file", DAGS)
def test_every_example_dag_ships_without_a_schedule(dag_file, monkeypatch):
    for name in DAGS:  # whatever the machine's environment says
        monkeypatch.delenv(env_name(name), raising=False)
    mod = import_dag_file(dag_file)
    dags = [v for v in vars(mod).values() if type(v).__name__ == "DAG"] or [getattr(mod, mod.DAG_ID)()]
    assert len(dags) == 1 and dags[0].dag_id == mod.DAG_ID
    assert dags[0].schedule is None and not dags[0].timetable.can_be_scheduled, dags[0].timetable


def test_a_deployment_schedule_reaches_the_dag_and_a_bad_one_fails_its_import(monkeypatch):
    monkeypatch.setenv(env_name(STREAMS), "30 1 * * SUN Europe/Berlin")
    dag = getattr(import_dag_file(STREAMS), STREAMS)()
    assert dag.timetable.can_be_scheduled
    assert (dag.timetable.expression, str(dag.timetable.timezone)) == ("30 1 * * SUN", "Europe/Berlin")
    monkeypatch.setenv(env_name(STREAMS), "every saturday")
    with pytest.raises(InvalidSchedule, match=rf"\[kip848\] {STREAMS}_schedule = 'every saturday' has 2 field"):
        import_dag_file(STREAMS)


def test_a_dag_whose_group_has_no_default_cannot_take_a_schedule(monkeypatch):
    """A scheduled run uses the Params' defaults: Airflow refuses the schedule of a DAG whose group id is empty by
    default (the import fails), until the deployment's copy of the DAG names its group."""
    monkeypatch.setenv(env_name("kip848_consumer_offline_migration"), "0 2 * * SAT UTC")
    with pytest.raises(ValueError, match="is not allowed to define a Schedule, as there are required params"):
        import_dag_file("kip848_consumer_offline_migration")


def test_a_run_nobody_triggered_is_refused_with_an_unconfigured_controller_or_the_example():
    example = {"application_id": "streams-wordcount"}
    ok = {"app_controller": "orders", "application_id": "orders-streams"}
    for run_type in ("manual", "operator_triggered"):  # a person (or a DAG passing its conf) chose the values
        refuse_unattended_run(run_type, {"app_controller": None, **example}, controllers=[],
                              example_params=example)
    assert {"scheduled", "backfill", "asset_triggered"} <= UNATTENDED_RUN_TYPES
    for run_type in sorted(UNATTENDED_RUN_TYPES):
        refuse_unattended_run(run_type, ok, controllers=["orders"], example_params=example)
        with pytest.raises(UnattendedRunRefused) as err:
            refuse_unattended_run(run_type, {"app_controller": "payments", "application_id": "orders-streams"},
                                  controllers=["orders"], example_params=example)
        assert (f"This {run_type} run was refused before the change lock, nothing done: a run nobody triggered "
                "uses the Params' defaults, and its application controller 'payments' is not one this deployment "
                "configured.") in str(err.value)
        assert "'orders'" not in str(err.value)  # the registry's other names are the deployment's
        assert "Add 'payments' to the deployment's controller registry ([kip848] controllers)" in str(err.value)
        assert "or trigger the DAG by hand with the values you mean" in str(err.value)

    with pytest.raises(UnattendedRunRefused) as err:
        refuse_unattended_run("scheduled", {"app_controller": None, **example}, controllers=["orders"],
                              example_params=example)
    assert "it names no application controller (app_controller's default is empty)" in str(err.value)
    assert "; and its application_id is the example's ('streams-wordcount', the DAG's shipped default)" in str(
        err.value)
    assert ("Give app_controller a default in your copy of the DAG, naming an entry of the registry; give "
            "application_id your application's value in your copy of the DAG; or trigger") in str(err.value)
    # a DAG without a controller Param (controllers=None): only the example values are checked
    refuse_unattended_run("scheduled", {"group_id": "orders"}, controllers=None)
