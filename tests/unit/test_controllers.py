"""Application controllers: the registry a run chooses a controller from, and the platform's commands it runs.

A run (a DAG's Params, the fleet's ownership map) names a controller; it never names code. What is proven here:

* the registry is read strictly (every problem of the file at once; an entry's problems with that entry, naming
  it and the key) and resolving refuses a module path, an unknown name and any run argument the controller does
  not declare, before anything is imported from the run's words or executed (test_controller_values.py: what
  such a refusal may tell);
* the schema check behind both (a bool is not a number, enums, full-match patterns, minimums, undeclared keys);
* ``CommandController`` refuses a bad registry entry when it is built (unknown steps and fields, ``{group_protocol}``
  where it means nothing, bad parameter names), shell-quotes every value it puts into a command, and reads what
  the platform's own status/config commands print (supervisorctl, ``systemctl show``, JSON, properties) strictly:
  output it cannot read is an error, never "no instances";
* secrets never leave a controller (command output, client properties);
* the verdicts over the platform's instances (not running, not ready, restarted, replaced, gone, too few) and the
  matching of a group member to its instance;
* real runs with ``/bin/sh`` on this machine through the registry: stop confirmed by the status command, start left
  alone when the expected instances already run, non-zero exits, a hanging command killed at its timeout, empty
  status output, a stop the platform does not confirm, the clean environment and redacted errors.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from airflow_provider_kip848.controllers import (
    Arg,
    ClientConfig,
    ControllerError,
    ControllerRefused,
    ControllerRegistryInvalid,
    Instance,
    NamedController,
    PlatformError,
    instance_problems,
    lost_instances,
    member_instance,
)
from airflow_provider_kip848.controllers.command import CommandController, redact_output
from airflow_provider_kip848.controllers.formats import FormatError, parse_config, parse_status
from airflow_provider_kip848.controllers.protocol import ApplicationStatus
from airflow_provider_kip848.controllers.registry import ControllerEntry, ControllerRegistry, dumps
from airflow_provider_kip848.controllers.schema import check_arguments

SOURCE = "/etc/airflow/controllers.yaml"

REGISTRY_YAML = """
version: 1
controllers:
  orders:
    kind: command
    description: orders consumers under supervisord on app-01
    target:
      commands:
        stop: supervisorctl stop 'orders:*'
        start: supervisorctl start 'orders:*'
        status: supervisorctl status 'orders:*'
      status_format: supervisorctl
  stock:
    kind: command
    target:
      commands: {stop: systemctl stop 'stock@*', start: systemctl start 'stock@*'}
      params:
        mode: {type: string, enum: [graceful, immediate], default: graceful}
        region: {type: string, pattern: "[a-z]+-[0-9]"}
"""


def registry(**entries) -> ControllerRegistry:
    return ControllerRegistry.from_text(dumps(entries), SOURCE)


def command_entry(commands: dict, **target) -> dict:
    return {"kind": "command", "description": "test application", "target": {"commands": commands, **target}}


# -- the registry -------------------------------------------------------------------------------------------------


def test_a_registry_is_read_with_its_names_kinds_and_targets():
    reg = ControllerRegistry.from_text(REGISTRY_YAML, SOURCE)
    assert reg.names() == ["orders", "stock"]
    assert reg.source == SOURCE
    orders = reg.entry("orders")
    assert (orders.kind, orders.description) == ("command", "orders consumers under supervisord on app-01")
    assert orders.target["status_format"] == "supervisorctl"
    named = reg.resolve("orders")
    assert isinstance(named, NamedController) and isinstance(named.controller, CommandController)
    assert (named.name, named.kind, named.label) == ("orders", "command", "orders (command)")
    assert named.plan()["actions"]["status"] == "supervisorctl status 'orders:*'"


def test_json_text_and_an_empty_registry_are_read_too():
    assert registry(a=command_entry({"stop": "x", "start": "y"})).names() == ["a"]
    for text in ("", "   \n", "# nothing yet\n"):
        empty = ControllerRegistry.from_text(text, SOURCE)
        assert empty.names() == []
        with pytest.raises(ControllerRefused, match=r"No application controller named 'orders' in this "):
            empty.resolve("orders")


def test_every_problem_of_a_registry_is_reported_at_once_naming_entry_and_key():
    """The file's own problems refuse it, all at once (naming no entry: counted); each entry's problems are kept
    with that entry and refused when it is resolved, naming it and the key."""
    text = """
version: 2
extra: 1
controllers:
  "mod:Class": {kind: command, target: {}}
  plain: [not, a, mapping]
"""
    with pytest.raises(ControllerRegistryInvalid) as err:
        ControllerRegistry.from_text(text, SOURCE)
    message = str(err.value)
    assert "the controller registry ([kip848] controllers) is not valid" in message
    for part in ("unknown top-level key(s) extra (allowed: version, controllers)", "version 2 is not 1",
                 "1 entry name(s) do not match [A-Za-z0-9]"):
        assert part in message
    assert "mod:Class" not in message and "plain" not in message
    entries = """
controllers:
  plain: [not, a, mapping]
  nokind: {target: {}}
  badtarget: {kind: command, target: [1, 2]}
  unknownkey: {kind: command, target: {}, owner: team-a}
"""
    reg = ControllerRegistry.from_text(entries, SOURCE)
    for name, part in (("plain", "controllers.plain: must be a mapping with kind and target"),
                       ("nokind", "controllers.nokind.kind: required"),
                       ("badtarget", "controllers.badtarget.target: must be a mapping"),
                       ("unknownkey", "controllers.unknownkey: unknown key(s) owner (allowed: kind, description, "
                                      "target)")):
        with pytest.raises(ControllerRegistryInvalid) as err:
            reg.resolve(name)
        assert part in str(err.value)


@pytest.mark.parametrize("text, expected", [
    ("controllers: [a, b]", "controllers must be a mapping of name -> entry"),
    ("- just\n- a list\n", "must be a mapping with 'controllers'"),
    ("controllers: {a: [unclosed", "is not valid YAML/JSON"),
])
def test_a_registry_that_is_not_a_mapping_of_entries_is_refused(text, expected):
    with pytest.raises(ControllerRegistryInvalid, match=expected):
        ControllerRegistry.from_text(text, SOURCE)


def test_a_name_given_twice_in_the_registry_is_refused_not_silently_overwritten():
    """A second ``orders`` entry must not silently replace the first (PyYAML keeps the last of two equal keys):
    the run would then act on an application with another team's commands."""
    text = """
controllers:
  orders: {kind: command, target: {commands: {stop: stop-orders, start: start-orders}}}
  orders: {kind: command, target: {commands: {stop: stop-payments, start: start-payments}}}
"""
    with pytest.raises(ControllerRegistryInvalid, match=r"a key is repeated \(line 4, column 3\)"):
        ControllerRegistry.from_text(text, SOURCE)


