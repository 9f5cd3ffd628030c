"""Generated bad input against the real broker: the provider refuses it, or does exactly what was asked.

Hypothesis draws arguments for the hook actions (group configs, feature levels, offsets, on both
backends) and for the operators, mixing valid values with the mistakes users make: ids with blanks,
look-alike characters or typos, flags spelled as text, levels and offsets of the wrong type or range.
After each case the cluster's state (finalized features, group configs, committed offsets, the
group listing) is compared with the state before:

* the provider raised one of its own errors (never a raw client exception, never its own cause),
  and nothing changed; or
* the call succeeded and exactly the intended change happened (the configs or offsets of the named,
  existing group, as read back), and nothing else.

Runs are derandomized (the same examples every run) so CI is reproducible; each test also asserts it
really exercised a minimum number of distinct inputs. The hand-picked table is ``test_bad_input.py``
(hook actions) and ``test_bad_operator_input.py`` (operators and sensors).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_kip848.kafka import errors as kafka_errors
from airflow_provider_kip848.kafka.api import GroupAdmin
from airflow_provider_kip848.kafka.cli.backend import KafkaCli
from airflow_provider_kip848.kafka.cli.tools import KafkaTools
from airflow_provider_kip848.kafka.model import GroupType, TopicPartition
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.rules.group_configs import config_group_type
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.features import KafkaFeatureOperator
from airflow_provider_kip848.operators.group_config import KafkaGroupConfigOperator
from airflow_provider_kip848.operators.members import KafkaRemoveGroupMembersOperator
from kip848_harness.clients import ConsumerProcess, consume, create_topics, produce
from tests.conftest import RecordingTI, wait_until

TOPIC = "gen-topic"
EMPTY, BUSY = "gen-empty", "gen-busy"
CONN = "kafka_generated"

#: ids a user types for the real groups: blanks, case, a typo, invisible and look-alike characters
GROUP_IDS = st.one_of(
    st.sampled_from([EMPTY, BUSY, EMPTY + " ", " " + BUSY, EMPTY.upper(), "gen-emtpy", "gen-\u200bempty",
                     "gen-\u0435mpty", "gen-empty\n", "", "   ", "gen-absent",
                     # space-like, invisible, a lone combining mark, another normalization form (issue 31.2)
                     "gen-\u00a0empty", "gen-empty\u3000x", "gen-\u0301empty", "gen-\ufe0fempty",
                     "gen-e\u0301mpty"]),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=6).map(lambda t: "gen-" + t),
)
#: guard-flag values: the real booleans, and what arrives from a form, a template or a typo
FLAGS = st.sampled_from([True, False, "true", "false", "True", "yes", "no", "ture", "", "None", 0, 1, 2, None,
                         [False]])
CONFIG_KEYS = st.sampled_from(["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
                               "streams.num.standby.replicas", "share.isolation.level",
                               "consumer.session.timeout", "session.timeout.ms", "streams.num.standby.replica"])
CONFIG_VALUES = st.one_of(st.integers(-5, 120_000), st.sampled_from(["45000", "45s", "", "read_committed", "dirty"]),
                          st.floats(allow_nan=True), st.booleans(), st.none())
EXAMPLES = {"native": 45, "cli": 8}
#: the type a config change names for its group (issue 31): none, each type, a classic one, typos
FOR_GROUP_TYPES = st.sampled_from([None, None, "consumer", "streams", "share", "classic", "consumr", "", "None"])


@pytest.fixture(scope="module")
def scene(kafka, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """An empty consumer group with commits and a busy one (a live member), shared by every example."""
    bootstrap = kafka.bootstrap_servers
    create_topics(bootstrap, {TOPIC: 2})
    produce(bootstrap, TOPIC, (f"v{i}" for i in range(12)), keys=(f"k{i}" for i in range(12)))
    consume(bootstrap, EMPTY, [TOPIC], 12, group_protocol="consumer")
    work = tmp_path_factory.mktemp("generated")
    busy = ConsumerProcess.start(bootstrap, BUSY, [TOPIC], protocol="consumer", client_id="busy",
                                 log_file=str(work / "busy.log"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(f"AIRFLOW_CONN_{CONN.upper()}", json.dumps({"conn_type": "kafka_admin", "host": bootstrap}))
        try:
            with KafkaAdmin(ClientSettings(bootstrap)) as observer:
                wait_until(lambda: len(observer.describe_group(BUSY).members) == 1, what="busy member")
                # the member commits asynchronously: every example must see the same committed offsets
                wait_until(lambda: sum(observer.group_offsets(BUSY).committed.values()) == 12,
                           what="busy member committed what it read")
                yield {"bootstrap": bootstrap, "observer": observer, "work": work}
        finally:
            busy.stop()


def state(admin: KafkaAdmin, extra_ids: tuple[str, ...] = ()) -> dict[str, Any]:
    """Finalized features, group configs (of the real groups and of the id a case named), committed
    offsets and the group listing: everything a case may not change behind the user's back."""
    watched = {EMPTY, BUSY}
    for group_id in extra_ids:
        if isinstance(group_id, str) and group_id:
            watched.add(group_id)
    # the groups a case could create or remove: its own ids and this module's. Other tests' groups on the
    # worker's broker change on their own (a session expires, a group converts) and are not this test's to judge
    listing = sorted([g.group_id, g.type.value] for g in admin.list_groups()
                     if g.group_id in watched or g.group_id.startswith("gen-"))
    configs = {}
    for group_id in sorted(watched):
        try:
            configs[group_id] = admin.describe_group_config(group_id).dynamic
        except kafka_errors.InvalidGroupId:
            continue  # an id the provider refuses to send cannot have been configured through it
    return {
        "features": {n: f.finalized_level for n, f in admin.describe_features().features.items()},
        "configs": configs,
        "offsets": {g: {str(tp): o for tp, o in admin.group_offsets(g).committed.items()} for g in (EMPTY, BUSY)},
        "listing": listing,
    }


