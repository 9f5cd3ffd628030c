"""Issue 31, classes 3 and 4, without a cluster: settings that cannot apply, params the DAG does not know.

Class 3: a group config of another group type, a feature action's ignored arguments, a restore onto topics the
group no longer reads (the pure rules; on a real broker: ``tests/integration/test_bad_operator_input.py`` and
``tests/integration/test_settings_that_cannot_apply.py``). Class 4: a run's conf key no Param declares fails the
first task of every example DAG (executed here with the run's context, before anything else of the task runs),
and list-valued arguments given with another separator than the documented one are refused.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol.approvals import ChangeControlError, parse_users
from airflow_provider_kip848.kafka.arguments import topic_list
from airflow_provider_kip848.kafka.errors import ConfigNotApplicable, InvalidArgument, InvalidFeatureLevel
from airflow_provider_kip848.kafka.model import GroupOffsets, GroupType, PartitionOffsets, TopicPartition
from airflow_provider_kip848.kafka.rules.features import refuse_ignored_arguments
from airflow_provider_kip848.kafka.rules.group_configs import parse_group_type, require_applicable
from airflow_provider_kip848.kafka.rules.offsets import topics_read, unread_topics
from airflow_provider_kip848.operators.run_conf import refuse_unknown_keys
from tests.conftest import REPO

C, S, SH, CL = GroupType.CONSUMER, GroupType.STREAMS, GroupType.SHARE, GroupType.CLASSIC


# -- class 3: group configs of another type -------------------------------------------------------------------

@pytest.mark.parametrize("names, group_type, for_type, fragment", [
    (["streams.num.standby.replicas"], C, None, "streams.num.standby.replicas (streams)"),
    (["consumer.session.timeout.ms"], S, None, "consumer.session.timeout.ms (consumer)"),
    (["share.isolation.level"], C, None, "share.isolation.level (share)"),
    (["consumer.session.timeout.ms"], CL, None, "is a classic group, which takes no group configs"),
    (["streams.session.timeout.ms"], CL, None, "is a classic group, which takes no group configs"),
    (["streams.num.standby.replicas"], CL, C, "(for_group_type=consumer)"),
    (["consumer.session.timeout.ms", "streams.num.standby.replicas"], None, None, "different group types"),
    (["streams.num.standby.replicas"], None, C, "(for_group_type=consumer)"),
    (["consumer.session.timeout.ms"], C, CL, "which takes no group configs"),
])
def test_configs_of_another_group_type_are_refused(names, group_type, for_type, fragment):
    with pytest.raises(ConfigNotApplicable) as refused:
        require_applicable("g", names, group_type, for_type)
    assert fragment in str(refused.value) and "for_group_type" in refused.value.remedy


@pytest.mark.parametrize("names, group_type, for_type, applies_to", [
    (["consumer.session.timeout.ms"], C, None, C),
    (["streams.num.standby.replicas", "streams.session.timeout.ms"], S, None, S),
    (["consumer.session.timeout.ms"], CL, C, C),       # a rolling upgrade's carried settings, named
    (["streams.initial.rebalance.delay.ms"], CL, S, S),  # a streams offline migration's, named
    (["consumer.session.timeout.ms"], None, None, C),  # pre-configuring: the keys' own type
    (["share.isolation.level"], None, SH, SH),
    ([], CL, None, CL),                                  # deletes only: always allowed
])
def test_configs_that_apply_pass(names, group_type, for_type, applies_to):
    assert require_applicable("g", names, group_type, for_type) is applies_to


@pytest.mark.parametrize("value", ["consumr", "Consumer", "unknown", 1, True])
def test_for_group_type_parses_strictly(value):
    with pytest.raises(InvalidArgument, match="for_group_type must be one of"):
        parse_group_type(value)
    assert parse_group_type("None") is None and parse_group_type("") is None and parse_group_type("streams") is S


# -- class 3: feature arguments an action ignores ---------------------------------------------------------------

@pytest.mark.parametrize("action, level, kw, error, fragment", [
    ("disable", 1, {}, InvalidFeatureLevel, "takes no level"),
    ("disable", "2", {}, InvalidFeatureLevel, "takes no level"),
    ("upgrade", 1, {"unsafe": True}, InvalidArgument, "upgrade of streams.version ignores it"),
    ("upgrade", 1, {"override_dependent_groups": True}, InvalidArgument, "takes no group's protocol away"),
    ("upgrade", 1, {"allow_empty_dependent_groups": True}, InvalidArgument, "takes no group's protocol away"),
])
def test_feature_arguments_the_action_ignores_are_refused(action, level, kw, error, fragment):
    with pytest.raises(error, match=fragment):
        refuse_ignored_arguments("streams.version", action, level, **kw)


def test_feature_overrides_on_a_feature_without_dependants_are_refused_and_meaningful_ones_pass():
    with pytest.raises(InvalidArgument, match="no group type depends on metadata.version"):
        refuse_ignored_arguments("metadata.version", "downgrade", 20, override_dependent_groups=True)
    for action, level in (("disable", None), ("disable", 0), ("disable", "0"), ("disable", "None"),
                          ("downgrade", 0)):
        refuse_ignored_arguments("streams.version", action, level, unsafe=True, override_dependent_groups=True)


# -- class 3: a restore onto topics the group no longer reads ---------------------------------------------------

def _offsets(*committed: tuple[str, int, int | None]) -> GroupOffsets:
    return GroupOffsets("g", tuple(PartitionOffsets(t, p, c, 0, 10) for t, p, c in committed))


def test_unread_topics_are_those_the_group_has_no_offset_or_assignment_on():
    plan = {TopicPartition("orders", 1): 3, TopicPartition("legacy", 0): 5}
    assert unread_topics(plan, topics_read(_offsets(("orders", 0, 4)))) == ("legacy",)
    # a partition assigned without a commit counts as read
    assert unread_topics(plan, topics_read(_offsets(("orders", 0, 4), ("legacy", 3, None)))) == ()
    # nothing left at all (every offset lost, or the group gone): nothing can be told, everything goes back
    assert unread_topics(plan, topics_read(_offsets())) == ()


# -- class 4: conf keys no Param declares -----------------------------------------------------------------------

def test_unknown_conf_key_names_the_closest_param():
    with pytest.raises(InvalidArgument) as refused:
        refuse_unknown_keys({"dry_rn": True, "group_id": "g"}, ["dry_run", "group_id"], dag_id="d")
    assert "'dry_rn' (did you mean 'dry_run'?)" in str(refused.value) and "of DAG d" in str(refused.value)
    with pytest.raises(InvalidArgument, match="'zzz'[.]"):
        refuse_unknown_keys({"zzz": 1}, ["dry_run"])
    refuse_unknown_keys({"dry_run": True}, ["dry_run"])


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}, bag.import_errors
    return bag


def test_every_example_dag_fails_an_unknown_conf_key_at_its_first_task(dagbag):
    """Each root task of each DAG is executed with a run whose conf has ``dry_rn`` (``kafka_con_id`` where the DAG
    has no dry_run): it fails at once (the check
    comes first, before any connection, lock or controller is used), naming the key and the closest Param."""
    assert len(dagbag.dags) == 10
    for dag in dagbag.dags.values():
        roots = [t for t in dag.tasks if not t.upstream_task_ids]
        assert roots, dag.dag_id
        typo, meant = ("dry_rn", "dry_run") if "dry_run" in dag.params else ("kafka_con_id", "kafka_conn_id")
        for task in roots:
            run = SimpleNamespace(conf={typo: True}, run_id="r")
            context = {"dag": dag, "dag_run": run, "params": dag.params.dump(), "ti": SimpleNamespace()}
            with pytest.raises(AirflowFailException) as failed:
                task.execute(context)
            message = str(failed.value)
            assert f"{typo!r} (did you mean {meant!r}?)" in message, (dag.dag_id, task.task_id, message)


# -- class 4: list values with another separator -----------------------------------------------------------------

@pytest.mark.parametrize("value, fragment", [
    ("orders;payments", "holds ';'"), ("orders|payments", "holds '|'"), ("orders payments", "holds a blank"),
    ("orders\npayments", "holds a newline"), ("orders, pay ments", "holds a blank"), ("orders/payments", "'/'"),
    (["orders;payments"], "holds ';'"), (["orders payments"], "holds a blank"),
])
def test_topic_lists_with_another_separator_are_refused(value, fragment):
    with pytest.raises(InvalidArgument, match=fragment) as refused:
        topic_list(value, "source_topics")
    assert "comma-separated (orders,payments)" in refused.value.remedy


def test_topic_lists_in_the_documented_forms_pass():
    assert topic_list("orders, payments", "t") == topic_list(["orders", "payments"], "t") == ["orders", "payments"]
    assert topic_list("['a.b', 'c-d_e']", "t") == ["a.b", "c-d_e"]


@pytest.mark.parametrize("value", ["alice;bob", "alice|bob", ["alice;bob"], ["alice bob"], ["alice,bob"],
                                   ("alice", "bob\ncarol")])
def test_approvers_with_another_separator_are_refused(value):
    with pytest.raises(ChangeControlError, match="approvers has the value"):
        parse_users(value)


def test_approvers_in_the_documented_forms_pass():
    assert parse_users("alice, bob") == parse_users("alice bob") == parse_users(["alice", "bob"]) == ("alice", "bob")


def test_a_refusal_names_the_type_that_decided_it():
    """The type the caller named (for_group_type), or a type this provider cannot read, is what the message says:
    not "a consumer group, which takes no group configs" about a consumer group."""
    with pytest.raises(ConfigNotApplicable, match=r"is set as a classic group \(for_group_type=classic\)"):
        require_applicable("g", ["consumer.session.timeout.ms"], GroupType.CONSUMER, GroupType.CLASSIC)
    with pytest.raises(ConfigNotApplicable, match=r"is of a group type this provider cannot read \(unknown\)"):
        require_applicable("g", ["consumer.session.timeout.ms"], GroupType.UNKNOWN, None)