# -- resolving: a run names a controller, never code --------------------------------------------------------------


@pytest.mark.parametrize("name", ["subprocess:Popen", "kip848_never_imported.module:Boom",
                                  "airflow_provider_kip848/controllers", "os.system:"])
def test_a_module_path_is_refused_and_nothing_is_imported(name):
    reg = ControllerRegistry.from_text(REGISTRY_YAML, SOURCE)
    with pytest.raises(ControllerRefused) as err:
        reg.resolve(name, {"cmd": "rm -rf /"})
    message = str(err.value)
    assert f"{name!r} is not a controller name" in message
    assert "never a module or a class" in message and "a run never names code" in message
    assert SOURCE not in message and "orders" not in message and "stock" not in message
    assert "kip848_never_imported" not in sys.modules


@pytest.mark.parametrize("name, expected", [
    ("payments", "No application controller named 'payments' in this deployment's registry."),
    ("", "No application controller named (got '')."),
    (None, "No application controller named (got None)."),
    (42, "No application controller named (got 42)."),
])
def test_an_unknown_name_is_refused_naming_neither_the_registry_nor_its_names(name, expected):
    reg = ControllerRegistry.from_text(REGISTRY_YAML, SOURCE)
    with pytest.raises(ControllerRefused) as err:
        reg.resolve(name)
    assert expected in str(err.value)
    assert SOURCE not in str(err.value) and "orders" not in str(err.value) and "stock" not in str(err.value)


def test_run_arguments_are_checked_against_what_the_entry_declares():
    reg = ControllerRegistry.from_text(REGISTRY_YAML, SOURCE)
    named = reg.resolve("stock", {"mode": "immediate", "region": "eu-1"})
    assert named.args == {"mode": "immediate", "region": "eu-1"}
    assert named.controller.values == {"mode": "immediate", "region": "eu-1"}
    with pytest.raises(ControllerRefused) as err:
        reg.resolve("stock", {"mode": "nuke", "region": "eu-1x", "cmd": "id"})
    message = str(err.value)
    assert "undeclared argument(s) cmd (declared: mode, region)" in message
    assert "mode must be one of 'graceful', 'immediate', not 'nuke'" in message
    assert "region 'eu-1x' does not match [a-z]+-[0-9]" in message
    # an entry without params takes no run argument at all
    with pytest.raises(ControllerRefused, match=r"undeclared argument\(s\) mode \(declared: none\)"):
        reg.resolve("orders", {"mode": "graceful"})
    with pytest.raises(ControllerRefused, match="must be a mapping, not list"):
        reg.resolve("orders", ["mode=graceful"])


def test_a_param_neither_given_nor_defaulted_is_the_run_s_to_give():
    """A template needs a value: a param without a default is required of the run, and a run without it is
    refused (the run's fault, not the registry's), naming what the controller declares."""
    reg = ControllerRegistry.from_text(REGISTRY_YAML, SOURCE)
    with pytest.raises(ControllerRefused, match=r"Controller 'stock' needs the run argument\(s\) region \(declared: "
                                                r"mode: string, region: string\)"):
        reg.resolve("stock", {"mode": "graceful"})
    reg = registry(app=command_entry({"stop": "s {zone}", "start": "t"},
                                     params={"zone": {"type": "string", "required": True}}))
    with pytest.raises(ControllerRefused, match=r"needs the run argument\(s\) zone"):
        reg.resolve("app")


@pytest.mark.parametrize("target, expected", [
    ({}, "required argument(s) commands are given neither by the target nor by the run"),
    ({"commands": {"stop": "a", "start": "b"}, "timeout_seconds": True},
     "controllers.app.target: timeout_seconds must be of type number, not a boolean"),
    ({"commands": {"stop": "a", "start": "b"}, "timeout_seconds": 0.5},
     "controllers.app.target: timeout_seconds must be at least 1, not 0.5"),
    ({"commands": {"stop": "a", "start": "b"}, "status_format": "xml"},
     "status_format must be one of 'json', 'supervisorctl', 'systemd', not 'xml'"),
    ({"commands": {"stop": "a", "start": "b"}, "client_version": "v3.7"}, r"client_version 'v3.7' does not match"),
    ({"commands": {"stop": "a", "start": "b"}, "hosts": ["a"]}, "undeclared argument(s) hosts (declared: client, "),
    ({"commands": {"stop": "a", "start": "b", "restart": "c"}},
     "controllers.app (kind command): commands: unknown step(s) restart"),
])
def test_a_bad_target_is_a_registry_problem(target, expected):
    reg = registry(app={"kind": "command", "target": target})
    with pytest.raises(ControllerRegistryInvalid) as err:
        reg.resolve("app")
    assert expected in str(err.value)


def test_a_kind_that_is_not_installed_is_a_registry_problem_listing_the_installed_kinds():
    reg = registry(app={"kind": "nomad", "target": {}})
    with pytest.raises(ControllerRegistryInvalid) as err:
        reg.resolve("app")
    assert "controllers.app: kind 'nomad' is not installed" in str(err.value)
    assert "airflow_provider_kip848.controllers: command, kubernetes, " in str(err.value)


def test_a_kind_whose_extra_is_missing_says_which_extra_to_install():
    """A kind registered by entry point whose module cannot be imported on this worker (the kubernetes kind without
    the cncf-kubernetes provider): a registry problem naming the extra, never an ImportError from deep inside."""
    point = EntryPoint(name="kubernetes", value="airflow_provider_kip848_no_such_module:KubernetesController",
                       group="airflow_provider_kip848.controllers")
    reg = ControllerRegistry({"app": ControllerEntry(name="app", kind="kubernetes")}, SOURCE, kinds={"kubernetes": point})
    with pytest.raises(ControllerRegistryInvalid) as err:
        reg.resolve("app")
    assert "kind 'kubernetes'" in str(err.value) and "cannot be loaded" in str(err.value)
    assert "install its extra, e.g. airflow-provider-kip848[kubernetes], on every worker" in str(err.value)


@pytest.mark.parametrize("param, spec, value", [
    ("env", {"type": "string", "enum": ["prod", "staging"], "default": "staging"}, "prod"),
    ("ssh_conn_id", {"type": "string", "default": "app01"}, "another_host"),
    ("timeout_seconds", {"type": "string", "default": "x"}, "prod"),
    ("commands", {"type": "object", "default": {}}, {"stop": "id", "start": "id"}),
], ids=["env", "ssh_conn_id", "timeout_seconds", "commands"])
def test_a_param_named_like_a_target_argument_is_refused(param, spec, value):
    """A run argument is passed to ``cls(**target, **run_args)``: a param named like one of the controller's own
    arguments would let a run replace the registry's target (choose the SSH connection, give the commands
    themselves). The registry refuses such a param, naming it."""
    reg = registry(app=command_entry({"stop": f"echo {{{param}}}", "start": "true"}, params={param: spec}))
    with pytest.raises(ControllerRegistryInvalid, match=f"params.{param}"):
        reg.resolve("app", {param: value})