def refused_cleanly(exc: BaseException) -> None:
    """A refusal is one of the provider's errors, with a remedy, and never its own cause."""
    assert isinstance(exc, kafka_errors.Kip848Error), f"a raw {type(exc).__name__} escaped: {exc}"
    assert exc.remedy, f"{type(exc).__name__} says what to do"
    assert exc.__cause__ is not exc


def run_case(observer: KafkaAdmin, ids: tuple[str, ...], call: Callable[[], Any]) -> tuple[dict, dict, Any]:
    """``(state before, state after, result or the refusal)`` of one generated case."""
    before = state(observer, ids)
    try:
        outcome: Any = call()
    except AirflowFailException as failed:  # an operator: the provider's error is the cause
        refused_cleanly(failed.__cause__ or failed)
        outcome = failed.__cause__
    except Exception as exc:  # noqa: BLE001 - whatever escapes is judged: only the provider's errors may
        refused_cleanly(exc)
        outcome = exc
    return before, state(observer, ids), outcome


def backend(scene: dict[str, Any], name: str, kafka_version: str) -> GroupAdmin:
    settings_ = ClientSettings(scene["bootstrap"])
    return scene["observer"] if name == "native" else KafkaCli(settings_, KafkaTools(version=kafka_version))


# -- hook actions -----------------------------------------------------------------------------------


