"""An instance's log through its controller (issue 48): the contract's pure parts (redaction, the byte bound and
the cut line) and the ``command`` kind's ``logs`` step run by the worker's real shell (its placeholders inert,
its output bounded whatever the command prints, a failing command an unknown log, never an exception)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_kip848.controllers import InstanceLog, NamedController
from airflow_provider_kip848.controllers.command import CommandController
from airflow_provider_kip848.controllers.protocol import ApplicationController, redact_log_line


@pytest.mark.parametrize(("line", "redacted"), [
    ('\tsasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="app" '
     'password="s3 cret";', "\tsasl.jaas.config = ***"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload", "Authorization: ***"),
    ('curl -H "Authorization: Basic Zm9vOmJhcg=="', 'curl -H "Authorization: ***'),
    ("\tssl.key.password = hunter2", "\tssl.key.password = ***"),
    ('connect password="two words" retries=3', "connect password=*** retries=3"),
    ('{"sasl.password": "pw", "x": 1}', '{"sasl.password": ***, "x": 1}'),
    ("ssl.keystore.key=MIIEvQ", "ssl.keystore.key=***"),
    ("token sent as Bearer abcdefghijklmnop", "token sent as Bearer ***"),
])
def test_a_log_line_loses_its_secrets_and_redaction_is_idempotent(line, redacted):
    assert redact_log_line(line) == redacted
    assert redact_log_line(redacted) == redacted


@pytest.mark.parametrize("line", [
    "%4|1764425000.123|FENCED|rdkafka#consumer-1| [thrd:main]: Consumer group member fenced",
    "[2026-11-29 14:00:00,000] ERROR [Consumer clientId=orders-0, groupId=orders] ... "
    "(org.apache.kafka.clients.consumer.internals.ConsumerCoordinator)",
    "\tgroup.instance.id = orders-0",
])
def test_a_line_without_a_secret_is_kept_as_it_is(line):
    assert redact_log_line(line) == line


def test_an_instance_log_redacts_its_lines_whoever_builds_it_and_round_trips():
    log = InstanceLog("orders-0", True, ("a", "password=x"), source="here")
    assert log.lines == ("a", "password=***")
    assert InstanceLog.from_dict(log.to_dict()) == log
    assert InstanceLog.from_dict(InstanceLog.unknown("o", "why").to_dict()) == InstanceLog("o", False, reason="why")


def test_the_newest_whole_lines_are_kept_within_the_bound_and_a_cut_line_is_dropped():
    text = "token=secret-tail\nsecond line\nthird line\n"
    full = InstanceLog.from_text("i", text, source="s", max_bytes=1000)
    assert full.lines == ("token=***", "second line", "third line") and not full.truncated
    # a tail that filled its bound was cut mid-line: the first (partial) line goes, whatever it holds
    cut = InstanceLog.from_text("i", "d=hunter2\"\nsecond line\nthird line\n", source="s", max_bytes=33)
    assert cut.lines == ("second line", "third line") and cut.truncated
    newest = InstanceLog.from_text("i", text, source="s", max_bytes=15, cut=False)
    assert newest.lines == ("third line",) and newest.truncated
    first = InstanceLog.from_text("i", text, source="s", max_bytes=30, from_start=True, cut=False)
    assert first.lines == ("token=***", "second line") and first.truncated


def test_a_controller_without_logs_says_it_cannot_read_them():
    class Plain(ApplicationController):
        def stop(self):
            return {}

        def start(self, group_protocol):
            return {}

        def status(self):
            raise NotImplementedError

        def actions(self, group_protocol):
            return {}

    assert not Plain().can_read_logs()
    log = Plain().logs("x")
    assert not log.known and "does not read logs" in log.reason


def _named(controller: CommandController) -> NamedController:
    return NamedController(name="orders", kind="command", controller=controller)


def test_the_command_logs_step_reads_one_instance_bounded_and_redacted(tmp_path: Path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "orders-0.log").write_text("".join(f"line {n}\n" for n in range(5000))
                                       + "sasl.jaas.config=x required password=\"p\";\nTOPIC_AUTHORIZATION_FAILED\n")
    controller = CommandController(commands={"stop": "true", "start": "true",
                                             "logs": f"tail -c {{max_bytes}} {logs}/{{instance}}.log"})
    assert controller.can_read_logs()
    log = _named(controller).logs("orders-0", max_bytes=200)
    assert log.known and log.truncated, log
    assert log.lines[-2:] == ("sasl.jaas.config=***", "TOPIC_AUTHORIZATION_FAILED")
    assert sum(len(line) + 1 for line in log.lines) <= 200
    assert "tail -c 200" in log.source and "orders-0" in log.source
    # the name is one inert word: a shell's metacharacters reach tail as a file name, nothing runs
    odd = _named(controller).logs("x; touch " + str(tmp_path / "ran"))
    assert not odd.known and "exited 1" in odd.reason and not (tmp_path / "ran").exists()
    assert not _named(controller).logs("-n").known  # an option, not a name


def test_a_logs_command_that_prints_without_bound_or_hangs_is_bounded(tmp_path: Path):
    loud = CommandController(commands={"stop": "true", "start": "true", "logs": "yes {instance} | head -c 5000000"})
    log = _named(loud).logs("abc", max_bytes=1000)
    assert log.known and log.truncated and sum(len(line) + 1 for line in log.lines) <= 1000
    slow = CommandController(commands={"stop": "true", "start": "true", "logs": "sleep 30; echo {instance}"})
    hung = _named(slow).logs("abc", timeout_s=0.5)
    assert not hung.known and "did not finish within 0.5 s" in hung.reason


@pytest.mark.parametrize(("template", "expected"), [
    ("tail -c {max_bytes} {group_protocol}", "{group_protocol} is not a parameter it can take"),
    ("sh -c 'tail {instance}'", "{instance} sits inside single quotes"),
])
def test_a_logs_template_is_checked_like_every_step(template, expected):
    with pytest.raises(ValueError, match=expected):
        CommandController(commands={"stop": "true", "start": "true", "logs": template})