# -- the schema ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arg, value, problem", [
    (Arg("number"), True, "n must be of type number, not a boolean"),
    (Arg("integer"), False, "n must be of type integer, not a boolean"),
    (Arg("integer"), 1.5, "n must be of type integer, not float (1.5)"),
    (Arg("number"), "3", "n must be of type number, not str ('3')"),
    (Arg("string"), 3, "n must be of type string, not int (3)"),
    (Arg("object"), ["a"], "n must be of type object, not list (['a'])"),
    (Arg("string", enum=("a", "b")), "c", "n must be one of 'a', 'b', not 'c'"),
    (Arg("string", pattern=r"\d+\.\d+"), "3.7.1", r"n '3.7.1' does not match \d+\.\d+"),
    (Arg("string", pattern=r"\d+\.\d+"), "v3.7", r"n 'v3.7' does not match \d+\.\d+"),
    (Arg("number", minimum=1), 0.5, "n must be at least 1, not 0.5"),
    (Arg("integer", minimum=0), -1, "n must be at least 0, not -1"),
    (Arg("string", required=True), None, "n is null"),
])
def test_an_argument_states_why_a_value_is_refused(arg, value, problem):
    assert arg.problem("n", value) == problem


@pytest.mark.parametrize("arg, value", [
    (Arg("boolean"), True), (Arg("number"), 2), (Arg("number"), 2.5), (Arg("number", minimum=1), 1),
    (Arg("string", pattern=r"\d+\.\d+"), "3.7"), (Arg("array"), ("a",)), (Arg("string"), None),
    (Arg("string", enum=("a", "b")), "b"),
])
def test_an_argument_accepts_valid_values(arg, value):
    assert arg.problem("n", value) is None


def test_an_argument_type_must_be_a_json_type():
    with pytest.raises(ValueError, match="Arg type 'float' is not one of string, integer, number"):
        Arg("float")


def test_check_arguments_lists_every_problem_and_the_declared_arguments():
    schema = {"mode": Arg("string", enum=("a", "b"), run=True), "count": Arg("integer", minimum=1),
              "secret": Arg("string")}
    problems = check_arguments(schema, {"mode": "c", "count": True, "zone": "x", "cmd": "id"}, what="args")
    assert problems == ["args: undeclared argument(s) cmd, zone (declared: count, mode, secret)",
                        "args: count must be of type integer, not a boolean",
                        "args: mode must be one of 'a', 'b', not 'c'"]
    assert check_arguments(schema, {"mode": "a", "count": 3}, what="args") == []
    # a run may give only the run arguments
    run_only = {n: a for n, a in schema.items() if a.run}
    assert check_arguments(schema, {"secret": "s"}, what="run", allowed=run_only) == [
        "run: undeclared argument(s) secret (declared: mode)"]


def test_a_declared_param_is_read_strictly_and_round_trips():
    arg = Arg.from_dict({"type": "integer", "minimum": 1, "default": 2, "description": "d", "required": True})
    assert arg.run and arg.to_dict() == {"type": "integer", "required": True, "run": True, "minimum": 1,
                                         "default": 2, "description": "d"}
    with pytest.raises(ValueError, match=r"unknown key\(s\) shell \(allowed: default, description, enum"):
        Arg.from_dict({"type": "string", "shell": True})


# -- CommandController: construction and rendering ----------------------------------------------------------------


@pytest.mark.parametrize("kwargs, expected", [
    ({"commands": {"stop": "a", "start": "b", "restart": "c"}},
     "commands: unknown step(s) restart (steps: stop, start, roll, status, config, stop_instance, start_instance, logs, logs_from_start)"),
    ({"commands": {"stop": "a"}}, "commands: start required"),
    ({"commands": {"start": "b", "status": "c"}}, "commands: stop required"),
    ({"commands": {"stop": "a", "start": "b", "status": ["supervisorctl", "status"]}},
     "commands: every command is a string"),
    ({"commands": {"stop": "kill {group_protocol}", "start": "b"}},
     "commands.stop: {group_protocol} is not a parameter it can take (none;"),
    ({"commands": {"stop": "a", "start": "b", "status": "ls {group_protocol}"}},
     "commands.status: {group_protocol} is not a parameter it can take"),
    ({"commands": {"stop": "a", "start": "run --region {region}"}},
     "commands.start: {region} is not a parameter it can take (group_protocol;"),
    ({"commands": {"stop": "a {region.__class__}", "start": "b"}, "params": {"region": {"default": "x"}}},
     "commands.stop: {region.__class__} is not a parameter"),
    ({"commands": {"stop": "a", "start": "b"}, "params": {"Region": {"type": "string"}}},
     "params.Region: a parameter name is lower_snake_case (and not group_protocol, instance or max_bytes)"),
    ({"commands": {"stop": "a", "start": "b"}, "params": {"group_protocol": {"type": "string"}}},
     "params.group_protocol: a parameter name is lower_snake_case"),
    ({"commands": {"stop": "a", "start": "b"}, "params": {"region": "eu-1"}}, "params.region: must be a mapping"),
    ({"commands": {"stop": "a", "start": "b"}, "params": {"region": {"type": "float"}}},
     "params.region: Arg type 'float' is not one of"),
    ({"commands": {"stop": "a", "start": "b"}, "env": {"DEBUG": 1}}, "env: every value is a string"),
    ({"commands": {"stop": "a {zone}", "start": "b"}, "params": {"zone": {"type": "string"}}},
     "params zone: neither given by the run nor defaulted"),
])
def test_a_bad_command_entry_is_refused_when_built(kwargs, expected):
    with pytest.raises(ValueError) as err:
        CommandController(**kwargs)
    assert expected in str(err.value)


def test_group_protocol_is_taken_by_start_roll_and_config_and_literal_braces_are_kept():
    controller = CommandController(commands={
        "stop": "awk '{{print $1}}' pids | xargs kill", "start": "run --protocol {group_protocol}",
        "roll": "roll {group_protocol}", "config": "cat app.properties; echo group.protocol={group_protocol}"})
    assert controller.actions("consumer") == {
        "stop": "awk '{print $1}' pids | xargs kill", "start": "run --protocol consumer",
        "roll": "roll consumer", "config": "cat app.properties; echo group.protocol=consumer"}
    # without a protocol, the approval shows the templates of the steps that take one
    assert controller.actions(None)["start"] == "run --protocol {group_protocol}"
    assert controller.can_roll()


