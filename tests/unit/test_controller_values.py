"""What a run may give a controller and what a refusal may tell it (issue 45): values that never become shell,
numbers that are finite and bounded, and refusals that name what was wrong and nothing of the deployment.

* ``command`` entries: a template whose placeholder sits where the value's quoting does not hold is refused when
  the entry is resolved (naming the entry, the step, the placeholder and why), before any command runs; a value
  reaches the real ``/bin/sh`` in ``KIP848_ARG_<name>``, never in the command's text; ``env`` names are names;
* numbers: NaN, an infinity or a number past +-2^53 anywhere in an entry, a target number past its maximum
  (timeouts, replicas), a param's bounds or default that is not finite, and a run's NaN / Infinity / huge
  argument are refused (a NaN timeout used to start the stop command and fail its wait with a raw ValueError,
  leaving the command running: a failed wait now kills it);
* refusals: an unknown or malformed name, a registry that does not parse or cannot be read, an unattended run
  with an unconfigured controller and the fleet's check name neither the registry's file nor its other entries;
  an entry's own problems block only that entry.
"""

from __future__ import annotations

import json
import math
import os
import shlex
from pathlib import Path

import pytest

from airflow_provider_kip848.changecontrol.schedule import UnattendedRunRefused, refuse_unattended_run
from airflow_provider_kip848.controllers import (
    Arg,
    ControllerRefused,
    ControllerRegistryInvalid,
    PlatformError,
)
from airflow_provider_kip848.controllers.command import CommandController
from airflow_provider_kip848.controllers.registry import ControllerRegistry, dumps
from airflow_provider_kip848.controllers.runners import LocalRunner, SSHRunner
from airflow_provider_kip848.fleet.applications import READY, Application
from airflow_provider_kip848.fleet.selection import Selection
from airflow_provider_kip848.operators.fleet_tasks import check_controllers
from kip848_harness.processes import find_processes
from tests.conftest import wait_until

SOURCE = "/etc/airflow/kip848-secret-registry.yaml"
OTHERS = ("payments-internal", "hr-payroll")


def q(path: Path) -> str:
    return shlex.quote(str(path))


def registry(**entries) -> ControllerRegistry:
    return ControllerRegistry.from_text(dumps(entries), SOURCE)


def command_entry(commands: dict, **target) -> dict:
    return {"kind": "command", "target": {"commands": commands, **target}}


def with_others(**entries) -> ControllerRegistry:
    """A registry that also holds entries a run's reader must never learn of."""
    return registry(**entries, **{n: command_entry({"stop": "true", "start": "true"}) for n in OTHERS})


def assert_tells_nothing_of_the_deployment(message: str) -> None:
    assert SOURCE not in message and "kip848-secret-registry" not in message, message
    for name in OTHERS:
        assert name not in message, message


# -- templates -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("template, why", [
    ("argv.sh stop '{region}'", "{region} sits inside single quotes"),
    ('argv.sh stop "{region}"', "{region} sits inside double quotes"),
    ("argv.sh stop $(echo {region})", "{region} sits inside $( )"),
    ("cat <<EOF | argv.sh\n{region}\nEOF", "{region} sits in a here-document's body"),
    ('sh -c "argv.sh stop {region}"', "the template runs `sh -c`"),
    ("eval argv.sh stop {region}", "the template runs `eval`"),
])
def test_a_template_whose_value_could_become_shell_is_refused_when_its_entry_is_resolved(template, why, tmp_path):
    marker = tmp_path / "ran"
    reg = with_others(app=command_entry({"stop": f"touch {q(marker)}; {template}", "start": f"touch {q(marker)}",
                                         "status": f"touch {q(marker)}; echo '[]'"},
                                        params={"region": {"type": "string", "default": "eu"}}))
    with pytest.raises(ControllerRegistryInvalid) as err:
        reg.resolve("app", {"region": "eu; touch X"})
    message = str(err.value)
    assert message.startswith("controllers.app (kind command): commands.stop: "), message
    assert why in message and "docs/controllers.md" in message
    assert_tells_nothing_of_the_deployment(message)
    assert not marker.exists(), "nothing of the entry ran"
    assert reg.resolve("payments-internal").name == "payments-internal", "the other entries still resolve"


