"""kip848_fleet_migration end to end: five applications of real librdkafka consumers, a canary and two waves.

The fleet: ``a-canary`` (1 group, forced offline), ``b-planted`` (2 groups, online, planted to fail: its
instances refuse to start on the consumer protocol), ``c-good`` (1 group, online), ``d-later`` and
``e-later`` (1 group each, online). With a canary of 1 and waves of 2 applications, the plan is
[a-canary] [b-planted, c-good] [d-later, e-later].

A dry run and a run whose canary wave is rejected change nothing. The first real run migrates the canary and
c-good; b-planted fails, is brought back to classic with its offsets intact, and the error budget (no failed
application) stops wave 3, which never touches d-later or e-later. The team fixes b-planted's configuration in the ownership map; a second run
(the resumption) plans only what is left, skips what is migrated, and finishes the fleet. The runs have two wave
slots (tests/conftest.py), so the three-wave plan's last wave is beyond the run's slots (the first real run says so
in its plan; the budget stops it first either way) and the two-wave resumption fits exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from airflow_provider_kip848.changecontrol.runpaths import ARTIFACTS_ENV
from airflow_provider_kip848.kafka.model import GroupType, MemberProtocol
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.rules.conditions import is_live
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.appcontrol import LocalConsumerFleetAppController
from kip848_harness.clients import create_topics, produce
from kip848_harness.supervised import SupervisedConsumerApp
from kip848_harness.windows import open_window
from tests.conftest import wait_until
from tests.e2e.helpers import approve, reject, run_dag, state

DAG = "kip848_fleet_migration"
#: app -> (number of groups, forced path, planted to fail)
FLEET = {"a-canary": (1, "offline", False), "b-planted": (2, None, True), "c-good": (1, None, False),
         "d-later": (1, None, False), "e-later": (1, None, False)}
#: what makes librdkafka refuse to start a consumer-protocol member (a classic-only setting)
PLANTED = {"consumer": {"session.timeout.ms": "10000"}}
#: the classic members' own session on the test broker: the way back's liveness window (45 s by default)
CLASSIC_SESSION = {"classic": {"session.timeout.ms": "6000", "heartbeat.interval.ms": "500"}}


def ownership(prefix: str, args: dict[str, dict], *, planted: bool = True) -> str:
    """The map names each application's controller from the deployment's registry (the fleet fixture registers
    ``<prefix><app>``, and ``<prefix><app>-planted`` with the setting that makes it fail)."""
    rules = []
    for app, (_, path, bad) in FLEET.items():
        rule = {"prefix": f"{prefix}{app}-", "app": app, "team": "payments",
                "app_controller": f"{prefix}{app}" + ("-planted" if bad and planted else ""),
                "expected_instances": 1}
        if path:
            rule["migration"] = path
        rules.append(rule)
    return yaml.safe_dump({"version": 1, "rules": rules}, sort_keys=False)


def conf(tmp_path: Path, prefix: str, **extra) -> dict:
    return {"prefixes": [prefix], "canary": 1, "wave_size": 2, "max_groups_per_wave": 3, "max_failed_apps": 0,
            "remove_members_after": 2, "empty_settle_seconds": 2, "empty_timeout_minutes": 2,
            "start_timeout_minutes": 0.5, "poll_seconds": 0.5, **open_window(), **extra}


def groups_of(prefix: str, app: str) -> list[str]:
    return [f"{prefix}{app}-g{i}" for i in range(FLEET[app][0])]


def live_protocols(admin: KafkaAdmin, group: str) -> list[MemberProtocol]:
    return [m.protocol for m in admin.describe_group(group).members if is_live(m)]


def settled(admin: KafkaAdmin, groups: list[str]) -> bool:
    for g in groups:
        desc, offsets = admin.describe_group(g), admin.group_offsets(g)
        if desc.state != "Stable" or not desc.members or offsets.total_lag or offsets.uncommitted_with_records:
            return False
    return True


#: the applications that run under a real supervisord, driven by the ``command`` controller: on the worker, and on
#: an application host reached over a real sshd (the rest are the demo's local processes)
SUPERVISED = {"a-canary": None, "c-good": "app_hosts"}


@pytest.fixture
def fleet(bootstrap, unique, tmp_path, controllers, supervisor, sshd, monkeypatch):
    """Five running classic applications (one instance per group), caught up, each registered in the deployment's
    controller registry; stopped afterwards. a-canary (offline) and c-good (online, rolled) run under supervisord,
    c-good's commands over SSH."""
    monkeypatch.setenv("AIRFLOW_CONN_APP_HOSTS", sshd.connection_uri("app_hosts"))
    prefix = unique("fleet") + "-"
    args, started = {}, []
    for app in FLEET:
        topics = {g: f"{g}-in" for g in groups_of(prefix, app)}
        create_topics(bootstrap, {t: 2 for t in topics.values()})
        for t in topics.values():
            produce(bootstrap, t, (f"v{i}" for i in range(40)), keys=(str(i) for i in range(40)))
        args[app] = {"workdir": str(tmp_path / "apps"), "bootstrap_servers": bootstrap,
                     "groups": {g: [t] for g, t in topics.items()}, "instances": 1}
        if app in SUPERVISED:  # one group: one program of the real supervisord
            [(group, topic)] = topics.items()
            controller = SupervisedConsumerApp(supervisor, group, tmp_path / "supervised" / app,
                                               bootstrap_servers=bootstrap, group_id=group, topics=[topic],
                                               instances=1, classic_properties=CLASSIC_SESSION["classic"])
            controller.install("classic")
            controllers.add(f"{prefix}{app}", "command", controller.target(ssh_conn_id=SUPERVISED[app]))
        else:
            controllers.add(f"{prefix}{app}", "local-consumer-fleet-app", args[app])
            controllers.add(f"{prefix}{app}-planted", "local-consumer-fleet-app",
                            {**args[app], "properties": {**PLANTED, **CLASSIC_SESSION}})
            controller = LocalConsumerFleetAppController(**args[app])
        controller.start("classic")
        started.append(controller)
    admin = KafkaAdmin(ClientSettings(bootstrap))
    every = [g for app in FLEET for g in groups_of(prefix, app)]
    wait_until(lambda: settled(admin, every), timeout=120, what="the fleet's classic groups Stable and caught up")
    yield prefix, args, admin
    for c in started:
        c.remove() if isinstance(c, SupervisedConsumerApp) else c.stop()
    admin.close()