@pytest.mark.parametrize("template", ["echo {region!r}", "echo {region!a}", "echo {region:.3}"])
def test_a_conversion_or_format_spec_that_would_undo_the_quoting_is_refused(template):
    """``{region!r}`` or ``{region:.3}`` would change the value (its Python repr, a cut): both are refused when
    the controller is built (with values in the environment they would change what the placeholder names)."""
    with pytest.raises(ValueError, match="region"):
        CommandController(commands={"stop": template, "start": "true"}, params={"region": {"type": "string"}},
                          region="x'; touch pwned #")


def test_a_param_value_is_shown_shell_quoted_in_the_approval():
    hostile = "'; rm -rf /"
    controller = CommandController(commands={"stop": "stop-app --region {region} --mode {mode}",
                                             "start": "start-app {region} {group_protocol}"},
                                   params={"region": {"type": "string"}, "mode": {"default": "graceful"}},
                                   region=hostile)
    actions = controller.actions("consumer")
    assert shlex.split(actions["stop"]) == ["stop-app", "--region", hostile, "--mode", "graceful"]
    assert shlex.split(actions["start"]) == ["start-app", hostile, "consumer"]


def _by_instance(tmp_path, **kwargs):
    status, log = tmp_path / "status.txt", tmp_path / "actions.log"
    status.write_text("orders:orders_0   RUNNING   pid 11, uptime 0:01:00\n"
                      "orders:orders_1   EXITED    Mar 03 10:15 AM\n")
    controller = CommandController(commands={
        "stop": "true", "start": "true", "status": f"cat {shlex.quote(str(status))}",
        "stop_instance": f"echo stop {{instance}} >> {shlex.quote(str(log))}",
        "start_instance": f"echo start {{instance}} {{group_protocol}} >> {shlex.quote(str(log))}"},
        status_format="supervisorctl", **kwargs)
    return controller, log


def test_one_instance_is_stopped_and_started_by_the_name_the_status_prints(tmp_path):
    controller, log = _by_instance(tmp_path, member_identity={
        "match": r"^orders:orders_(?P<n>[0-9]+)$", "client_id": "app-{n}", "group_instance_id": "orders-{n}"})
    assert controller.can_roll_instances() and not controller.can_roll()
    first, second = controller.status().instances
    assert (first.client_id, first.group_instance_id, first.running) == ("app-0", "orders-0", True)
    assert (second.client_id, second.group_instance_id, second.running) == ("app-1", "orders-1", False)
    controller.stop_instance("orders:orders_0")
    controller.start_instance("orders:orders_0", "consumer")
    assert log.read_text().splitlines() == ["stop orders:orders_0", "start orders:orders_0 consumer"]
    assert controller.actions("consumer")["start_instance"].startswith("echo start '<instance>' consumer")
    # a name the platform does not list never reaches a command (nor does anything in it)
    for name in ("orders:orders_9", "orders:orders_0; touch pwned"):
        with pytest.raises(PlatformError, match="the platform lists no instance"):
            controller.stop_instance(name)
    assert log.read_text().count("\n") == 2 and not (tmp_path / "pwned").exists()


def test_without_the_one_instance_commands_or_a_status_there_is_no_roll_by_instance(tmp_path):
    controller = CommandController(commands={"stop": "true", "start": "true", "stop_instance": "true",
                                             "start_instance": "true"})
    assert not controller.can_roll_instances()  # no status: which instances exist is unknown
    with pytest.raises(PlatformError, match="no stop_instance / start_instance / status"):
        controller.stop_instance("a")
    with pytest.raises(ValueError, match=r"commands.stop: \{instance\} is not a parameter it can take"):
        CommandController(commands={"stop": "kill {instance}", "start": "true"})


@pytest.mark.parametrize(("identity", "expected"), [
    ({"client_id": "app-{n}"}, "member_identity: a mapping with 'match'"),
    ({"match": "(", "client_id": "x"}, "member_identity.match: '(' is not a valid regular expression"),
    ({"match": r"(?P<n>a)\1", "client_id": "x"}, "member_identity.match: '(?P<n>a)\\\\1' uses a backreference"),
    ({"match": "^a(?P<n>[0-9])$"}, "give at least one of client_id"),
    ({"match": "^a(?P<n>[0-9])$", "client_id": "app-{m}"}, "{m} is not a named group of match (n)"),
    ({"match": "^a$", "pod": "x"}, "unknown key(s) pod"),
])
def test_a_member_identity_that_cannot_work_is_refused_when_built(identity, expected):
    with pytest.raises(ValueError) as err:
        CommandController(commands={"stop": "true", "start": "true"}, member_identity=identity)
    assert expected in str(err.value)


def test_a_member_identity_pattern_with_nested_quantifiers_matches_a_hostile_name_without_stalling():
    """The registry's member_identity.match and a param's pattern are matched in linear time (RE2): with Python's
    backtracking ``re``, ``(a+)+b`` against 64 'a' and a '!' would not return in this universe's lifetime."""
    controller = CommandController(commands={"stop": "true", "start": "true"},
                                   member_identity={"match": "(?P<n>(a+)+b)", "client_id": "app-{n}"})
    hostile = Instance(name="a" * 64 + "!", running=True)
    assert controller._identified(hostile) == hostile  # no match: the instance as it is
    assert Arg("string", pattern="(a+)+b").problem("region", "a" * 64 + "!") == \
        f"region {'a' * 64 + '!'!r} does not match (a+)+b"


def test_a_param_pattern_regex_lacks_is_refused_when_declared():
    with pytest.raises(ValueError, match="uses a lookahead"):
        Arg("string", pattern="(?=x)x")


# -- the platform's output ----------------------------------------------------------------------------------------

SUPERVISORCTL = """\
orders:orders_0                  RUNNING   pid 4242, uptime 1 day, 2:03:04
orders:orders_1                  STOPPED   Not started
orders:orders_2                  EXITED    Mar 03 10:15 AM
orders:orders_3                  FATAL     Exited too quickly (process log may have details)
orders:orders_4                  BACKOFF   Exited too quickly (process log may have details)
orders:orders_5                  STARTING
"""


def test_supervisorctl_status_lines_are_read_as_instances():
    got = [(i.name, i.running, i.ready, i.incarnation, i.state) for i in parse_status("supervisorctl", SUPERVISORCTL)]
    assert got == [("orders:orders_0", True, True, "4242", "RUNNING"),
                   ("orders:orders_1", False, False, None, "STOPPED"),
                   ("orders:orders_2", False, False, None, "EXITED"),
                   ("orders:orders_3", False, False, None, "FATAL"),
                   ("orders:orders_4", True, False, None, "BACKOFF"),
                   ("orders:orders_5", True, False, None, "STARTING")]


@pytest.mark.parametrize("line", ["orders: ERROR (no such group)",
                                  "unix:///var/run/supervisor.sock no such file",
                                  "orders:orders_0 running pid 1"])