def test_the_values_travel_in_the_environment_and_the_approval_shows_them_quoted(tmp_path):
    out = tmp_path / "env.txt"
    hostile = "eu; touch X $(touch Y) `touch Z` '\"\n"
    named = registry(app=command_entry({
        "stop": f"printf '%s\\n' --region={{region}} > {q(out)}; env >> {q(out)}",
        "start": "true --protocol {group_protocol}"}, params={"region": {"type": "string"}})).resolve(
            "app", {"region": hostile})
    plan = named.plan("consumer")
    assert plan["actions"]["stop"].startswith(f"printf '%s\\n' --region={shlex.quote(hostile)} > ")
    assert plan["actions"]["start"] == "true --protocol consumer"
    done = named.controller.stop()
    assert done["command"] == plan["actions"]["stop"], "the report shows what the approval showed"
    lines = out.read_text()
    assert lines.startswith(f"--region={hostile}\n")
    assert f"KIP848_ARG_region={hostile}" in lines
    assert not any((tmp_path / n).exists() for n in "XYZ") and not Path("X").exists()


@pytest.mark.parametrize("env, expected", [
    ({"A;touch x": "1"}, "env: 'A;touch x' is not a variable name"),
    ({"KIP848_ARG_region": "x"}, "not starting with KIP848_ARG_"),
    ({"A": "a\x00b"}, "env.A: a value holds no NUL character"),
])
def test_env_holds_variable_names_only(env, expected):
    with pytest.raises(ValueError, match=expected.replace("(", r"\(")):
        CommandController(commands={"stop": "true", "start": "true"}, env=env)


def test_a_param_named_instance_is_refused():
    """``{instance}`` is the instance's name in stop_instance/start_instance: a param of that name would be
    replaced by it there (or replace it)."""
    with pytest.raises(ValueError, match="params.instance: a parameter name is lower_snake_case"):
        CommandController(commands={"stop": "true", "start": "true"}, params={"instance": {"default": "a"}})


# -- numbers -------------------------------------------------------------------------------------------------------

ENTRY_NUMBERS = """
controllers:
  app:
    kind: command
    target:
      commands: {{stop: "touch {marker}", start: "touch {marker}"}}
      {line}
"""


@pytest.mark.parametrize("line, expected", [
    ("timeout_seconds: .nan", "controllers.app.target.timeout_seconds: nan is not a finite number"),
    ("timeout_seconds: .inf", "controllers.app.target.timeout_seconds: inf is not a finite number"),
    ("connect_timeout_seconds: -.inf", "controllers.app.target.connect_timeout_seconds: -inf is not a finite"),
    ("timeout_seconds: 100000000000000000000", "timeout_seconds: 100000000000000000000 is beyond +-2^53"),
    ("timeout_seconds: 86401", "timeout_seconds must be at most 86400, not 86401"),
    ("connect_timeout_seconds: 601", "connect_timeout_seconds must be at most 600, not 601"),
    ("params: {n: {type: number, default: .nan}}", "controllers.app.target.params.n.default: nan is not a finite"),
    ("params: {n: {type: number, minimum: .nan, default: 1}}", "params.n.minimum: nan is not a finite number"),
    ("env: {A: [.inf]}", "controllers.app.target.env.A[0]: inf is not a finite number"),
])
def test_a_number_of_an_entry_that_is_not_finite_or_out_of_range_is_refused_naming_entry_and_field(
        line, expected, tmp_path):
    marker = tmp_path / "ran"
    text = ENTRY_NUMBERS.format(marker=marker, line=line) + "".join(
        f"  {n}: {{kind: command, target: {{commands: {{stop: 'true', start: 'true'}}}}}}\n" for n in OTHERS)
    reg = ControllerRegistry.from_text(text, SOURCE)
    with pytest.raises(ControllerRegistryInvalid) as err:
        reg.resolve("app")
    assert expected in str(err.value), str(err.value)
    assert_tells_nothing_of_the_deployment(str(err.value))
    assert not marker.exists()
    reg.resolve(OTHERS[0]).close()  # one entry's numbers block only that entry


@pytest.mark.parametrize("target, expected", [
    ({"workload": "deployment/orders", "protocol_env": "P", "replicas": 10_001},
     "replicas must be at most 10000, not 10001"),
    ({"workload": "deployment/orders", "protocol_env": "P", "stop_timeout_seconds": math.inf},
     "stop_timeout_seconds: inf is not a finite number"),
    ({"workload": "deployment/orders", "protocol_env": "P", "rollout_timeout_seconds": 86_401},
     "rollout_timeout_seconds must be at most 86400"),
])
def test_the_kubernetes_kind_s_numbers_are_bounded_too(target, expected):
    reg = registry(k8s={"kind": "kubernetes", "target": target})
    with pytest.raises(ControllerRegistryInvalid, match=expected.replace("(", r"\(")):
        reg.resolve("k8s")


