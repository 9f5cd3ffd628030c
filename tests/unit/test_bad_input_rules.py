"""The general fixes for bad input, without a broker: strict flags, group ids, refusals, atomic artifacts.

Each class of hole issue 14 names has its rule here; the same rules against the real broker (cluster
state identical before and after) are ``tests/integration/test_bad_input.py``,
``test_bad_operator_input.py`` and the generated ``test_bad_input_generated.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import errors as kerr

from airflow_provider_kip848.changecontrol import storage
from airflow_provider_kip848.changecontrol.audit import read_audit
from airflow_provider_kip848.kafka import errors as kafka_errors
from airflow_provider_kip848.kafka.arguments import (
    FALSE_WORDS,
    TRUE_WORDS,
    parse_flag,
    parse_number,
    require_bool,
    require_group_id,
    similar_group_ids,
)
from airflow_provider_kip848.kafka.files import atomic_write_text, create_once
from airflow_provider_kip848.kafka.model import FeatureUpdate
from airflow_provider_kip848.kafka.rules.features import refuse_dependents
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.kafka.translate import group_error, translate_kafka_python

SETTINGS = ClientSettings("b1:9092", sasl_password="hunter2")


# -- guard flags -------------------------------------------------------------------------------


@given(st.one_of(st.text(max_size=12), st.integers(), st.floats(), st.none(), st.lists(st.booleans(), max_size=2)))
@settings(max_examples=300, derandomize=True, database=None)
def test_a_guard_flag_is_true_false_or_an_error_never_a_guess(value):
    """Every value either parses as the word it spells or is refused: a typo is never "apply"."""
    word = value.strip().lower() if isinstance(value, str) else None
    try:
        parsed = parse_flag(value, "dry_run")
    except kafka_errors.InvalidArgument as exc:
        assert "dry_run must be true or false" in str(exc)
        assert word not in TRUE_WORDS | FALSE_WORDS
        return
    if isinstance(value, str):
        assert parsed is (word in TRUE_WORDS) and word in TRUE_WORDS | FALSE_WORDS
    else:
        assert value in (0, 1) and parsed is bool(value)


@pytest.mark.parametrize("value", ["false", "true", "no", 0, 1, None, "", [False]])
def test_the_typed_api_takes_only_real_booleans(value):
    with pytest.raises(kafka_errors.InvalidArgument, match="dry_run must be a bool"):
        require_bool(value, "dry_run")
    assert require_bool(False, "dry_run") is False and require_bool(True, "dry_run") is True


@pytest.mark.parametrize("value, ok", [("5", 5.0), (0, 0.0), (2.5, 2.5), ("x", None), (-1, None), ("nan", None),
                                       (float("inf"), None), (True, None), (None, None)])
def test_numbers_are_finite_and_not_negative(value, ok):
    if ok is None:
        with pytest.raises(kafka_errors.InvalidArgument, match="must be a number from 0 to 604,800"):
            parse_number(value, "settle_seconds")
    else:
        assert parse_number(value, "settle_seconds") == ok
    assert parse_number("None", "x", optional=True) is None
    with pytest.raises(kafka_errors.InvalidArgument, match="whole number from 1 to 2,147,483,647"):
        parse_number("2.5", "expected_members", minimum=1, integer=True)


# -- group ids ---------------------------------------------------------------------------------


@pytest.mark.parametrize("group_id, fragment", [
    (" orders", "leading or trailing whitespace"), ("orders\n", "leading or trailing whitespace"),
    ("orders\u200b", "control or invisible characters (U+200B)"), ("ord\x00ers", "U+0000"),
    ("", "is empty"), ("   ", "is empty"), (None, "must be a string"), (42, "must be a string"),
])
def test_group_ids_that_name_another_group_are_refused(group_id, fragment):
    with pytest.raises(kafka_errors.InvalidGroupId, match=re.escape(fragment)):
        require_group_id(group_id)


def test_similar_group_ids_name_look_alikes_and_typos():
    known = ["orders", "payments", "Orders-v2", "audit"]
    assert similar_group_ids("ORDERS", known)[0] == "orders"
    assert "orders" in similar_group_ids("ordres", known)
    assert "orders" in similar_group_ids("оrders", known)  # Cyrillic о
    assert similar_group_ids("inventory", known) == []


# -- feature downgrades under live groups -------------------------------------------------------


def test_lowering_a_group_protocol_feature_names_the_groups_that_depend_on_it():
    disable = FeatureUpdate("group.version", "disable", 1, 0, False, noop=False, applied=False, message="")
    refusal = refuse_dependents(disable, {"orders": 3, "audit": 0})
    assert isinstance(refusal, kafka_errors.FeatureInUse)
    assert "2 consumer group(s) depend on it (3 live member(s)): 'orders' (3 member(s)), 'audit' (empty)" in str(
        refusal)
    assert refusal.groups == {"orders": 3, "audit": 0} and not refusal.retriable
    assert refuse_dependents(disable, {}) is None
    upgrade = FeatureUpdate("group.version", "upgrade", 0, 1, False, noop=False, applied=False, message="")
    assert refuse_dependents(upgrade, {"orders": 3}) is None
    other = FeatureUpdate("metadata.version", "downgrade", 29, 28, False, noop=False, applied=False, message="")
    assert refuse_dependents(other, {"orders": 3}) is None


# -- broker refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize("error, retriable", [(kerr.PolicyViolationError, False), (kerr.InvalidTopicError, False),
                                              (kerr.InvalidReplicationFactorError, False),
                                              (kerr.NotEnoughReplicasError, True)])
def test_an_unmatched_refusal_is_a_provider_error_with_the_brokers_flag(error, retriable):
    raw = error("the broker's own words " + "Request(x=1) " * 100)
    translated = translate_kafka_python(raw, SETTINGS)
    assert isinstance(translated, kafka_errors.Kip848Error) and translated is not raw
    assert translated.retriable is retriable
    assert error.__name__ in str(translated) and len(str(translated)) < 600  # no whole request dump
    try:
        raise translated from raw
    except kafka_errors.Kip848Error as exc:
        assert exc.__cause__ is raw and exc.__cause__ is not exc


def test_a_per_group_error_code_keeps_the_group_and_the_brokers_words():
    err = group_error("orders", kerr.PolicyViolationError.errno, "not allowed here", SETTINGS)
    assert isinstance(err, kafka_errors.BrokerRefused) and "Group 'orders'" in str(err) and "not allowed here" in str(err)
    assert not err.retriable


# -- artifacts --------------------------------------------------------------------------------------


def test_atomic_writes_leave_the_old_or_the_new_content(tmp_path):
    path = tmp_path / "a" / "snapshot.json"
    atomic_write_text(path, "one")
    atomic_write_text(path, "two")
    assert path.read_text() == "two"
    assert create_once(path, "three") is False and path.read_text() == "two"
    assert create_once(tmp_path / "b.json", "x") is True
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b.json", "snapshot.json"]  # no temp file left


def test_a_writer_killed_mid_write_leaves_no_partial_artifact(tmp_path):
    """A process killed while writing (SIGKILL before the rename) leaves the target absent, not empty."""
    target = tmp_path / "snap.json"
    code = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        import airflow_provider_kip848.kafka.files as kafka_files
        real = os.replace
        def die(src, dst):
            os.kill(os.getpid(), signal.SIGKILL)
        os.replace = die
        kafka_files.atomic_write_text(Path({str(target)!r}), "x" * 100000)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert proc.returncode == -9
    assert not target.exists()  # a retry finds nothing to trip over (the temp file is hidden and ignored)


def test_an_unwritable_location_is_a_provider_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(kafka_errors.ArtifactUnwritable, match="Cannot write"):
        storage.write_text(str(blocker / "sub" / "snap.json"), "{}")
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(kafka_errors.ArtifactUnwritable):
            storage.write_text(str(ro / "snap.json"), "{}")


def test_quarantine_keeps_the_leftover_aside(tmp_path):
    leftover = tmp_path / "snap.json"
    leftover.write_text("")
    moved = storage.quarantine(str(leftover))
    assert not leftover.exists() and moved.startswith(str(leftover) + ".unreadable-")
    assert open(moved).read() == ""


def test_a_torn_audit_line_does_not_hide_the_other_records(tmp_path, caplog):
    log = tmp_path / "audit.jsonl"
    log.write_text(json.dumps({"kind": "feature", "n": 1}) + "\n" + '{"kind": "grou' + "\n"
                   + json.dumps({"kind": "offsets", "n": 2}) + "\n")
    assert [r["n"] for r in read_audit(str(log))] == [1, 2]
    assert "line 2 is not a record" in caplog.text