def test_a_supervisorctl_line_that_is_not_a_status_is_an_error(line):
    with pytest.raises(FormatError, match="not a supervisorctl status line"):
        parse_status("supervisorctl", SUPERVISORCTL + line + "\n")


SYSTEMD = """\
Id=orders@0.service
ActiveState=active
SubState=running
MainPID=1234
NRestarts=2
ExecMainStartTimestampMonotonic=987654

Id=orders@1.service
ActiveState=failed
SubState=failed
MainPID=0
NRestarts=5
ExecMainStartTimestampMonotonic=0

Id=orders@2.service
ActiveState=activating
SubState=auto-restart
MainPID=0
NRestarts=7
ExecMainStartTimestampMonotonic=0
"""


def test_systemctl_show_blocks_are_read_as_instances():
    got = [(i.name, i.running, i.ready, i.restarts, i.incarnation, i.state) for i in parse_status("systemd", SYSTEMD)]
    assert got == [("orders@0.service", True, True, 2, "1234@987654", "active/running"),
                   ("orders@1.service", False, False, 5, None, "failed/failed"),
                   ("orders@2.service", True, False, 7, None, "activating/auto-restart")]
    # a restart of unit 0 shows as a new incarnation even where NRestarts is not set
    again = parse_status("systemd", "Id=orders@0.service\nActiveState=active\nSubState=running\nMainPID=1300\n"
                                    "NRestarts=[not set]\nExecMainStartTimestampMonotonic=999999\n")
    assert (again[0].restarts, again[0].incarnation) == (None, "1300@999999")


def test_a_unit_systemd_does_not_know_is_an_error_never_an_instance_gone():
    """A mistyped unit name in the status command (LoadState=not-found) must not read as "that instance is gone":
    the empty wait would force members out on it."""
    with pytest.raises(FormatError, match="systemd has no unit 'orders@9.service' \\(LoadState=not-found\\)"):
        parse_status("systemd", SYSTEMD + "\nId=orders@9.service\nLoadState=not-found\nActiveState=inactive\n"
                                          "SubState=dead\nMainPID=0\n")


@pytest.mark.parametrize("text, expected", [
    ("ActiveState=active\nSubState=running\n", "lacks Id: pass -p Id,LoadState,ActiveState"),
    ("Id=orders@0.service\nSubState=running\n", "lacks ActiveState"),
    ("Id=orders@0.service\nthis is not a property\n", "not a systemctl show line (key=value)"),
])
def test_systemctl_output_without_what_it_needs_is_an_error(text, expected):
    with pytest.raises(FormatError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        parse_status("systemd", text)


def test_json_status_is_a_list_or_an_instances_object_with_instance_fields():
    items = [{"name": "orders-0", "running": True, "ready": True, "restarts": 1, "incarnation": 101,
              "host": "app-01", "client_id": "orders-0", "group_instance_id": "orders-0", "state": "Running"},
             {"name": "orders-1", "running": False}]
    bare = parse_status("json", json.dumps(items))
    wrapped = parse_status("json", json.dumps({"instances": items}))
    assert bare == wrapped
    assert bare[0] == Instance(name="orders-0", running=True, ready=True, restarts=1, incarnation="101",
                               state="Running", host="app-01", client_id="orders-0", group_instance_id="orders-0")
    assert bare[1] == Instance(name="orders-1", running=False)
    # none: said explicitly
    assert parse_status("json", "[]") == () and parse_status("json", '{"instances": []}') == ()


@pytest.mark.parametrize("payload, expected", [
    ([{"name": "a", "running": True, "pid": 4}], "instances[0]: unknown field(s) pid (fields: client_id, "),
    ([{"name": "a"}], "instances[0] (a): 'running' (true or false) is required"),
    ([{"name": "a", "running": "yes"}], "instances[0] (a): 'running' (true or false) is required"),
    ([{"running": True}], "instances[0]: 'name' (a non-empty string) is required"),
    ([{"name": "", "running": True}], "instances[0]: 'name' (a non-empty string) is required"),
    ([{"name": "a", "running": True, "ready": "true"}], "instances[0] (a): 'ready' has the wrong type: 'true'"),
    ([{"name": "a", "running": True, "restarts": True}], "instances[0] (a): 'restarts' has the wrong type: True"),
    ([{"name": "a", "running": True, "restarts": "3"}], "instances[0] (a): 'restarts' has the wrong type: '3'"),
    (["orders-0"], "instances[0] is not an object: 'orders-0'"),
    ({"items": []}, 'expected {"instances": [...]} or a list'),
    ({"instances": {"name": "a"}}, 'expected {"instances": [...]} or a list'),
])
def test_json_status_is_read_strictly(payload, expected):
    with pytest.raises(FormatError) as err:
        parse_status("json", json.dumps(payload))
    assert expected in str(err.value)


def test_status_output_that_is_not_json_is_an_error():
    with pytest.raises(FormatError, match="the status command's output is not JSON"):
        parse_status("json", "orders-0 running")


@pytest.mark.parametrize(("fmt", "stdout", "limit"), [
    ("json", "[" * 100_000 + "]" * 100_000, "lists deeper than 64 levels"),
    ("json", '{"instances": [{"name": "a", "running": true, "restarts": NaN}]}', "numbers must be finite"),
])
def test_status_and_config_output_is_read_within_the_documents_bounds(fmt, stdout, limit):
    """A platform's output is read like any document (kafka/documents.py): deep nesting is an error naming the
    limit, not a RecursionError out of the json module, and a non-finite number is refused."""
    for parse, what in ((parse_status, "status"), (parse_config, "config")):
        with pytest.raises(FormatError) as err:
            parse(fmt, stdout)
        assert f"the {what} command's output is not JSON" in str(err.value)
        assert limit in str(err.value), str(err.value)


@pytest.mark.parametrize("fmt", ["json", "supervisorctl", "systemd"])
@pytest.mark.parametrize("stdout", ["", "\n", "  \n\t\n"])
def test_empty_status_output_is_an_error_never_no_instances(fmt, stdout):
    with pytest.raises(FormatError, match="the status command printed nothing"):
        parse_status(fmt, stdout)


def test_an_unknown_status_format_is_an_error():
    with pytest.raises(FormatError, match="unknown status format 'nomad'"):
        parse_status("nomad", "x")


def test_properties_config_is_read_with_comments_and_both_separators():
    text = """
# consumer.properties
! an old-style comment
bootstrap.servers=kafka-1:9092,kafka-2:9092
group.id: orders
  session.timeout.ms = 45000
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";
"""
    assert parse_config("properties", text) == {
        "bootstrap.servers": "kafka-1:9092,kafka-2:9092", "group.id": "orders", "session.timeout.ms": "45000",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
                            'password="p";'}


def test_json_config_is_a_flat_object_of_strings():
    assert parse_config("json", '{"group.protocol": "consumer", "enable.auto.commit": false, "max.poll.records": 500,'
                                ' "client.rack": null}') == {
        "group.protocol": "consumer", "enable.auto.commit": "false", "max.poll.records": "500", "client.rack": ""}


@pytest.mark.parametrize("fmt, stdout, expected", [
    ("properties", "", "the config command printed nothing"),
    ("json", "\n", "the config command printed nothing"),
    ("properties", "bootstrap.servers=b:9092\njust words\n", "not a property line (key=value): 'just words'"),
    ("json", '{"a": {"b": 1}}', "expected a flat JSON object of client properties"),
    ("json", '["a=b"]', "expected a flat JSON object of client properties"),
    ("json", "a=b", "the config command's output is not JSON"),
    ("yaml", "a: b", "unknown config format 'yaml'"),
])
def test_config_output_that_cannot_be_read_is_an_error(fmt, stdout, expected):
    with pytest.raises(FormatError) as err:
        parse_config(fmt, stdout)
    assert expected in str(err.value)


# -- secrets ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("login failed: password=hunter2 for user app", "login failed: password=*** for user app"),
    ("ssl.key.password: s3cret", "ssl.key.password: ***"),
    ("SASL_TOKEN=abc.def.ghi", "SASL_TOKEN=***"),
    ("client.secret = xyz", "client.secret = ***"),
    ('sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
     'password="hunter2";',
     'sasl.jaas.config=*** required username="u" password="***";'),
    ("bootstrap.servers=kafka-1:9092 group.id=orders", "bootstrap.servers=kafka-1:9092 group.id=orders"),
])
def test_secret_assignments_in_command_output_are_redacted(text, expected):
    assert redact_output(text) == expected