@pytest.mark.parametrize("value, expected", [
    (math.nan, "n must be a finite number, not nan"), (math.inf, "n must be a finite number, not inf"),
    (-math.inf, "n must be a finite number, not -inf"), (2**60, "n must be between -2^53 and 2^53"),
    (1e300, "n must be between -2^53 and 2^53"), (11, "n must be at most 10, not 11"),
])
def test_a_run_s_number_that_is_not_finite_or_out_of_range_is_refused_before_anything_runs(value, expected, tmp_path):
    marker = tmp_path / "ran"
    reg = with_others(app=command_entry({"stop": f"touch {q(marker)} {{n}}", "start": "true"},
                                        params={"n": {"type": "number", "maximum": 10, "default": 1}}))
    with pytest.raises(ControllerRefused) as err:
        reg.resolve("app", {"n": value})
    assert f"arguments of controller 'app': {expected}" in str(err.value)
    assert_tells_nothing_of_the_deployment(str(err.value))
    assert not marker.exists()
    json_value = json.loads(json.dumps({"n": value}))["n"]  # a run's conf arrives as JSON: NaN and Infinity too
    with pytest.raises(ControllerRefused):
        reg.resolve("app", {"n": json_value})


@pytest.mark.parametrize("value, expected", [
    ("a\x00b", "s holds a NUL character"), ("x" * 4097, "s must be at most 4096 characters long, not 4097"),
])
def test_a_run_s_string_holds_no_nul_and_stays_within_its_length(value, expected):
    reg = registry(app=command_entry({"stop": "true {s}", "start": "true"}, params={"s": {"type": "string"}}))
    with pytest.raises(ControllerRefused, match=expected):
        reg.resolve("app", {"s": value})
    assert reg.resolve("app", {"s": "x" * 4096}).args == {"s": "x" * 4096}


@pytest.mark.parametrize("kwargs, expected", [
    ({"type": "number", "minimum": math.nan}, "minimum must be a finite number, not nan"),
    ({"type": "number", "maximum": math.inf}, "maximum must be a finite number, not inf"),
    ({"type": "number", "minimum": "1"}, "minimum must be a number, not '1'"),
    ({"type": "number", "minimum": 5, "maximum": 1}, "minimum 5 is above maximum 1"),
    ({"type": "string", "max_length": 0}, "max_length must be a positive integer, not 0"),
    ({"type": "number", "enum": [1, math.nan]}, "an enum value must be a finite number, not nan"),
])
def test_an_argument_s_own_bounds_are_finite_numbers(kwargs, expected):
    with pytest.raises(ValueError, match=expected):
        Arg.from_dict(kwargs)


def test_an_argument_with_bounds_round_trips():
    arg = Arg.from_dict({"type": "integer", "minimum": 1, "maximum": 9, "default": 2})
    assert arg.to_dict() == {"type": "integer", "run": True, "minimum": 1, "maximum": 9, "default": 2}
    assert Arg.from_dict({k: v for k, v in arg.to_dict().items() if k != "run"}) == arg
    assert arg.problem("n", 9) is None and arg.problem("n", 10) == "n must be at most 9, not 10"


def test_a_wait_that_fails_kills_the_command_it_was_waiting_for(unique):
    """The issue's NaN timeout: the stop command started, the wait raised a raw ValueError, and the command
    kept running. Whatever ends the wait now ends the command's process group too (found by a marker in its
    command line: on the code before, the shell and its sleep were still there)."""
    marker = unique("kip848-wait").encode()

    def running() -> list[int]:
        return [pid for pid, argv in find_processes(lambda argv: any(marker in a for a in argv))
                if " Z " not in Path(f"/proc/{pid}/stat").read_text(errors="replace")]

    with pytest.raises(ValueError):
        LocalRunner().run(f"sleep 60; true {marker.decode()}", timeout=math.nan, env={})
    wait_until(lambda: not running(), timeout=10, interval=0.05, what="the command to be gone")


# -- host keys -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("host_key, expected", [
    ("AAAAC3NzaC1lZDI1NTE5AAAAIOZ0", "holds no key type: it needs the type before the key"),
    ("[app01]:22 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOZ0", "has the type '[app01]:22', not one of ssh-ed25519"),
    ("ssh-ed25519 not*base64", "has a key that is not base64 after its type"),
])
def test_a_host_key_without_its_type_is_a_clear_error_not_an_unreachable_host(host_key, expected, monkeypatch):
    conn = {"conn_type": "ssh", "host": "127.0.0.1", "port": 1, "login": "nobody",
            "extra": {"host_key": host_key, "no_host_key_check": False}}
    monkeypatch.setenv("AIRFLOW_CONN_APP01_KEYS", json.dumps(conn))
    runner = SSHRunner("app01_keys", connect_timeout=1)
    with pytest.raises(PlatformError) as err:
        runner.run("true", timeout=5, env={})
    assert err.value.retriable is False
    assert f"the host_key of SSH connection 'app01_keys' {expected}" in str(err.value)
    assert "ssh-keyscan" in str(err.value)


