"""Issue 31, class 2 (ids that look right but are not) and the pure parts of class 8 (extras and refusals that
must become provider errors), without a broker. The real-broker cases are
``tests/integration/test_lookalike_ids_and_bad_extras.py``."""

from __future__ import annotations

import copy
import re

import pytest
from airflow.sdk.definitions.param import ParamsDict
from airflow.sdk.exceptions import ParamValidationError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import errors as kerr

from airflow_provider_kip848.changecontrol import storage
from airflow_provider_kip848.changecontrol.approvals import ApprovalPolicy, ChangeControlError, parse_users
from airflow_provider_kip848.controllers.registry import ControllerRegistry
from airflow_provider_kip848.hooks.connection import cli_timeout_from_extra, settings_from_connection
from airflow_provider_kip848.kafka import errors as kafka_errors
from airflow_provider_kip848.kafka.arguments import (
    CONTROLLER_NAME_FORM_PATTERN,
    GROUP_ID_PATTERN,
    describe_similar,
    identifier_problem,
    require_group_id,
    similar_group_ids,
)
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.kafka.translate import broker_reason, translate_kafka_python
from airflow_provider_kip848.operators.approval import change_control_params
from airflow_provider_kip848.operators.params import controller_params

#: Space-like and invisible characters beyond the zero-width ones refused before: each prints as a blank or not at
#: all, so the id shown back looks like the one meant.
SPACE_LIKE = ["\u00a0", "\u1680", "\u2002", "\u2007", "\u2009", "\u200a", "\u202f", "\u205f", "\u3000"]
INVISIBLE = ["\u00ad", "\u034f", "\u061c", "\u180e", "\u2066", "\u3164", "\ufe0f", "\ufe00", "\uffa0", "\u2800",
             "\U000e0041", "\U000e0100", "\u115f"]


@pytest.mark.parametrize("char", SPACE_LIKE + INVISIBLE)
def test_space_like_and_invisible_characters_are_refused_by_code_point_in_the_id_and_in_the_form(char):
    group_id = f"orders{char}v2"
    with pytest.raises(kafka_errors.InvalidGroupId) as refused:
        require_group_id(group_id)
    assert f"U+{ord(char):04X}" in str(refused.value)
    assert "at character 7" in str(refused.value)
    # the form refuses it first where its pattern can name it portably (the Basic Multilingual Plane)
    assert (re.search(GROUP_ID_PATTERN, group_id) is None) is (ord(char) <= 0xFFFF)
    assert re.search(GROUP_ID_PATTERN, "orders v2") is not None  # the plain space stays allowed inside


@pytest.mark.parametrize("group_id, refused", [
    ("\u0301orders", True), ("orders-\u0301v2", True), ("orders \u0308", True), ("orders\u0301", False),
    ("gru\u0308ppe", False), ("\u0915\u093f", False), ("1\u20e3", False), ("\u20ddx", True),
])
def test_a_combining_mark_with_nothing_to_sit_on_is_refused_and_the_form_agrees(group_id, refused):
    assert (identifier_problem(group_id) is not None) is refused
    assert (re.search(GROUP_ID_PATTERN, group_id) is None) is refused


