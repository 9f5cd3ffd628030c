"""An empty selection never widens to "everything", and the fleet map must be unambiguous (issue 31, classes 1 and 6).

Against the session broker, on real groups:

* ``KafkaRemoveGroupMembersOperator`` with no selection is refused when the DAG is parsed; lists that come out empty
  remove nobody and say so; a flag that renders false with no ids is refused at run time; every member only with
  ``all_members=True`` (and the result says "every member"). The members are counted before and after each case.
* The fleet DAG's plan task (``fleet_tasks.make_plan``, on a real inventory of the whole broker): empty filters
  without ``all_applications``, both at once, an empty readiness, and a prefix or application that matches no group
  are refused before anything is planned; a group claimed by two applications fails the plan naming both rules;
  an application whose rules match no group is shown in the written plan, and the plan fails (never approvable).
  No change lock is taken and the groups (type, state, committed offsets, configs) are as before.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.fleet import OwnershipNotApprovable
from airflow_provider_kip848.kafka import errors as kafka_errors
from airflow_provider_kip848.kafka.lock import lock_topic
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.operators import fleet_tasks
from airflow_provider_kip848.operators.members import KafkaRemoveGroupMembersOperator
from kip848_harness.clients import ConsumerProcess, consume, create_topics, produce
from tests.conftest import REPO, RecordingTI, wait_until


def _members(admin: KafkaAdmin, group: str) -> list[str]:
    return sorted(m.instance_id or m.member_id for m in admin.describe_group(group).members)


def test_remove_members_never_widens_an_empty_selection(native, bootstrap, kafka_conn, unique, tmp_path):
    topic, group = unique("sel-rm"), unique("sel-rm-group")
    create_topics(bootstrap, {topic: 2})
    members = [ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id=f"c{i}",
                                     session_timeout_ms=60000, instance_id="static-0" if i == 0 else None,
                                     log_file=str(tmp_path / f"c{i}.log")) for i in range(2)]
    wait_until(lambda: len(native.describe_group(group).members) == 2, what="two members")
    for m in members:
        m.kill()  # crashed: their members stay for the 60 s session, nobody rejoins
    before = _members(native, group)
    audit = str(tmp_path / "audit.jsonl")

    # nothing named: refused when the DAG is parsed, never "every member"
    with pytest.raises(kafka_errors.InvalidArgument, match="names no member to remove .* an empty selection never means every"):
        KafkaRemoveGroupMembersOperator(task_id="rm", group_id=group)
    for kwargs, what in [({"all_members": True, "member_ids": ["x"]}, "all_members=True"),
                         ({"all_members": True, "departed_of": "ctl"}, "departed_of and all_members=True"),
                         ({"member_ids": [], "departed_of": "ctl"}, "member_ids / instance_ids and departed_of"),
                         ({"all_members": "yes!"}, "all_members must be true or false")]:
        with pytest.raises(kafka_errors.InvalidArgument, match=what):
            KafkaRemoveGroupMembersOperator(task_id="rm", group_id=group, **kwargs)

    # lists that come out empty (e.g. rendered from an upstream task): nobody removed, and the result says so
    for kwargs in ({"member_ids": []}, {"instance_ids": []}, {"member_ids": [], "instance_ids": ()}):
        result = KafkaRemoveGroupMembersOperator(task_id="rm", group_id=group, audit_log=audit,
                                            **kwargs).execute({"ti": RecordingTI()})
        assert (result["removed"], result["selection"]) == ([], "nobody"), result
        assert "name nobody: nobody was removed" in result["checked"]
        assert _members(native, group) == before

    # ids from a template that renders None (a null Param under native rendering): nobody removed, said so
    rendered = KafkaRemoveGroupMembersOperator(task_id="rm", group_id=group, audit_log=audit,
                                          member_ids="{{ params.member_ids }}")  # type: ignore[arg-type]
    rendered.member_ids = None  # what the template rendered
    result = rendered.execute({"ti": RecordingTI()})
    assert (result["removed"], result["selection"]) == ([], "nobody"), result
    assert _members(native, group) == before

    # a templated flag that renders false, with no ids: refused at run time, nobody removed
    templated = KafkaRemoveGroupMembersOperator(task_id="rm", group_id=group, all_members="{{ params.everyone }}")
    templated.all_members = "False"  # what the template rendered
    with pytest.raises(AirflowFailException, match="names no member to remove") as failed:
        templated.execute({"ti": RecordingTI()})
    assert isinstance(failed.value.__cause__, kafka_errors.InvalidArgument)
    assert _members(native, group) == before

    # the typed API: nobody named, or every member and ids at once, refused before anything is sent
    with pytest.raises(kafka_errors.InvalidArgument, match="names no member: an empty selection never means every member"):
        native.remove_members(group, member_ids=[], instance_ids=())
    with pytest.raises(kafka_errors.InvalidArgument, match="all_members=True and ids at once"):
        native.remove_members(group, all_members=True, instance_ids=["static-0"])
    assert _members(native, group) == before == sorted(before)

    # named ids remove exactly those; every member only when asked for in so many words
    named = KafkaRemoveGroupMembersOperator(task_id="rm", group_id=group, instance_ids=["static-0"],
                                       audit_log=audit).execute({"ti": RecordingTI()})
    assert (named["removed"], named["selection"]) == (["static-0"], "named: static-0")
    assert len(_members(native, group)) == 1
    everyone = KafkaRemoveGroupMembersOperator(task_id="rm", group_id=group, all_members=True,
                                          audit_log=audit).execute({"ti": RecordingTI()})
    assert everyone["selection"] == "every member" and len(everyone["removed"]) == 1
    assert native.describe_group(group).is_empty


# -- the fleet's plan ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fleet_defaults() -> dict:
    """The fleet DAG's Params with their defaults (what a form submitted as is gives the plan task)."""
    spec = importlib.util.spec_from_file_location("kip848_fleet_migration", REPO / "dags" / "kip848_fleet_migration.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag_object.params.dump()


def _fingerprint(admin: KafkaAdmin, groups: list[str]) -> tuple:
    """What a plan may never change: the groups' type and state, committed offsets, configs; no lock topic."""
    facts = {g: (admin.group_listing(g).type.value, admin.describe_group(g).state.value,
                 {str(tp): o for tp, o in admin.group_offsets(g).committed.items()},
                 admin.describe_group_config(g).dynamic) for g in groups}
    locks = {r: admin.topic_exists(lock_topic(r)) for g in groups for r in (f"group:{g}", "fleet:classic_to_consumer")}
    return facts, locks


def _map(path: Path, rules: list[dict]) -> str:
    path.write_text(json.dumps({"version": 1, "rules": rules}))
    return str(path)


@pytest.fixture
def ownership_dir(tmp_path, monkeypatch) -> Path:
    """The deployment's ownership folder ([kip848] ownership_dir) and artifact location, both the test's own."""
    folder = tmp_path / "ownership"
    folder.mkdir()
    monkeypatch.setenv("AIRFLOW__KIP848__OWNERSHIP_DIR", str(folder))
    monkeypatch.setenv("KIP848_ARTIFACTS_URL", str(tmp_path / "reports"))
    return folder


def test_the_fleet_plan_refuses_empty_or_unmatched_selections_and_an_ambiguous_map(native, bootstrap, kafka_conn, controllers,
                                                                                 unique, tmp_path, fleet_defaults,
                                                                                 ownership_dir):
    p = unique("selfleet") + "-"
    topic = p + "topic"
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, (f"v{i}" for i in range(3)))
    groups = [f"{p}orders-1", f"{p}pay-1", f"{p}shared-1"]
    for group in groups:  # offset-only classic groups: ready online, owned by the maps below
        assert consume(bootstrap, group, [topic], 3, group_protocol="classic")
    good = [{"prefix": f"{p}orders-", "app": "orders", "team": "commerce"},
            {"prefix": f"{p}pay-", "app": "payments", "team": "finance"},
            {"prefix": f"{p}shared-", "app": "shared", "team": "platform"}]
    good_map = Path(_map(ownership_dir / "good.json", good)).name
    before = _fingerprint(native, groups)
    ctx = {"run_id": "manual__selection", "ti": RecordingTI()}

    def plan(**overrides) -> dict:
        params = {**fleet_defaults, "kafka_conn_id": kafka_conn, "ownership_variable": None,
                  "ownership_file": good_map, **overrides}
        return fleet_tasks.make_plan(params, ctx)

    def refused(error: type[kafka_errors.Kip848Error], what: str, **overrides) -> str:
        with pytest.raises(AirflowFailException) as failed:
            plan(**overrides)
        cause = failed.value.__cause__
        assert type(cause) is error and not cause.retriable, f"{type(cause).__name__}: {cause}"
        assert what in str(failed.value), str(failed.value)
        assert cause.remedy and str(failed.value).endswith(cause.remedy)
        return str(failed.value)

    # class 1: a form submitted with empty filters plans nothing; every application only when said in so many words
    refused(kafka_errors.InvalidArgument, "the run selects no application: apps, teams and prefixes are empty")
    refused(kafka_errors.InvalidArgument, "all_applications and prefixes at once", all_applications=True, prefixes=[p])
    refused(kafka_errors.InvalidArgument, "readiness is empty", prefixes=[p], readiness=[])
    refused(kafka_errors.InvalidArgument, f"matched nothing for: prefix '{p}ordrs-' matches no owned group",
            prefixes=[f"{p}orders-", f"{p}ordrs-"])
    refused(kafka_errors.InvalidArgument, "prefixes has an empty or non-text value ''", prefixes=[""])
    assert not (tmp_path / "reports").exists(), "nothing was planned"
    everything = plan(all_applications=True)
    assert "Selection: every application of the ownership map (readiness offline_only, ready_online)." in \
        everything["markdown"]
    assert sorted(a["app"] for a in everything["plan"]["held_back"]) == ["orders", "payments", "shared"]
    some = plan(prefixes=[f"{p}pay-"])
    assert f"Selection: applications owning a group starting with '{p}pay-' (readiness" in some["markdown"]
    assert [a["app"] for a in some["plan"]["held_back"]] == ["payments"]  # no controller: held, never moved

    # class 6: a group two applications claim fails the plan, naming both rules, whatever the run selects
    claimed = _map(ownership_dir / "claimed.json", [*good, {"regex": f"{p}(shared|legacy)-.*", "app": "legacy",
                                                       "team": "platform"}])
    for selection in ({"prefixes": [f"{p}orders-"]}, {"all_applications": True}):
        message = refused(OwnershipNotApprovable, f"group '{p}shared-1' is claimed by 2 applications: rules[2] "
                                                  "(shared), rules[3] (legacy)", ownership_file=Path(claimed).name,
                          **selection)
        assert "Fix the ownership map" in message

    # an application whose rules match no group: in the written plan, which fails (no plan is approvable)
    ghost = _map(ownership_dir / "ghost.json", [*good, {"prefix": f"{p}ghost-", "app": "ghost", "team": "platform"}])
    reports = tmp_path / "reports"
    shutil.rmtree(reports)  # the plans above, of the same run id: the one below is written afresh
    message = refused(OwnershipNotApprovable, f"application 'ghost' (team 'platform') matches no group of the "
                                              f"inventory with rules[3] (prefix '{p}ghost-')",
                      ownership_file=Path(ghost).name, prefixes=[f"{p}orders-"])
    written = sorted(reports.rglob("plan.md"))
    assert len(written) == 1, written
    shown = written[0].read_text()
    assert "### Not approvable: fix the ownership map" in shown and "application 'ghost'" in shown
    plan_json = json.loads(written[0].with_name("plan.json").read_text())
    assert plan_json["plan"]["approvable"] is False and plan_json["plan"]["idle"][0]["app"] == "ghost"
    assert "ghost" in message

    assert _fingerprint(native, groups) == before, "planning changed the cluster or took a lock"


