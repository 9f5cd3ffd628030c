"""Issue 45, item 4: numbers are finite and in range wherever a run gives one.

A Param's JSON schema does not refuse ``NaN`` (``NaN < minimum`` and ``NaN > maximum`` are both false) and refuses
``Infinity`` only where it declares a maximum, while Airflow takes any JSON as a run's conf and Python's ``json``
reads ``NaN`` and ``Infinity``. So: every numeric Param of every example DAG declares a maximum (the trigger
form and the REST API refuse ``Infinity`` and ``1e18``: Airflow's own ``ParamsDict.validate()``), and the
first task of every DAG fails a conf holding ``NaN`` (no retry), naming the key, before any connection, lock or
controller is used. The sensors' and operators' numbers: tests/integration/test_numbers_in_range.py.
"""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException, ParamValidationError

from airflow_provider_kip848.changecontrol.approvals import ApprovalPolicy, ChangeControlError
from airflow_provider_kip848.kafka.arguments import MAX_RECORDS, RANGES, parse_number
from airflow_provider_kip848.kafka.errors import InvalidArgument
from tests.conftest import REPO


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}, bag.import_errors
    return bag


def numeric_params(dag, *kinds_wanted: str) -> list[str]:
    """The Params of ``dag`` whose schema type is one of ``kinds_wanted`` (default: number or integer)."""
    out = []
    for name in dag.params:
        kinds = dag.params.get_param(name).schema.get("type")
        kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
        if set(kinds) & set(kinds_wanted or ("number", "integer")):
            out.append(name)
    return out


def test_every_numeric_param_of_every_example_dag_has_a_maximum_and_refuses_infinity(dagbag):
    checked = 0
    for dag in dagbag.dags.values():
        for name in numeric_params(dag):
            schema = dag.params.get_param(name).schema
            assert isinstance(schema.get("maximum"), (int, float)) and math.isfinite(schema["maximum"]), (
                dag.dag_id, name, schema)
            for bad in (math.inf, 1e18 if schema["maximum"] < 1e18 else 1e19):
                param = copy.deepcopy(dag.params.get_param(name))
                # Param.resolve: the validation the trigger form and the REST API run on each value
                with pytest.raises(ParamValidationError, match="is greater than the maximum|is not of type"):
                    param.resolve(value=bad)  # an integer Param refuses Infinity as a type too
            checked += 1
    assert checked >= 40, checked  # the example DAGs' numeric Params (guards against a vacuous pass)


def test_every_example_dag_fails_a_conf_number_that_is_not_finite_at_its_first_task(dagbag):
    """NaN passes every Param schema (and Airflow's trigger): the first task of each DAG refuses it, naming the key."""
    seen = 0
    for dag in dagbag.dags.values():
        numbers = numeric_params(dag, "number")
        key = numbers[0] if numbers else "kafka_conn_id"
        if numbers:  # the schema lets NaN through (minimum and maximum): that is why the first task checks
            assert math.isnan(copy.deepcopy(dag.params.get_param(key)).resolve(value=math.nan))
        roots = [t for t in dag.tasks if not t.upstream_task_ids]
        for task in roots:  # one execution per task (a @task keeps what its first execution was given)
            bad = (math.nan, math.inf, -math.inf)[seen % 3]
            run = SimpleNamespace(conf={key: bad}, run_id="r")
            context = {"dag": dag, "dag_run": run, "params": dag.params.dump(), "ti": SimpleNamespace()}
            with pytest.raises(AirflowFailException) as failed:
                task.execute(context)
            assert f"the run's conf is refused: {key} is {bad!r}: numbers must be finite" in str(failed.value), (
                dag.dag_id, task.task_id, str(failed.value))
            seen += 1
    assert seen >= 10, seen


@pytest.mark.parametrize("value, name, kw, fragment", [
    (float("nan"), "x", {}, "x must be a number >= 0, not nan"),
    ("Infinity", "x", {}, "not 'Infinity'"),
    (1e18, "request_timeout_ms", {"minimum": 100, "maximum": 3_600_000, "integer": True},
     "request_timeout_ms must be a whole number from 100 to 3,600,000, not 1e+18"),
    (0, "poll_interval", {}, "poll_interval must be a number from 0.2 to 3,600, not 0"),
    ("0.1", "poll_interval", {}, "from 0.2 to 3,600, not '0.1'"),
    (1e9, "timeout_minutes", {}, "timeout_minutes must be a number from 0 to 10,080"),
    (2**63, "max_lag", {"integer": True}, "max_lag must be a whole number from 0 to 9,223,372,036,854,775,807"),
    pytest.param(10**5000, "max_lag", {"integer": True}, "not a whole number of 16610 bits", id="an-int-of-5000-digits"),
])
def test_parse_number_refuses_what_is_not_finite_or_out_of_range(value, name, kw, fragment):
    with pytest.raises(InvalidArgument) as refused:
        parse_number(value, name, **kw)
    assert fragment in str(refused.value), str(refused.value)


def test_parse_number_keeps_whole_numbers_exact_and_applies_each_argument_s_range():
    assert parse_number(MAX_RECORDS, "max_lag", integer=True) == MAX_RECORDS
    assert parse_number(str(MAX_RECORDS), "max_lag", integer=True) == MAX_RECORDS
    assert parse_number("0.2", "poll_interval") == 0.2
    assert set(RANGES) >= {"poll_interval", "remove_members_after", "timeout_minutes", "expected_instances",
                           "max_lag", "lag_window_seconds", "coordinator_unavailable_minutes"}


@pytest.mark.parametrize("minutes", [float("nan"), "inf", 1e18, 525_601])
def test_an_approval_age_that_is_not_finite_or_past_a_year_is_a_change_control_error(minutes):
    """Before: ``timedelta(minutes=nan)`` was a bare ValueError and ``inf``/``1e18`` an OverflowError."""
    with pytest.raises(ChangeControlError, match="approval_max_age_minutes must be a number from 0 to 525,600"):
        ApprovalPolicy.from_values(["alice"], True, minutes)