def test_the_form_pattern_and_the_provider_agree_on_generated_ids():
    """Every id the form accepts the provider accepts, and the other way round (the generated test of
    test_bad_params draws mostly ASCII; this draws from the space-like, invisible and mark ranges)."""
    alphabet = st.sampled_from(["a", "b", "-", ".", " ", "\u00fc", "\u0301", "\u0308", "\u093f", *SPACE_LIKE,
                                *INVISIBLE, "\u200b", "\n", "\x85"])

    @given(st.text(alphabet, min_size=1, max_size=6))
    @settings(max_examples=400, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    def case(text):
        if max(map(ord, text)) > 0xFFFF:  # beyond the form's plane: the provider alone refuses
            assert identifier_problem(text) is not None or re.search(GROUP_ID_PATTERN, text) is not None
            return
        assert (re.search(GROUP_ID_PATTERN, text) is not None) is (identifier_problem(text) is None), repr(text)

    case()


def test_the_form_pattern_reads_alike_in_a_browser_and_on_the_server():
    """A JSON-schema pattern is ECMA-262: a browser reads it without the u flag, where a \\U escape is a literal
    'U' (the class would then refuse every id holding a U, a digit or a-f) and a class holding the surrogates
    refuses every astral character. The pattern uses \\uXXXX escapes of the BMP only, no surrogate."""
    assert "\\U" not in GROUP_ID_PATTERN
    escapes = [int(h, 16) for h in re.findall(r"\\u([0-9a-fA-F]{4})", GROUP_ID_PATTERN)]
    assert escapes and not [c for c in escapes if 0xD800 <= c <= 0xDFFF]
    assert re.search(GROUP_ID_PATTERN, "orders-\U0001f600") is not None  # an emoji id is a legal Kafka group id


def test_another_normalization_form_is_matched_only_exactly_and_suggested_with_code_points():
    nfc, nfd = "hc-gr\u00fcppe", "hc-gru\u0308ppe"
    assert require_group_id(nfd) == nfd  # a group may really be named so: not refused, but never folded
    assert similar_group_ids(nfd, [nfc, "hc-other"]) == [nfc]
    hint = describe_similar(nfd, [nfc])
    assert hint == "similar ids: 'hc-grüppe' (at character 6 it has U+00FC where the given id has U+0075 U+0308)"
    # a Cyrillic look-alike prints identically too; an ASCII typo is visible and shown plainly
    assert "U+0435" in describe_similar("orders-\u0435u", ["orders-eu"])
    assert describe_similar("ordres", ["orders"]) == "similar ids: 'orders'"


def test_approvers_with_invisible_characters_are_refused_and_look_alikes_count_as_the_same_person():
    with pytest.raises(ChangeControlError):
        parse_users(["alice\u00a0b"])  # prints as "alice b"
    with pytest.raises(ChangeControlError, match="approver 'alice\\\\u200b' .*U\\+200B ZERO WIDTH SPACE"):
        parse_users("bob, alice\u200b")
    with pytest.raises(ChangeControlError, match="U\\+FE0F"):
        parse_users(["carol\ufe0f"])
    assert parse_users(["alice", "bob"]) == ("alice", "bob")
    # four eyes fails closed: the triggering user's id typed decomposed is still that user
    policy = ApprovalPolicy.from_values(approvers=["j\u00fcrgen", "carol"], four_eyes=True)
    assigned = policy.assigned_users("ju\u0308rgen")
    assert assigned == [{"id": "carol", "name": "carol"}]
    with pytest.raises(ChangeControlError, match="Self-approval refused"):
        ApprovalPolicy.from_values(four_eyes=True).check_response("Approve", {"id": "ju\u0308rgen"}, "j\u00fcrgen")


def test_the_forms_refuse_lookalike_approvers_and_a_controller_name_with_a_trailing_newline():
    params = ParamsDict(copy.deepcopy({**change_control_params(), **controller_params()}))
    params.validate()
    for key, value in (("approvers", ["alice\u00a0"]), ("approvers", ["al\u200bice"]),
                       ("app_controller", "local\n"), ("app_controller", "l\u043ecal")):
        trial = copy.deepcopy(params)
        with pytest.raises(ParamValidationError, match=f"Invalid input for param {key}"):
            trial[key] = value
            trial.validate()
    assert re.search(CONTROLLER_NAME_FORM_PATTERN, "local") and not re.search(CONTROLLER_NAME_FORM_PATTERN, "l\n")


def test_an_unknown_controller_name_shows_its_code_points_and_not_the_similar_name():
    """The given name by code point, and that a configured name is spelled alike; never which (a refusal names
    nothing of the deployment's registry: issue 45)."""
    registry = ControllerRegistry({}, source="(test)")
    registry.entries["local"] = None  # type: ignore[assignment]  # only the names are read
    with pytest.raises(kafka_errors.Kip848Error) as refused:
        registry.entry("l\u043ecal")  # Cyrillic o
    assert "U+043E" in str(refused.value) and "a configured name is spelled alike" in str(refused.value)
    assert "'local'" not in str(refused.value)


# -- class 8, the pure parts ---------------------------------------------------------------------------------------


class Conn:
    conn_id = "kafka_x"
    host = "broker:9092"
    port = None
    login = password = None

    def __init__(self, **extra):
        self.extra_dejson = extra


@pytest.mark.parametrize("extra, fragment", [
    ({"request_timeout_ms": "30s"}, "not '30s'"), ({"request_timeout_ms": 0}, "not 0"),
    ({"request_timeout_ms": -5}, "not -5"), ({"request_timeout_ms": True}, "not True"),
    ({"request_timeout_ms": "1e400"}, "not '1e400'"),
    ({"security_protocol": "SSL", "ssl_cafile": "~nobody-kip848-x/ca.pem"}, "has no user 'nobody-kip848-x'"),
])
def test_extras_that_cannot_be_read_are_invalid_client_settings_naming_the_connection(extra, fragment):
    with pytest.raises(kafka_errors.InvalidClientSettings) as refused:
        settings_from_connection(Conn(**extra))
    assert fragment in str(refused.value) and "Connection 'kafka_x'" in str(refused.value)
    assert not refused.value.retriable
    assert settings_from_connection(Conn(request_timeout_ms="15000")).request_timeout_ms == 15000
    with pytest.raises(kafka_errors.InvalidClientSettings):
        ClientSettings("b:9092", request_timeout_ms=0)


@pytest.mark.parametrize("value", ["2m", 0, -1, "nan"])
def test_a_cli_timeout_that_cannot_be_read_is_refused(value):
    with pytest.raises(kafka_errors.InvalidClientSettings, match="cli_timeout"):
        cli_timeout_from_extra({"cli_timeout": value}, "kafka_x")
    assert cli_timeout_from_extra({}, "kafka_x") == 120


@pytest.mark.parametrize("location", ["", "   ", "file://", "~nobody-kip848-x/snapshots/a.json"])
def test_an_artifact_location_that_names_no_place_is_artifact_unwritable(location):
    with pytest.raises(kafka_errors.ArtifactUnwritable):
        storage.write_text(location, "{}")


def test_the_controllers_reason_is_read_from_the_response_a_client_printed():
    """kafka-python raises UpdateFeatures' top-level error with the request and response printed in its message;
    the controller's reason is only there."""
    exc = kerr.InvalidUpdateVersionError(
        "Request 'UpdateFeaturesRequest_v1(timeout_ms=60000, ...)' failed with response 'UpdateFeaturesResponse_v1("
        "throttle_time_ms=0, error_code=96, error_message='Invalid metadata.version 26. Refusing to perform the "
        "requested downgrade because it might delete metadata information.', results=[])'.")
    assert broker_reason(exc).startswith("Invalid metadata.version 26. Refusing")
    error = translate_kafka_python(exc, ClientSettings("b:9092"))
    assert isinstance(error, kafka_errors.InvalidFeatureLevel) and "Refusing to perform the requested downgrade" in str(error)
    assert "Request '" not in str(error) and not error.retriable
    wrapped = RuntimeError("the call failed")
    wrapped.__cause__ = exc
    assert broker_reason(wrapped).startswith("Invalid metadata.version 26")