def test_known_secrets_are_redacted_wherever_they_appear():
    assert redact_output("connecting with hunter2 to app-01 (key AAAAB3Nza)", ("hunter2", "AAAAB3Nza", "")) == \
        "connecting with *** to app-01 (key ***)"


def test_a_secret_in_json_output_is_redacted():
    """JSON (an API's error body, a json status/config command) must not keep ``"password": "hunter2"`` in
    clear: the quote between the key and the separator is part of the pattern."""
    redacted = redact_output('error 401: {"user": "app", "password": "hunter2", "token":"abc"}')
    assert "hunter2" not in redacted and "abc" not in redacted
    assert '"user": "app"' in redacted


@pytest.mark.parametrize("key", ["sasl.jaas.config", "ssl.key.password", "ssl.keystore.password",
                                 "ssl.truststore.password", "sasl.password", "sasl.oauthbearer.client.secret",
                                 "ssl.keystore.key", "SSL.KEY.PASSWORD", "ssl.private.key"])
def test_client_config_redacts_secret_keys(key):
    config = ClientConfig(properties={key: "hunter2", "bootstrap.servers": "kafka-1:9092"}, source="cat app.props")
    assert config.properties == {key: "***", "bootstrap.servers": "kafka-1:9092"}
    assert "hunter2" not in json.dumps(config.to_dict())
    assert ClientConfig.from_dict(config.to_dict()) == config


def test_client_config_redacts_librdkafka_private_key():
    """librdkafka's ``ssl.key.pem`` holds the private key itself: redacted like the keys ending in ``.key``."""
    config = ClientConfig(properties={"ssl.key.pem": "-----BEGIN PRIVATE KEY-----"}, source="s")
    assert config.properties == {"ssl.key.pem": "***"}


@pytest.mark.parametrize("key", ["bootstrap.servers", "group.protocol", "ssl.keystore.location", "security.protocol",
                                 "group.instance.id", "client.id"])
def test_client_config_keeps_ordinary_keys(key):
    assert ClientConfig(properties={key: "v"}, source="s").properties == {key: "v"}


# -- verdicts over the platform's instances -----------------------------------------------------------------------


def instance(name: str, running: bool = True, **kwargs) -> Instance:
    return Instance(name=name, running=running, **kwargs)


def status(*instances: Instance) -> ApplicationStatus:
    return ApplicationStatus(known=True, instances=instances, source="test")


def test_instances_that_run_ready_and_unchanged_since_the_baseline_hold():
    baseline = status(instance("a", ready=True, restarts=0, incarnation="11"), instance("b", incarnation="12"))
    assert instance_problems(baseline, expected=2, baseline=baseline) == []
    assert instance_problems(baseline, expected=2) == []


@pytest.mark.parametrize("now, problem", [
    (instance("a", running=False, state="EXITED"), "a (EXITED) is not running"),
    (instance("a", ready=False, restarts=0, incarnation="11", state="BACKOFF"),
     "a (BACKOFF, incarnation 11, 0 restart(s)) is not ready"),
    (instance("a", ready=True, restarts=3, incarnation="11"),
     "a (running, incarnation 11, 3 restart(s)) restarted 3 time(s) since the start"),
    (instance("a", ready=True, restarts=0, incarnation="99"),
     "a (running, incarnation 99, 0 restart(s)) was replaced since the start (incarnation 11 -> 99)"),
])
def test_an_instance_that_stopped_is_not_ready_restarted_or_was_replaced_is_named(now, problem):
    baseline = status(instance("a", ready=True, restarts=0, incarnation="11"), instance("b"))
    assert problem in instance_problems(status(now, instance("b")), expected=1, baseline=baseline)


def test_an_instance_gone_since_the_baseline_and_too_few_instances_are_named():
    baseline = status(instance("a", host="app-01"), instance("b", host="app-02"), instance("c"))
    problems = instance_problems(status(instance("a", host="app-01"), instance("c", running=False)),
                                 expected=3, baseline=baseline)
    assert problems == ["c (not running) is not running", "b (running, on app-02) is gone",
                        "1 of 3 expected instance(s) running"]
    assert instance_problems(status(instance("a")), expected=2) == ["1 of 2 expected instance(s) running"]


def test_lost_instances_are_only_those_of_the_baseline_that_died_not_those_still_coming_up():
    """What a wait may fail on before the coordinator's side holds: an instance of the baseline gone, stopped or
    restarted; not one that is unready or missing from a start still in progress."""
    baseline = status(instance("a", restarts=0), instance("b", host="app-02"), instance("c"), instance("d"))
    now = status(instance("a", restarts=1), instance("c", running=False), instance("d", ready=False),
                 instance("e", ready=False))
    assert lost_instances(now, baseline) == ["a (running, 1 restart(s)) restarted 1 time(s) since the start",
                                             "b (running, on app-02) is gone", "c (not running) is not running"]
    assert lost_instances(now, None) == [] and lost_instances(now, ApplicationStatus.unknown("no status")) == []
    with pytest.raises(ValueError, match="an unknown status cannot be judged"):
        lost_instances(ApplicationStatus.unknown("no status command"), baseline)