# -- refusals that name nothing of the deployment -------------------------------------------------------------------


@pytest.mark.parametrize("name, expected", [
    ("payments", "No application controller named 'payments' in this deployment's registry."),
    ("payments-internai", "(a configured name is spelled alike: check this one's spelling)"),
    ("payments-intern\u0430l", "U+0430"),
    ("mod:Class", "'mod:Class' is not a controller name"),
    (None, "No application controller named (got None)."),
])
def test_a_refused_name_tells_what_was_wrong_and_nothing_of_the_registry(name, expected):
    reg = with_others()
    with pytest.raises(ControllerRefused) as err:
        reg.resolve(name)
    assert expected in str(err.value)
    assert "its administrators have the names" in str(err.value)
    assert_tells_nothing_of_the_deployment(str(err.value))


def test_an_entry_s_problems_block_that_entry_only_and_a_file_s_problems_name_no_entry():
    text = """
controllers:
  payments-internal: {kind: command, target: [1, 2], owner: team-a}
  orders: {kind: command, target: {commands: {stop: stop-orders, start: start-orders}}}
"""
    reg = ControllerRegistry.from_text(text, SOURCE)
    assert reg.resolve("orders").name == "orders"
    with pytest.raises(ControllerRegistryInvalid) as err:
        reg.resolve("payments-internal")
    assert "controllers.payments-internal: unknown key(s) owner" in str(err.value)
    assert "controllers.payments-internal.target: must be a mapping" in str(err.value)
    for bad in ("version: 2\ncontrollers:\n  hr-payroll: {kind: command}\n",
                "controllers:\n  hr/payroll: {kind: command}\n  orders: {kind: command}\n",
                "controllers:\n  hr-payroll: {kind: command\n  orders: 1\n",
                "controllers:\n  hr-payroll: {kind: command}\n  hr-payroll: {kind: command}\n",
                '{"controllers": {"hr-payroll": {}, "hr-payroll": {}}}'):
        with pytest.raises(ControllerRegistryInvalid) as err:
            ControllerRegistry.from_text(bad, SOURCE)
        assert "the controller registry ([kip848] controllers) is not valid" in str(err.value)
        assert "hr-payroll" not in str(err.value) and "hr/payroll" not in str(err.value), str(err.value)
        assert SOURCE not in str(err.value)


def test_a_registry_that_cannot_be_read_is_not_named_by_its_path(tmp_path):
    missing = tmp_path / "kip848-secret-registry.yaml"
    with pytest.raises(ControllerRegistryInvalid) as err:
        ControllerRegistry.load(str(missing))
    assert "cannot read the controller registry ([kip848] controllers): No such file or directory" in str(err.value)
    assert str(tmp_path) not in str(err.value)


def test_an_unattended_run_with_an_unconfigured_controller_names_neither_file_nor_entries():
    with pytest.raises(UnattendedRunRefused) as err:
        refuse_unattended_run("scheduled", {"app_controller": "payments"}, controllers=["orders", *OTHERS])
    assert "its application controller 'payments' is not one this deployment configured" in str(err.value)
    assert "Add 'payments' to the deployment's controller registry ([kip848] controllers)" in str(err.value)
    assert_tells_nothing_of_the_deployment(str(err.value))
    assert "orders" not in str(err.value)


def test_the_fleet_s_controller_check_names_what_is_wrong_and_nothing_else(tmp_path, monkeypatch):
    path = tmp_path / "kip848-secret-registry.yaml"
    path.write_text(dumps({n: command_entry({"stop": "true", "start": "true"}) for n in ("orders", *OTHERS)}))
    monkeypatch.setenv("AIRFLOW__KIP848__CONTROLLERS", str(path))
    apps = tuple(Application(app=a, team="t", rule_index=i, groups=(), status=READY, path="offline", reason="",
                             app_controller=c, app_controller_args=args)
                 for i, (a, c, args) in enumerate([("orders-app", "orders", {}), ("billing", "nope", {}),
                                                   ("shipping", "orders", {"zone": "eu"})]))
    with pytest.raises(ControllerRefused) as err:
        check_controllers(Selection(migration="consumer", applications=apps))
    message = str(err.value)
    assert "the ownership map names controllers this deployment cannot use: billing: No application controller " \
           "named 'nope'" in message
    assert "shipping: arguments of controller 'orders': undeclared argument(s) zone (declared: none)" in message
    assert str(path) not in message and not any(n in message for n in OTHERS), message
    assert os.environ["AIRFLOW__KIP848__CONTROLLERS"] == str(path)
