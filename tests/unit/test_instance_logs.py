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


def test_the_platform_watch_fails_at_once_on_a_fatal_client_error_logged_after_the_start(tmp_path: Path):
    """A ``command`` controller over the worker's shell: the status prints one instance, still running as the
    process of the start (nothing lost); its log holds a fatal error. Written before the start's mark it is an
    earlier incarnation's: nothing. Written after it: the look fails the wait, naming the instance and the
    client's line, while the platform still shows the process running."""
    from airflow_provider_kip848.hooks.platform_watch import PlatformWatch

    log = tmp_path / "orders-0.log"
    status = '{"instances": [{"name": "orders-0", "running": true, "ready": true, "incarnation": "41"}]}'
    (tmp_path / "status.json").write_text(status)
    controller = CommandController(commands={"stop": "true", "start": "true", "status": f"cat {tmp_path}/status.json",
                                             "logs": f"tail -c {{max_bytes}} {tmp_path}/{{instance}}.log"})
    named = _named(controller)
    fatal = ("%0|1795964302.977|FATAL|orders-0#consumer-1| [thrd:main]: Fatal error: Broker: The instance ID is "
             "still used by another member in the consumer group: ConsumerGroupHeartbeat fatal error: ...")
    log.write_text(f"started\n{fatal}\nclosed\nstarted again\n")
    marks = named.log_marks(["orders-0"])
    assert marks == {"orders-0": [fatal, "closed", "started again"]}
    baseline = named.status_with_marks(marks)
    watch = PlatformWatch.of("orders", {}, baseline, "lost")
    assert watch is not None and watch.baseline["log_marks"] == marks
    assert watch.look(named) is None  # the fatal line is an earlier incarnation's
    with log.open("a") as out:
        out.write("joining\n" + fatal.replace("1795964302.977", "1795964400.001") + "\n")
    found = watch.look(named)
    assert found is not None and "an instance's client logged an error it does not recover from" in found, found
    assert "orders-0: UNRELEASED_INSTANCE_ID (fatal): %0|1795964400.001|FATAL|" in found, found
    # a non-fatal error after the mark fails nothing by itself (it is named when the wait fails otherwise)
    log.write_text("started again\nKafkaError{code=FENCED_MEMBER_EPOCH,val=110,str=\"...\"}\n")
    assert watch.look(named) is None
    assert [f.error for f in watch.client_errors(named).findings] == ["FENCED_MEMBER_EPOCH"]


def test_a_failed_start_names_what_the_clients_logged_since_its_mark(tmp_path: Path):
    """A start the platform refuses (here a start command that exits 1, as ``supervisorctl start`` does on a
    "spawn error"): its failure carries the errors the instances' clients logged after the mark taken before it,
    not the older ones."""
    from airflow_provider_kip848.controllers import ControllerError

    (tmp_path / "status.json").write_text('{"instances": [{"name": "orders-0", "running": false}]}')
    log = tmp_path / "orders-0.log"
    log.write_text('KafkaError{code=UNSUPPORTED_VERSION,val=35,str="an earlier incarnation"}\nclosed\n')
    start = f"echo 'orders-0: ERROR (spawn error)' >&2; printf '%s\\n' {{group_protocol}} denied >> {log}; exit 1"
    controller = CommandController(commands={
        "stop": "true", "status": f"cat {tmp_path}/status.json", "start": start,
        "logs": f"tail -c {{max_bytes}} {tmp_path}/{{instance}}.log"})
    named = _named(controller)
    with pytest.raises(ControllerError) as err:
        named.start("consumer")
    assert "(spawn error)" in str(err.value)
    assert "UNSUPPORTED_VERSION" not in str(err.value), "an error from before the start was named"
    # the start wrote its line after the mark: nothing to name in "consumer" / "denied"
    assert "The clients logged" not in str(err.value)
    start2 = (f"echo 'ERROR (spawn error)' >&2; echo 'cimpl.KafkaException: KafkaError{{{{code=TOPIC_AUTHORIZATION_"
              f"FAILED,val=29,str=\"Fetch from broker 1 failed: Broker: Topic authorization failed\"}}}}' >> {log}; "
              "exit 1")
    named2 = _named(CommandController(commands={"stop": "true", "status": f"cat {tmp_path}/status.json",
                                                "start": start2,
                                                "logs": f"tail -c {{max_bytes}} {tmp_path}/{{instance}}.log"}))
    with pytest.raises(ControllerError) as err:
        named2.start("consumer")
    message = str(err.value)
    assert message.startswith("controller 'orders', step start: `"), message
    assert "The clients logged: orders-0: TOPIC_AUTHORIZATION_FAILED (fatal): cimpl.KafkaException" in message
    assert "UNSUPPORTED_VERSION" not in message