@pytest.mark.parametrize("backend_name", ["native", "cli"])
def test_generated_group_config_changes(scene, kafka_version, backend_name):
    admin, observer, seen = backend(scene, backend_name, kafka_version), scene["observer"], set()

    @given(group_id=GROUP_IDS, set_configs=st.dictionaries(CONFIG_KEYS, CONFIG_VALUES, max_size=2), dry_run=FLAGS,
           allow_absent=FLAGS, for_type=FOR_GROUP_TYPES)
    @settings(max_examples=EXAMPLES[backend_name], derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    def case(group_id, set_configs, dry_run, allow_absent, for_type):
        seen.add(repr((group_id, set_configs, dry_run, allow_absent, for_type)))
        existed = any(g == group_id for g, _ in state(observer)["listing"])
        before, after, outcome = run_case(observer, (group_id,), lambda: admin.alter_group_config(
            group_id, set_configs, dry_run=dry_run, allow_absent_group=allow_absent, for_group_type=for_type))
        if isinstance(outcome, kafka_errors.Kip848Error):
            assert after == before, f"refused ({outcome}) but the cluster changed"
            return
        # accepted: only with real booleans, a usable id, and a known group unless asked otherwise
        assert dry_run in (True, False) and allow_absent in (True, False), "a flag that is not a bool was accepted"
        assert group_id.strip() == group_id and (existed or allow_absent is True)
        # issue 31: every config set is of the type the group has, or the one named (or, not existing, one type)
        if outcome.requested_set:
            applies_to = outcome.for_group_type or outcome.group_type
            assert {config_group_type(k) for k in outcome.requested_set} == {GroupType(applies_to)}, outcome
        expected = json.loads(json.dumps(before))
        if dry_run is False and outcome.applied:
            expected["configs"][group_id] = outcome.after
            assert set(outcome.after) - set(before["configs"][group_id]) <= set(set_configs)
        assert after == expected, "exactly the intended change, and nothing else"

    case()
    assert len(seen) >= EXAMPLES[backend_name] * 0.8, f"only {len(seen)} distinct cases were generated"


@pytest.mark.parametrize("backend_name", ["native", "cli"])
def test_generated_feature_changes(scene, kafka_version, backend_name):
    """Feature changes never run with ``dry_run=False`` here (a generated upgrade would change the shared
    broker for later tests): every case must be a refusal or a validation that changes nothing."""
    admin, observer, seen = backend(scene, backend_name, kafka_version), scene["observer"], set()

    @given(feature=st.sampled_from(["group.version", "streams.version", "share.version", "metadata.version",
                                    "transaction.version", "kraft.version", "bogus.version", " group.version"]),
           level=st.one_of(st.integers(-2, 40), st.sampled_from(["1", "one", "", "4.3-IV0", "9.9-IV9"]), st.none(),
                           st.booleans()),
           action=st.sampled_from(["upgrade", "downgrade", "disable", "Upgrade", "rollback", ""]),
           dry_run=FLAGS.filter(lambda v: v is not False), unsafe=FLAGS, override=FLAGS)
    @settings(max_examples=EXAMPLES[backend_name], derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    def case(feature, level, action, dry_run, unsafe, override):
        seen.add(repr((feature, level, action, dry_run, unsafe, override)))
        before, after, outcome = run_case(observer, (), lambda: admin.update_feature(
            feature, level, action=action, dry_run=dry_run, unsafe=unsafe, override_dependent_groups=override))
        assert after == before, f"{outcome!r} changed the cluster"
        if not isinstance(outcome, kafka_errors.Kip848Error):
            assert dry_run is True and not outcome.applied
            assert isinstance(unsafe, bool) and isinstance(override, bool)
            lowers = outcome.to_level < outcome.from_level and feature == "group.version"
            assert not lowers or override is True, "group.version lowered under a live consumer group"

    case()
    assert len(seen) >= EXAMPLES[backend_name] * 0.8, f"only {len(seen)} distinct cases were generated"


def test_generated_offset_commits(scene):
    observer, seen = scene["observer"], set()
    partitions = st.builds(TopicPartition, st.sampled_from([TOPIC, "gen-missing-topic"]), st.integers(-1, 3))

    @given(group_id=GROUP_IDS,
           offsets=st.one_of(st.dictionaries(partitions, st.one_of(st.integers(-3, 16), st.sampled_from(["5", None])),
                                             max_size=2),
                             st.sampled_from([{f"{TOPIC}:0": 1}, [(TOPIC, 0, 1)], "gen-topic:0=1", None])),
           dry_run=FLAGS)
    @settings(max_examples=40, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    def case(group_id, offsets, dry_run):
        seen.add(repr((group_id, offsets, dry_run)))
        before, after, outcome = run_case(observer, (), lambda: observer.alter_group_offsets(group_id, offsets,
                                                                                           dry_run=dry_run))
        if isinstance(outcome, kafka_errors.Kip848Error):
            assert after == before, f"refused ({outcome}) but the cluster changed"
            return
        assert dry_run in (True, False) and group_id.strip() == group_id
        expected = json.loads(json.dumps(before))
        if dry_run is False and offsets:
            assert group_id == EMPTY, "offsets committed for a group with members, or a group that is not there"
            expected["offsets"][group_id].update({str(tp): o for tp, o in offsets.items()})
        assert after == expected, "exactly the intended commit"

    case()
    assert len(seen) >= 32, f"only {len(seen)} distinct cases were generated"


# -- operators ------------------------------------------------------------------------------------------


def test_generated_operator_arguments(scene):
    """Operators: refused when the DAG is parsed, or failed at once with the provider's error, or the
    intended change; never a raw exception, never a retry of bad input."""
    observer, work, seen = scene["observer"], scene["work"], set()

    @given(kind=st.sampled_from(["config", "feature"]), group_id=GROUP_IDS,
           set_configs=st.dictionaries(CONFIG_KEYS, CONFIG_VALUES, max_size=1), dry_run=FLAGS,
           allow_absent=FLAGS, backend_name=st.sampled_from(["native", "native", "jvm", ""]),
           level=st.one_of(st.integers(-1, 3), st.sampled_from(["1", "x"])),
           action=st.sampled_from(["upgrade", "downgrade", "disable", "downgade"]))
    @settings(max_examples=35, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    def case(kind, group_id, set_configs, dry_run, allow_absent, backend_name, level, action):
        seen.add(repr((kind, group_id, set_configs, dry_run, allow_absent, backend_name, level, action)))
        common = {"kafka_conn_id": CONN, "backend": backend_name, "audit_log": str(work / "audit.jsonl")}

        def build_and_run() -> Any:
            if kind == "config":
                task: Any = KafkaGroupConfigOperator(task_id="cfg", group_id=group_id, set_configs=set_configs,
                                                     dry_run=dry_run, allow_absent_group=allow_absent, **common)
            else:  # never a real feature change on the shared broker: dry runs only
                task = KafkaFeatureOperator(task_id="feat", feature="share.version", level=level, action=action,
                                            dry_run=True if dry_run is False else dry_run, **common)
            return task.execute({"ti": RecordingTI()})

        before, after, outcome = run_case(observer, (group_id,), build_and_run)
        if isinstance(outcome, kafka_errors.Kip848Error):
            assert not outcome.retriable, f"bad input marked retriable: {outcome}"
            assert after == before, f"refused ({outcome}) but the cluster changed"
            return
        assert backend_name == "native"
        if kind == "feature":
            assert after == before
            return
        assert group_id.strip() == group_id
        expected = json.loads(json.dumps(before))
        if outcome.get("applied") and not outcome.get("dry_run"):
            expected["configs"][group_id] = outcome["after"]
        assert after == expected, "exactly the intended change, and nothing else"

    case()
    assert len(seen) >= 28, f"only {len(seen)} distinct cases were generated"


def test_generated_member_selections_never_widen_to_every_member(scene):
    """``KafkaRemoveGroupMembersOperator`` with selections that name nobody (no ids, empty lists, a flag that is not
    true, ids of no member): refused when the DAG is parsed or at run time, or a no-op that says so; the live
    member of the busy group is never removed (issue 31.1)."""
    observer, work, seen = scene["observer"], scene["work"], set()
    ids = st.one_of(st.none(), st.sampled_from([[], (), ["gen-ghost-member"], "gen-ghost-member", [""]]))
    not_true = st.sampled_from([False, "false", "False", "no", 0, "", "None", None, "ture", 2, [True]])

    def members() -> list[str]:
        return sorted(m.member_id for m in observer.describe_group(BUSY).members)

    @given(group_id=st.sampled_from([BUSY, BUSY + " ", "gen-absent"]), member_ids=ids, instance_ids=ids,
           all_members=not_true)
    @settings(max_examples=30, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    def case(group_id, member_ids, instance_ids, all_members):
        seen.add(repr((group_id, member_ids, instance_ids, all_members)))
        before_members = members()

        def build_and_run() -> Any:
            task = KafkaRemoveGroupMembersOperator(task_id="rm", group_id=group_id, member_ids=member_ids,
                                              instance_ids=instance_ids, all_members=all_members,
                                              kafka_conn_id=CONN, audit_log=str(work / "audit.jsonl"))
            return task.execute({"ti": RecordingTI()})

        before, after, outcome = run_case(observer, (), build_and_run)
        assert members() == before_members, f"{(member_ids, instance_ids, all_members)} removed a member"
        assert after == before
        if isinstance(outcome, kafka_errors.Kip848Error):
            assert not outcome.retriable, f"bad input marked retriable: {outcome}"
            return
        assert outcome["removed"] == [] and outcome["selection"] != "every member", outcome
        assert outcome.get("checked") or outcome["not_found"], f"a no-op that does not say so: {outcome}"

    case()
    assert len(seen) >= 24, f"only {len(seen)} distinct cases were generated"