def test_an_unknown_status_is_not_judged_and_an_unknown_baseline_is_ignored():
    with pytest.raises(ValueError, match="an unknown status cannot be judged"):
        instance_problems(ApplicationStatus.unknown("no status command"), expected=1)
    now = status(instance("a", incarnation="2"))
    assert instance_problems(now, expected=1, baseline=ApplicationStatus.unknown("no status command")) == []


def test_a_member_is_matched_to_its_instance_by_static_id_then_client_id_then_a_unique_host():
    pool = [instance("orders-0", host="10.0.0.1", client_id="orders-a", group_instance_id="static-0"),
            instance("orders-1", host="10.0.0.1", client_id="orders-b", group_instance_id="static-1"),
            instance("orders-2", host="10.0.0.2")]
    assert member_instance({"instance_id": "static-1", "client_id": "orders-a"}, pool).name == "orders-1"
    assert member_instance({"instance_id": "static-9", "client_id": "orders-a"}, pool).name == "orders-0"
    assert member_instance({"client_id": "consumer-1", "host": "/10.0.0.2"}, pool).name == "orders-2"
    assert member_instance({"client_id": "consumer-1", "host": "/10.0.0.1"}, pool) is None  # two on that host
    assert member_instance({"client_id": "x", "host": "10.9.9.9", "instance_id": None}, pool) is None
    assert member_instance({}, pool) is None


# -- real runs on this machine (/bin/sh), through the registry ----------------------------------------------------


def q(path: Path) -> str:
    return shlex.quote(str(path))