def test_the_fleet_plan_reads_a_map_only_by_its_name_in_the_deployments_folder(native, bootstrap, kafka_conn, controllers,
                                                                             unique, tmp_path, fleet_defaults,
                                                                             ownership_dir, monkeypatch):
    """Issue 45.1: ``ownership_file`` names a map of the deployment's ownership folder ([kip848] ownership_dir),
    never a path. A path up and out, an absolute path, and a link in the folder pointing at a file outside it are
    refused before that file is read: the message shows none of its lines or keys, and names no path of the
    deployment. A Variable without the ownership maps' prefix is refused before it is read. Nothing is planned or
    written, the cluster is as before; the map named by its name plans."""
    p = unique("pathfleet") + "-"
    topic = p + "topic"
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, ["v"])
    group = f"{p}orders-1"
    assert consume(bootstrap, group, [topic], 1, group_protocol="classic")
    rules = [{"prefix": f"{p}orders-", "app": "orders", "team": "commerce"}]
    # files a worker can read outside the folder: a YAML of credentials, a client.properties (its key names and
    # values must never reach a message), and a map that would plan if it were read
    outside = tmp_path / "outside"
    outside.mkdir()
    secrets = outside / "credentials.yaml"
    secrets.write_text("sasl_password_key: hunter2-secret-value\nrules_of_the_vault: [admin]\n")
    properties = outside / "client.properties"
    properties.write_text("sasl.jaas.config=PlainLoginModule required password=\"hunter2\";\n")
    _map(outside / "elsewhere.json", rules)
    (ownership_dir / "link.yaml").symlink_to(secrets)
    (ownership_dir / "link.json").symlink_to(outside / "elsewhere.json")
    before = _fingerprint(native, [group])
    reports = tmp_path / "reports"
    ctx = {"run_id": "manual__paths", "ti": RecordingTI()}
    depth = "../" * len(ownership_dir.parts)

    def refused(name: str, what: str) -> str:
        params = {**fleet_defaults, "kafka_conn_id": kafka_conn, "ownership_variable": None, "ownership_file": name,
                  "prefixes": [f"{p}orders-"]}
        with pytest.raises(AirflowFailException) as failed:
            fleet_tasks.make_plan(params, ctx)
        message = str(failed.value)
        cause = failed.value.__cause__
        assert isinstance(cause, kafka_errors.InvalidArgument) and not cause.retriable, repr(cause)
        assert what in message, message
        for leaked in ("hunter2", "sasl", "vault", "root:", str(ownership_dir)):  # no line, key or deployment path
            assert leaked not in message, (leaked, message)
        return message

    for name in (f"{depth}etc/passwd", "/etc/passwd", str(secrets), str(properties), f"../outside/{secrets.name}",
                 "s3://aws_default@bucket/map.yaml", ".hidden.yaml"):
        refused(name, "is not a plain file name")
    refused("link.yaml", "'link.yaml' leads out of the deployment's ownership folder ([kip848] ownership_dir)")
    # even a link to a valid map: read only what is in the folder itself
    refused("link.json", "'link.json' leads out of the deployment's ownership folder")
    refused("absent.yaml", "There is no ownership map 'absent.yaml' in the deployment's ownership folder")
    # a Variable is named like a file: only one with the ownership maps' prefix, checked before it is read. A
    # Variable of the deployment holding a credential, named by the run, must not reach the plan's errors
    monkeypatch.setenv("AIRFLOW_VAR_TEAM_DB_CREDENTIALS", "sasl_password_key: hunter2-secret-value\n")
    for name in ("team_db_credentials", "kip848_ownership_map/../team_db_credentials", "kip848 map"):
        params = {**fleet_defaults, "kafka_conn_id": kafka_conn, "ownership_variable": name, "ownership_file": None,
                  "prefixes": [f"{p}orders-"]}
        with pytest.raises(AirflowFailException) as failed:
            fleet_tasks.make_plan(params, ctx)
        message = str(failed.value)
        assert "is not the name of an ownership map's Variable: those start with 'kip848_'" in message, message
        assert isinstance(failed.value.__cause__, kafka_errors.InvalidArgument), repr(failed.value.__cause__)
        assert "hunter2" not in message and "sasl" not in message, message
    assert not reports.exists(), "nothing was planned or written"
    assert _fingerprint(native, [group]) == before, "refusing the map changed the cluster or took a lock"

    # the control: the same map, in the folder, named by its name, plans
    _map(ownership_dir / "fleet.json", rules)
    params = {**fleet_defaults, "kafka_conn_id": kafka_conn, "ownership_variable": None, "ownership_file": "fleet.json",
              "prefixes": [f"{p}orders-"]}
    planned = fleet_tasks.make_plan(params, ctx)
    assert [a["app"] for a in planned["plan"]["held_back"]] == ["orders"]  # no controller: held, never moved
    assert len(list(reports.rglob("plan.md"))) == 1