def test_fleet_dry_run_rejection_canary_waves_budget_stop_rollback_and_resume(airflow_db, kafka_conn, fleet, tmp_path,
                                                                            monkeypatch):
    """One fleet, four runs: a dry run plans (the plan is the result, no approval asked) and a run whose canary wave
    is rejected touches nothing and runs no later wave (every group stays classic with its instance running); then
    the real run stops at its error budget and rolls its failed application back, and the resumed run finishes the
    fleet. (The refusals ran on a fleet of their own before; the fleet's set-up is the cost, paid once now.)"""
    prefix, args, admin = fleet
    before = {g: admin.group_offsets(g).committed for app in FLEET for g in groups_of(prefix, app)}

    # the refusals: the ownership map from a file of the deployment's ownership folder ([kip848] ownership_dir),
    # named by its name, b-planted misconfigured; reports kept apart (the deployment's artifact location for these
    # runs is another folder: their history is checked on its own, and the real runs' history below holds the real
    # runs only)
    maps = tmp_path / "ownership"
    maps.mkdir()
    monkeypatch.setenv("AIRFLOW__KIP848__OWNERSHIP_DIR", str(maps))
    monkeypatch.setenv(ARTIFACTS_ENV, str(tmp_path / "refused"))
    monkeypatch.setenv("KIP848_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    (maps / "ownership-planted.yaml").write_text(ownership(prefix, args))
    refused = conf(tmp_path, prefix, ownership_file="ownership-planted.yaml")
    run, answers, report = run_dag(DAG, {**refused, "dry_run": True}, decide=approve)
    assert state(run) == "success", report
    assert report["outcome"] == "dry_run" and answers == []
    assert [w["status"] for w in report["waves"]] == ["not_run"] * 3, report["waves"]
    assert report["summary"]["waves_planned"] == 3, report["summary"]

    run, answers, report = run_dag(DAG, refused, decide=reject)
    assert report["outcome"] == "rejected", report
    assert [(a["task_id"], a["option"]) for a in answers] == [("wave_1.approval", "Reject")]
    assert report["applications"] == []
    for app in FLEET:
        for g in groups_of(prefix, app):
            assert admin.group_listing(g).type is GroupType.CLASSIC, g
            assert live_protocols(admin, g) == [MemberProtocol.CLASSIC], g
    history = (tmp_path / "refused" / DAG / "history.jsonl").read_text().splitlines()
    assert len(history) == 1, history  # the dry run is not part of the fleet's history

    # the ownership map from an Airflow Variable (the default source), b-planted misconfigured
    monkeypatch.setenv("AIRFLOW_VAR_KIP848_OWNERSHIP_MAP", ownership(prefix, args))
    monkeypatch.setenv(ARTIFACTS_ENV, str(tmp_path / "report"))
    run, answers, report = run_dag(DAG, conf(tmp_path, prefix), decide=approve)

    assert state(run) == "failed", report  # a stopped fleet is a red run
    assert report and report["outcome"] == "stopped", report
    # one approval per wave that ran, each showing its own applications and hash
    assert [a["task_id"] for a in answers] == ["wave_1.approval", "wave_2.approval"], answers
    assert "a-canary" in answers[0]["body"] and "b-planted" not in answers[0]["body"]
    assert f"| offline | `{prefix}a-canary` |" in answers[0]["body"], "the approver sees the application's controller"
    assert "b-planted" in answers[1]["body"] and "c-good" in answers[1]["body"]
    assert "d-later" not in answers[1]["body"]
    waves = {w["number"]: w for w in report["waves"]}
    assert [waves[n]["status"] for n in (1, 2, 3)] == ["ran", "ran", "stopped"], report["waves"]
    assert waves[1]["verdict"]["proceed"] is True and waves[1]["apps_ok"] == ["a-canary"]
    assert waves[2]["verdict"]["proceed"] is False and waves[2]["apps_failed"] == ["b-planted"]
    assert waves[2]["apps_ok"] == ["c-good"] and waves[3]["stopped_by"] == 2
    # the run has two wave slots (tests/conftest.py): the plan's third wave is beyond them, which the plan says; the
    # report still shows it, stopped by wave 2's budget (waves beyond a run's slots are left to a later run)
    plans = sorted((tmp_path / "report").rglob("plan.json"))
    assert len(plans) == 1, plans
    planned = json.loads(plans[0].read_text())
    assert (planned["slots"], len(planned["plan"]["waves"])) == (2, 3), planned["slots"]
    assert "**1 wave(s) beyond this run's 2 slots**" in plans[0].with_name("plan.md").read_text()
    # the planted application was brought back: classic, running, offsets as before or further
    rollback = [r for w in report["waves"] for r in w["rollbacks"]]
    assert [(r["app"], r["ok"], r["groups_back"]) for r in rollback] == [("b-planted", True, 2)], rollback
    for g in groups_of(prefix, "b-planted"):
        wait_until(lambda g=g: live_protocols(admin, g) == [MemberProtocol.CLASSIC], timeout=60,
                   what=f"{g} running classic again")
        assert admin.group_listing(g).type is GroupType.CLASSIC
        now = admin.group_offsets(g).committed
        assert all(now.get(tp, -1) >= off for tp, off in before[g].items()), (g, before[g], now)
    # wave 3 never ran: its applications are untouched classic groups
    for app in ("d-later", "e-later"):
        for g in groups_of(prefix, app):
            assert admin.group_listing(g).type is GroupType.CLASSIC, g
            assert live_protocols(admin, g) == [MemberProtocol.CLASSIC], g
    # the offline canary's processing gap is measured; the online applications' is not (no stop)
    apps = {a["app"]: a for a in report["applications"]}
    assert apps["a-canary"]["path"] == "offline" and apps["a-canary"]["gap_s"] > 0
    assert apps["c-good"]["path"] == "online" and apps["c-good"]["gap_s"] is None
    assert apps["b-planted"]["outcome"] == "rolled_back" and "wait_migrated" in apps["b-planted"]["detail"]
    assert report["longest_gaps"][0]["app"] in ("a-canary", "b-planted")  # the offline moves, measured
    # every touched group's settling, read from its own records: the offline canary's groups left classic and
    # settled on the consumer protocol, seconds after their first member left; the way back ends classic
    settling = {(g["group_id"], g["during"]): g for g in report["group_settling"]}
    for g in groups_of(prefix, "a-canary"):
        row = settling[(g, "migrate")]
        assert row["error"] is None and row["types"] == ["classic", "consumer"], row
        assert row["settle_s"] is not None and row["settle_s"] > 0 and row["rebalances"] >= 1, row
    for g in groups_of(prefix, "c-good"):
        assert settling[(g, "migrate")]["types"][-1] == "consumer", settling[(g, "migrate")]
    for g in groups_of(prefix, "b-planted"):
        assert settling[(g, "migrate")]["settle_s"] is None, settling[(g, "migrate")]  # never Stable on consumer
        assert settling[(g, "rollback")]["error"] is None and settling[(g, "rollback")]["types"][-1] == "classic"
    assert {k[0] for k in settling} == {g for a in ("a-canary", "b-planted", "c-good") for g in groups_of(prefix, a)}
    # each wave's migrated applications were validated in one Spark application (local mode): their
    # groups' committed offsets against the snapshots, every verdict a pass; b-planted (failed) was not
    validated = {}
    for path in sorted((tmp_path / "report").rglob("validation.json")):
        validated[path.parts[-4]] = json.loads(path.read_text())
    assert sorted(validated) == ["wave_1", "wave_2"], sorted(validated)
    for wave_report in validated.values():
        assert wave_report["passed"] is True and wave_report["context"]["master"].startswith("local")
    assert [g["group_id"] for g in validated["wave_1"]["groups"]] == groups_of(prefix, "a-canary")
    assert [g["group_id"] for g in validated["wave_2"]["groups"]] == groups_of(prefix, "c-good")

    # the team fixes b-planted; the resumed run (ownership map from a file of the folder this time) finishes the fleet
    (maps / "ownership.yaml").write_text(ownership(prefix, args, planted=False))
    run2, answers2, report2 = run_dag(DAG, conf(tmp_path, prefix, ownership_file="ownership.yaml"), decide=approve)

    assert state(run2) == "success", report2
    assert report2["outcome"] == "completed", report2
    planned_apps = [a["app"] for a in report2["applications"]]
    assert sorted(planned_apps) == ["b-planted", "d-later", "e-later"], planned_apps  # the migrated are skipped
    assert {a["outcome"] for a in report2["applications"]} == {"migrated"}
    assert len(answers2) == len(report2["waves"]) == 2
    for app in FLEET:
        for g in groups_of(prefix, app):
            assert admin.group_listing(g).type is GroupType.CONSUMER, g
            assert live_protocols(admin, g) == [MemberProtocol.CONSUMER], g
            now = admin.group_offsets(g).committed
            assert all(now.get(tp, -1) >= off for tp, off in before[g].items()), (g, before[g], now)
    # the fleet's history: both runs, the second ending with every group of the fleet on consumer
    history = [json.loads(line) for line in
               (tmp_path / "report" / DAG / "history.jsonl").read_text().splitlines()]
    assert len(history) == 2, history