class App:
    """An application whose platform is a few files in ``tmp_path``: ``state.json`` is what its status command
    prints; stop and start rewrite it."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.running = [{"name": "orders-0", "running": True, "ready": True, "incarnation": 101, "host": "app-01"},
                        {"name": "orders-1", "running": True, "ready": True, "incarnation": 102, "host": "app-01"}]
        (tmp_path / "running.json").write_text(json.dumps(self.running))
        (tmp_path / "stopped.json").write_text("[]")
        (tmp_path / "state.json").write_text(json.dumps(self.running))
        self.status_log = tmp_path / "status.log"
        self.start_log = tmp_path / "starts.log"

    @property
    def commands(self) -> dict[str, str]:
        d = self.dir
        return {"stop": f"cp {q(d / 'stopped.json')} {q(d / 'state.json')}",
                "start": f"cp {q(d / 'running.json')} {q(d / 'state.json')} && echo {{group_protocol}} >> "
                         f"{q(self.start_log)}",
                "status": f"echo polled >> {q(self.status_log)}; cat {q(d / 'state.json')}"}

    def resolve(self, commands: dict[str, str] | None = None, args: dict | None = None, **target) -> NamedController:
        reg = registry(orders=command_entry(commands or self.commands, **target))
        return reg.resolve("orders", args)


def test_stop_is_confirmed_by_the_status_command(tmp_path):
    app = App(tmp_path)
    # the platform's stop returns at once and takes effect later: here, at the third status poll after it
    stopping = tmp_path / "stopping"
    commands = {**app.commands, "stop": f"touch {q(stopping)}",
                "status": f"echo polled >> {q(app.status_log)}; if [ -f {q(stopping)} ]; then "
                          f"echo poll >> {q(stopping)}; [ $(wc -l < {q(stopping)}) -ge 3 ] && "
                          f"cp {q(tmp_path / 'stopped.json')} {q(tmp_path / 'state.json')}; fi; "
                          f"cat {q(tmp_path / 'state.json')}"}
    named = app.resolve(commands)
    before = named.status()
    assert [(i.name, i.incarnation) for i in before.running] == [("orders-0", "101"), ("orders-1", "102")]
    done = named.stop(confirm_seconds=30, poll_seconds=0.05)
    assert done["instances_gone"] is True
    assert done["status"]["summary"] == "no instance running"
    assert (done["controller"], done["action"], done["platform"]["exit_code"]) == ("orders", "stop", 0)
    # the caller's look, the stop's own look before it (its instances, kept for the pairing), then two polls
    # showing them, then none
    assert len(app.status_log.read_text().splitlines()) == 5
    assert [i["name"] for i in done["before"]["instances"]] == ["orders-0", "orders-1"]


def test_start_starts_nothing_when_the_expected_instances_already_run(tmp_path):
    app = App(tmp_path)
    named = app.resolve()
    skipped = named.start("consumer", expected=2)
    assert skipped["already_running"] is True
    assert "already running: 2 instance(s) running" in skipped["platform"]["skipped"]
    assert not app.start_log.exists()
    named.stop(confirm_seconds=5, poll_seconds=0.1)
    started = named.start("consumer", expected=2)
    assert started["already_running"] is False and started["group_protocol"] == "consumer"
    assert app.start_log.read_text() == "consumer\n"
    assert len(started["status"]["instances"]) == 2
    # more expected than run: started again (the platform's start is idempotent)
    assert named.start("consumer", expected=3)["already_running"] is False
    assert app.start_log.read_text() == "consumer\nconsumer\n"
    with pytest.raises(ValueError, match="group_protocol must be one of classic, consumer, streams"):
        named.start("consumer; id")


def test_a_command_that_exits_non_zero_is_a_named_error_with_its_redacted_stderr(tmp_path):
    app = App(tmp_path)
    errors = tmp_path / "stderr.txt"
    errors.write_text("cannot stop orders: password=hunter2\n")
    named = app.resolve({**app.commands, "stop": f"cat {q(errors)} >&2; exit 7"})
    with pytest.raises(ControllerError) as err:
        named.stop(confirm_seconds=5, poll_seconds=0.1)
    message = str(err.value)
    assert (err.value.controller, err.value.step, err.value.retriable) == ("orders", "stop", False)
    assert message.startswith("controller 'orders', step stop: ")
    assert "exited 7 on the Airflow worker" in message
    assert "cannot stop orders: password=***" in message
    assert "hunter2" not in message


def test_a_command_that_hangs_is_killed_at_its_timeout_with_its_children(tmp_path):
    app = App(tmp_path)
    pid_file = tmp_path / "child.pid"
    named = app.resolve({**app.commands, "stop": f"sleep 30 & echo $! > {q(pid_file)}; sleep 30"}, timeout_seconds=1)
    started = time.monotonic()
    with pytest.raises(ControllerError) as err:
        named.stop(confirm_seconds=5)
    took = time.monotonic() - started
    assert took < 10, f"the hanging command was not killed ({took:.1f} s)"  # a sanity bound, not a performance one
    assert (err.value.step, err.value.retriable) == ("stop", True)
    assert "did not finish within 1 s on the Airflow worker (" in str(err.value)
    assert "it was killed, and what it did before is unknown" in str(err.value)
    # the whole process group went: the background child is gone (or a zombie waiting for its reaper)
    child = Path(f"/proc/{pid_file.read_text().strip()}/stat")
    deadline = time.monotonic() + 5
    while child.exists() and " Z " not in child.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not child.exists() or " Z " in child.read_text()


def test_a_status_command_that_prints_nothing_is_a_clear_error(tmp_path):
    app = App(tmp_path)
    named = app.resolve({**app.commands, "status": "true"})
    with pytest.raises(ControllerError) as err:
        named.status()
    assert (err.value.step, err.value.retriable) == ("status", False)
    assert "the status command printed nothing" in str(err.value)
    # and a stop is then never reported as confirmed
    with pytest.raises(ControllerError, match="step status"):
        named.stop(confirm_seconds=5)


def test_a_stop_the_platform_does_not_confirm_is_a_retriable_error_naming_the_instances(tmp_path):
    app = App(tmp_path)
    named = app.resolve({**app.commands, "stop": "true"})
    with pytest.raises(ControllerError) as err:
        named.stop(confirm_seconds=1, poll_seconds=0.1)
    message = str(err.value)
    assert (err.value.step, err.value.retriable) == ("stop", True)
    assert "after 1 s the platform still shows 2 instance(s) running" in message
    assert "orders-0 (running, incarnation 101, on app-01)" in message and "orders-1" in message
    assert "the application is NOT stopped" in message
    assert len(app.status_log.read_text().splitlines()) >= 2


def test_supervisorctl_status_exit_code_3_is_accepted_but_not_for_other_formats(tmp_path):
    app = App(tmp_path)
    stopped = "printf 'orders:orders_0   STOPPED   Not started\\n'; exit 3"
    named = app.resolve({**app.commands, "status": stopped}, status_format="supervisorctl")
    assert named.status().gone is True
    with pytest.raises(ControllerError, match="exited 3"):
        app.resolve({**app.commands, "status": "echo []; exit 3"}).status()


def test_commands_get_a_clean_environment_with_the_declared_env(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_X", "postgres://admin:hunter2@db/airflow")
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", "fernet")
    app = App(tmp_path)
    out = tmp_path / "env.txt"
    named = app.resolve({**app.commands,
                         "stop": f'echo "conn=${{{{AIRFLOW_CONN_X:-unset}}}} '
                                 f'fernet=${{{{AIRFLOW__CORE__FERNET_KEY:-unset}}}} mode=$APP_MODE" > {q(out)}; '
                                 f'env >> {q(out)}; {app.commands["stop"]}'},
                        env={"APP_MODE": "blue"})
    named.stop(confirm_seconds=5, poll_seconds=0.1)
    lines = out.read_text().splitlines()
    assert lines[0] == "conn=unset fernet=unset mode=blue"
    assert "hunter2" not in out.read_text() and "APP_MODE=blue" in lines
    assert os.environ["AIRFLOW_CONN_X"]  # the worker still has it


def test_a_hostile_param_reaches_the_command_as_one_word(tmp_path):
    app = App(tmp_path)
    hostile = f"x'; touch {tmp_path / 'pwned'}; echo '"
    out = tmp_path / "region.txt"
    named = app.resolve({**app.commands, "stop": f"printf '%s' {{region}} > {q(out)}; {app.commands['stop']}"},
                        args={"region": hostile}, params={"region": {"type": "string"}})
    assert named.stop(confirm_seconds=5, poll_seconds=0.1)["instances_gone"] is True
    assert out.read_text() == hostile
    assert not (tmp_path / "pwned").exists()


def test_the_config_command_gives_redacted_properties_for_a_protocol(tmp_path):
    app = App(tmp_path)
    props = tmp_path / "consumer.properties"
    props.write_text("bootstrap.servers=kafka-1:9092\nsasl.jaas.config=org.X required password=\"hunter2\";\n")
    named = app.resolve({**app.commands, "config": f"cat {q(props)}; echo group.protocol={{group_protocol}}"},
                        client="java", client_version="3.9.1")
    config = named.config("consumer")
    assert config.properties == {"bootstrap.servers": "kafka-1:9092", "sasl.jaas.config": "***",
                                 "group.protocol": "consumer"}
    assert (config.client, config.client_version) == ("java", "3.9.1")
    assert config.source.startswith(f"`cat {q(props)}; echo group.protocol=consumer` on the Airflow worker")
    with pytest.raises(ControllerError, match="step config: the config command takes {group_protocol}"):
        named.config()


def test_a_roll_needs_a_roll_command(tmp_path):
    app = App(tmp_path)
    with pytest.raises(ControllerError, match="step roll: this controller cannot roll an application"):
        app.resolve().roll("consumer")
    rolled = app.resolve({**app.commands, "roll": f"echo roll {{group_protocol}} >> {q(app.start_log)}"})
    assert rolled.roll("streams")["group_protocol"] == "streams"
    assert app.start_log.read_text() == "roll streams\n"


# -- what the approval approved ---------------------------------------------------------------------------------


def test_an_action_refuses_a_registry_entry_changed_since_the_approval():
    """The approval shows the controller's fingerprint (its entry and the run's arguments, hashed); the stop, start
    and roll refuse to act when the entry read then is not the one approved (commands nobody approved)."""
    approved = registry(app=command_entry({"stop": "echo stop", "start": "echo start"}))
    plan = approved.resolve("app").plan("consumer")
    assert plan["fingerprint"] == approved.resolve("app").fingerprint, "the same entry: the same fingerprint"
    same = registry(app=command_entry({"stop": "echo stop", "start": "echo start"}))
    same.resolve("app").require_fingerprint(plan["fingerprint"])  # nothing changed: allowed
    edited = registry(app=command_entry({"stop": "rm -rf /srv/orders", "start": "echo start"}))
    with pytest.raises(ControllerError, match="changed since the plan was approved .*nothing was done") as err:
        edited.resolve("app").require_fingerprint(plan["fingerprint"])
    assert (err.value.controller, err.value.step, err.value.retriable) == ("app", "check", False)
    with_args = registry(app=command_entry({"stop": "stop {zone}", "start": "t"}, params={"zone": {"type": "string"}}))
    assert with_args.resolve("app", {"zone": "eu"}).fingerprint != with_args.resolve("app", {"zone": "us"}).fingerprint


def test_the_controller_check_reaches_the_platform_without_changing_it(tmp_path):
    """``check`` runs nothing of the application's commands (only ``true`` where they would run)."""
    marker = tmp_path / "ran"
    reg = registry(app=command_entry({"stop": f"touch {marker}", "start": f"touch {marker}",
                                      "status": f"touch {marker}; echo '[]'"}))
    with reg.resolve("app") as controller:
        assert controller.check().startswith("the Airflow worker")
    assert not marker.exists()
