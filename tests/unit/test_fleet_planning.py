"""The fleet planning layer (airflow_provider_kip848.fleet), on hand-made inventories: the ownership map's
strict parsing, matching and conflicts; selection (an application moves whole); waves (canary, size, blast
radius, determinism, hashes); the error budget; resumability. The real-broker counterpart is
tests/integration/test_fleet_planning.py."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_kip848.fleet import (
    Application,
    ErrorBudget,
    GroupResult,
    OwnershipError,
    OwnershipMap,
    OwnershipNotApprovable,
    plan_waves,
    remaining,
    select,
)
from airflow_provider_kip848.fleet.selection import IncompleteInventory
from airflow_provider_kip848.fleet.waves import Wave
from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.inventory import GroupInventory, InventoryEntry, InventoryMember, MigrationVerdict
from airflow_provider_kip848.kafka.model import GroupState, GroupType, MemberProtocol
from airflow_provider_kip848.kafka.rules.readiness import Readiness

TAKEN = datetime(2025, 1, 1, tzinfo=UTC)
C2C = "classic_to_consumer"


def entry(gid: str, readiness: str | None = "ready_online", *, gtype: GroupType = GroupType.CLASSIC,
          members: int = 2, migration: str = C2C, reason: str = "", protocols: tuple[MemberProtocol, ...] = ()
          ) -> InventoryEntry:
    protos = protocols or tuple(MemberProtocol.CLASSIC if gtype is GroupType.CLASSIC else MemberProtocol.CONSUMER
                                for _ in range(members))
    mems = tuple(InventoryMember(f"m{i}", f"c{i}", "h", p) for i, p in enumerate(protos))
    verdicts = () if readiness is None else (
        MigrationVerdict(migration, Readiness(readiness), reason or f"{readiness} because", remedy=f"fix {gid}"),)
    return InventoryEntry(group_id=gid, type=gtype, protocol_type="consumer",
                          state=GroupState.STABLE if mems else GroupState.EMPTY, coordinator_id=1,
                          member_count=len(mems), members=mems, assignor="range", offsets=None, verdicts=verdicts)


def inventory(*entries: InventoryEntry, unanswered: dict[int, str] | None = None) -> GroupInventory:
    return GroupInventory(taken_at=TAKEN, entries=tuple(sorted(entries, key=lambda e: e.group_id)), elapsed_s=0.1,
                          unanswered_brokers=unanswered or {})


MAP_YAML = textwrap.dedent("""\
    version: 1
    rules:
      - prefix: orders-
        app: orders
        team: commerce
        app_controller: orders-deployment
        app_controller_args: {namespace: shop, deployment: orders}
        expected_instances: 2
      - regex: "pay-(eu|us)-.*"
        app: payments
        team: commerce
      - prefix: search-
        app: search
        team: discovery
        migration: offline
      - prefix: reco-
        app: reco
        team: discovery
        migration: online
      - prefix: orders-legacy-
        app: legacy
        team: commerce
""")


def ownership() -> OwnershipMap:
    return OwnershipMap.from_text(MAP_YAML, source="map.yaml")


# -- the ownership map: strict parsing ------------------------------------------------------------------------

BAD = {
    "unknown key": ('{"rules": [{"prefix": "a", "app": "a", "team": "t", "owner": "x"}]}',
                    "rules[0]: unknown key(s) 'owner'"),
    "both prefix and regex": ('{"rules": [{"prefix": "a", "regex": "a.*", "app": "a", "team": "t"}]}',
                              "rules[0]: needs exactly one of prefix and regex, got both"),
    "neither prefix nor regex": ('{"rules": [{"app": "a", "team": "t"}]}',
                                 "rules[0]: needs exactly one of prefix and regex, got neither"),
    "invalid regex": ('{"rules": [{"prefix": "a", "app": "a", "team": "t"}, {"regex": "b(", "app": "b", '
                      '"team": "t"}]}', "rules[1].regex: 'b(' is not a valid regular expression"),
    "expected_instances 0": ('{"rules": [{"prefix": "a", "app": "a", "team": "t", "expected_instances": 0}]}',
                             "rules[0].expected_instances: must be a whole number >= 1"),
    "expected_instances true": ('{"rules": [{"prefix": "a", "app": "a", "team": "t", "expected_instances": true}]}',
                                "rules[0].expected_instances"),
    "expected_instances text": ('{"rules": [{"prefix": "a", "app": "a", "team": "t", "expected_instances": "3"}]}',
                                "rules[0].expected_instances"),
    "missing app": ('{"rules": [{"prefix": "a", "team": "t"}]}', "rules[0].app: missing"),
    "empty team": ('{"rules": [{"prefix": "a", "app": "a", "team": ""}]}', "rules[0].team: must be a non-empty"),
    "empty prefix": ('{"rules": [{"prefix": "", "app": "a", "team": "t"}]}', "rules[0].prefix: must be a non-empty"),
    "a module path as controller": ('{"rules": [{"prefix": "a", "app": "a", "team": "t", '
                                    '"app_controller": "subprocess:Popen"}]}',
                                    "rules[0].app_controller: 'subprocess:Popen' is not the name of a controller of "
                                    "the deployment's registry"),
    "a blank in the controller": ('{"rules": [{"prefix": "a", "app": "a", "team": "t", "app_controller": "no name"}]}',
                                  "rules[0].app_controller: 'no name' is not the name of a controller"),
    "args without controller": ('{"rules": [{"prefix": "a", "app": "a", "team": "t", "app_controller_args": {}}]}',
                                "rules[0].app_controller_args: given without app_controller"),
    "args not a mapping": ('{"rules": [{"prefix": "a", "app": "a", "team": "t", "app_controller": "mc", '
                           '"app_controller_args": [1]}]}', "rules[0].app_controller_args: must be a mapping"),
    "bad migration": ('{"rules": [{"prefix": "a", "app": "a", "team": "t", "migration": "classic_to_consumer"}]}',
                      "rules[0].migration: must be one of online, offline"),
    "rule not a mapping": ('{"rules": ["orders-"]}', "rules[0]: must be a mapping, got str"),
    "no rules": ('{"version": 1}', "rules: missing"),
    "rules not a list": ('{"rules": {"prefix": "a"}}', "rules: must be a list of rules, got dict"),
    "empty rules": ('{"rules": []}', "rules: empty"),
    "unknown top key": ('{"rules": [{"prefix": "a", "app": "a", "team": "t"}], "defaults": {}}',
                        "unknown top-level key(s) 'defaults'"),
    "bad version": ('{"version": 2, "rules": [{"prefix": "a", "app": "a", "team": "t"}]}',
                    "version: 2 is not supported"),
    "top level list": ('[{"prefix": "a", "app": "a", "team": "t"}]', "the top level must be a mapping"),
    "json duplicate key": ('{"rules": [{"prefix": "a", "prefix": "b", "app": "a", "team": "t"}]}',
                           "not valid JSON: the key 'prefix' is repeated"),
    "yaml duplicate key": ("rules:\n  - prefix: a\n    app: a\n    app: b\n    team: t\n",
                           "not valid YAML: the key 'app' is repeated"),
    "broken yaml": ("rules: [\n", "is not valid YAML"),
    "broken json": ('{"rules": [}', "is not valid JSON"),
    "empty text": ("", "the top level must be a mapping with 'rules', got null"),
    "app disagreeing on team": ('{"rules": [{"prefix": "a", "app": "x", "team": "t"}, '
                                '{"prefix": "b", "app": "x", "team": "u"}]}',
                                "rules[1].team: application 'x' has 'u' here but 't' in rules[0]"),
    "repeated prefix": ('{"rules": [{"prefix": "a", "app": "x", "team": "t"}, {"prefix": "a", "app": "y", '
                        '"team": "t"}]}', "rules[1]: repeats the prefix 'a' of rules[0]"),
    "whitespace in app": ('{"rules": [{"prefix": "a", "app": " x", "team": "t"}]}', "leading or trailing"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_map_is_refused_with_the_rule_and_field(case):
    text, expected = BAD[case]
    with pytest.raises(OwnershipError) as err:
        OwnershipMap.from_text(text, source="the-var")
    assert expected in str(err.value), str(err.value)
    assert "the ownership map the-var is not valid" in str(err.value)
    assert isinstance(err.value, InvalidArgument) and err.value.problems


def test_every_problem_is_reported_at_once():
    text = json.dumps({"rules": [{"prefix": "a", "app": "a", "team": "t", "colour": 1},
                                 {"regex": "(", "app": "b", "team": "t"},
                                 {"prefix": "c", "app": "c", "team": "t", "expected_instances": -1}]})
    with pytest.raises(OwnershipError) as err:
        OwnershipMap.from_text(text)
    assert [p.split(":")[0] for p in err.value.problems] == ["rules[0]", "rules[1].regex",
                                                             "rules[2].expected_instances"]


def test_a_map_reads_from_yaml_json_and_files(tmp_path):
    m = ownership()
    assert [r.app for r in m.rules] == ["orders", "payments", "search", "reco", "legacy"]
    orders = m.rules[0]
    assert (orders.app_controller, dict(orders.app_controller_args), orders.expected_instances) == (
        "orders-deployment", {"namespace": "shop", "deployment": "orders"}, 2)
    as_json = json.dumps({"rules": [{k: v for k, v in r.to_dict().items() if k != "index" and v not in (None, {})}
                                    for r in m.rules]})
    assert OwnershipMap.from_text(as_json).rules == m.rules
    (tmp_path / "map.yaml").write_text(MAP_YAML)
    (tmp_path / "map.json").write_text(as_json)
    assert OwnershipMap.from_file(tmp_path / "map.yaml").rules == m.rules
    assert OwnershipMap.from_file(tmp_path / "map.json").rules == m.rules
    (tmp_path / "bad.json").write_text("rules: []")  # YAML in a .json file: read as JSON, refused
    with pytest.raises(OwnershipError, match="not valid JSON"):
        OwnershipMap.from_file(tmp_path / "bad.json")
    with pytest.raises(OwnershipError, match="cannot be read"):
        OwnershipMap.from_file(tmp_path / "absent.yaml")
    assert OwnershipMap.from_obj(json.loads(as_json)).rules == m.rules


def test_yaml_tags_that_build_objects_are_refused():
    with pytest.raises(OwnershipError, match="not valid YAML"):
        OwnershipMap.from_text("rules: !!python/object/apply:os.system ['true']\n")


def test_first_rule_wins_and_conflicts_are_reported():
    m = ownership()
    assert m.owner_of("orders-eu").app == "orders"
    assert m.owner_of("orders-legacy-1").app == "orders"  # the first match wins, in file order ...
    assert m.owner_of("pay-eu-1").app == "payments"
    assert m.owner_of("pay-asia-1") is None  # a regex matches the whole id
    assert m.owner_of("xpay-eu-1") is None and m.owner_of("unknown") is None
    conflicts = m.conflicts(["orders-legacy-1", "orders-eu", "pay-eu-1", "orders-legacy-1"])
    assert [(c.group_id, c.rules, c.owner) for c in conflicts] == [  # ... and the overlap is reportable
        ("orders-legacy-1", ((0, "orders"), (4, "legacy")), "orders")]
    assert "rules[0] (orders), rules[4] (legacy)" in conflicts[0].describe()
    assert m.unowned(["orders-1", "zzz", "aaa"]) == ("aaa", "zzz")
    same_app = OwnershipMap.from_text('{"rules": [{"prefix": "a", "app": "x", "team": "t"}, '
                                      '{"regex": "ab.*", "app": "x", "team": "t"}]}')
    assert same_app.conflicts(["abc"]) == ()  # rules of one application overlapping: no conflict


# -- selection -------------------------------------------------------------------------------------------------

def fleet() -> GroupInventory:
    return inventory(
        entry("orders-a"), entry("orders-b", "offline_only", reason="custom_assignor: userData"),
        entry("pay-eu-1"), entry("pay-us-1"),
        entry("search-1"),
        entry("reco-1"), entry("reco-2", "offline_only"),
        entry("legacy-x"),  # unowned: the legacy rule's prefix is orders-legacy-
        entry("stray", "blocked"),
    )


def test_select_judges_each_application_whole():
    sel = select(fleet(), ownership())
    by = {a.app: a for a in sel.applications}
    assert [a.app for a in sel.applications] == ["orders", "payments", "reco", "search"]  # team, app
    assert sel.unowned == ("legacy-x", "stray")  # never guessed
    orders = by["orders"]
    assert (orders.status, orders.path) == ("ready", "offline")  # one offline-only group takes it offline
    assert [(g.group_id, g.readiness, g.path) for g in orders.pending] == [
        ("orders-a", "ready_online", "offline"), ("orders-b", "offline_only", "offline")]
    assert "orders-b is offline_only (custom_assignor: userData)" in orders.reason
    assert (by["payments"].status, by["payments"].path) == ("ready", "online")
    assert (by["search"].path, by["search"].reason) == (
        "offline", "the ownership map asks for the offline path (migration: offline)")
    reco = by["reco"]  # migration: online, but a group is offline only: held back, not taken offline
    assert (reco.status, reco.path) == ("held", None)
    assert "allows only the online path" in reco.reason and "reco-2 is offline_only" in reco.reason
    assert orders.app_controller == "orders-deployment" and orders.expected_instances == 2


@pytest.mark.parametrize("bad", ["blocked", "unknown"])
def test_one_blocked_or_unknown_group_holds_its_application_back(bad):
    inv = inventory(entry("pay-eu-1"), entry("pay-us-1", bad, reason="group.version not finalized"),
                    entry("orders-a"))
    sel = select(inv, ownership())
    pay = sel.application("payments")
    assert pay.status == "held" and pay.pending == (pay.groups[0],)
    assert pay.reason == f"pay-us-1: {bad}: group.version not finalized"
    plan = plan_waves(sel, canary=0)
    assert [a.app for a in plan.held_back] == ["payments"]
    assert "pay-eu-1" not in plan.group_ids and plan.group_ids == ("orders-a",)
    md = plan.render_markdown()
    assert "### Held back" in md and "group.version not finalized" in md and "fix pay-us-1" in md


def test_groups_without_a_verdict_or_mixed_hold_their_application():
    inv = inventory(
        entry("pay-eu-1", "offline_only", migration="classic_to_streams"),  # a Streams app's classic group
        entry("orders-a", gtype=GroupType.CONSUMER, protocols=(MemberProtocol.CONSUMER, MemberProtocol.CLASSIC)),
        entry("search-1", gtype=GroupType.SHARE, readiness=None))
    sel = select(inv, ownership())
    assert "no classic_to_consumer verdict for a classic group (its migrations: classic_to_streams)" in \
        sel.application("payments").reason
    assert "mixed" in sel.application("orders").reason and sel.application("orders").status == "held"
    assert "its migrations: none" in sel.application("search").reason
    streams = select(inv, ownership(), migration="classic_to_streams")
    assert (streams.application("payments").status, streams.application("payments").path) == ("ready", "offline")


def test_migrated_groups_are_skipped_and_whole_applications_named():
    inv = inventory(entry("pay-eu-1", gtype=GroupType.CONSUMER), entry("pay-us-1", gtype=GroupType.CONSUMER),
                    entry("orders-a", gtype=GroupType.CONSUMER), entry("orders-b"))
    sel = select(inv, ownership())
    assert [a.app for a in sel.migrated] == ["payments"]
    orders = sel.application("orders")
    assert orders.status == "ready" and [g.group_id for g in orders.pending] == ["orders-b"]
    plan = plan_waves(sel)
    assert plan.group_ids == ("orders-b",) and [a.app for a in plan.migrated] == ["payments"]
    assert "Already migrated (skipped)" in plan.render_markdown()


def test_selection_filters():
    inv, m = fleet(), ownership()
    assert [a.app for a in select(inv, m, apps=["payments", "search"]).applications] == ["payments", "search"]
    assert [a.app for a in select(inv, m, teams="discovery").applications] == ["reco", "search"]
    assert [a.app for a in select(inv, m, prefixes=["pay-us"]).applications] == ["payments"]
    pay = select(inv, m, prefixes=["pay-us"]).application("payments")
    assert pay.group_ids == ("pay-eu-1", "pay-us-1")  # a prefix selects the application, whole
    online = select(inv, m, readiness=["ready_online"])
    assert [a.app for a in online.ready] == ["payments", "search"]
    assert online.application("orders").status == "held"
    assert "outside the selection's readiness filter (ready_online)" in online.application("orders").reason
    with pytest.raises(InvalidArgument, match="applications 'paymnts' not in the ownership map"):
        select(inv, m, apps=["paymnts"])
    with pytest.raises(InvalidArgument, match="teams 'nobody'"):
        select(inv, m, teams=["nobody"])
    # a look-alike name fails closed and shows the code points that differ (it prints like the real one)
    with pytest.raises(InvalidArgument) as lookalike:
        select(inv, m, apps=["p\u0430yments"])  # Cyrillic 'а'
    assert "applications 'pаyments' (U+0070 U+0430" in str(lookalike.value)
    assert "similar ids: 'payments' (at character 2 it has U+0061 where the given id has U+0430)" in str(lookalike.value)
    with pytest.raises(InvalidArgument, match="readiness 'ready'"):
        select(inv, m, readiness=["ready"])
    with pytest.raises(InvalidArgument, match="migration 'classic_to_share'"):
        select(inv, m, migration="classic_to_share")


def test_an_incomplete_inventory_is_refused_unless_allowed():
    inv = inventory(entry("pay-eu-1"), unanswered={2: "timed out"})
    with pytest.raises(IncompleteInventory, match="node 2: timed out"):
        select(inv, ownership())
    sel = select(inv, ownership(), allow_incomplete=True)
    plan = plan_waves(sel)
    assert not plan.inventory_complete and "not complete" in plan.warnings[0]
    assert "**not complete**" in plan.render_markdown()


def test_expected_instances_differing_is_a_warning_not_a_hold():
    inv = inventory(entry("orders-a", members=3), entry("orders-b", members=2))
    orders = select(inv, ownership()).application("orders")
    assert orders.status == "ready"
    assert orders.warnings == ("orders-a has 3 member(s), the ownership map expects 2 instance(s)",)


def _whole_map_inventory(*extra: InventoryEntry) -> GroupInventory:
    """A group for every application of MAP_YAML (none idle), plus ``extra``."""
    return inventory(entry("orders-a"), entry("pay-eu-1"), entry("search-1"), entry("reco-1"),
                     entry("orders-legacy-2", gtype=GroupType.CONSUMER), *extra)


@pytest.mark.parametrize("filters", [{}, {"apps": ["search"]}, {"teams": ["discovery"]}, {"prefixes": ["pay-"]}])
def test_a_group_claimed_by_two_applications_fails_the_plan_naming_both_rules(filters):
    """The first rule no longer wins silently: whatever the run selects, the map is ambiguous (issue 31.6)."""
    with pytest.raises(OwnershipNotApprovable) as err:
        select(_whole_map_inventory(), ownership(), **filters)
    assert [(c.group_id, c.rules) for c in err.value.conflicts] == [
        ("orders-legacy-2", ((0, "orders"), (4, "legacy")))]
    assert "group 'orders-legacy-2' is claimed by 2 applications: rules[0] (orders), rules[4] (legacy)" in \
        str(err.value)
    assert "Fix the ownership map" in str(err.value) and "Nothing was locked or changed" in str(err.value)
    assert isinstance(err.value, InvalidArgument) and not err.value.retriable


def test_an_application_matching_no_group_is_in_the_plan_which_is_not_approvable():
    m = OwnershipMap.from_text(MAP_YAML.replace("orders-legacy-", "legacy-"), source="map.yaml")
    sel = select(_whole_map_inventory(entry("pay-us-1")), m)  # legacy- matches nothing
    assert [(i.app, i.rules) for i in sel.idle] == [("legacy", ((4, "prefix 'legacy-'"),))]
    plan = plan_waves(sel, canary=0)
    assert plan.waves and not plan.approvable
    assert plan.blockers == ("application 'legacy' (team 'commerce') matches no group of the inventory with "
                             "rules[4] (prefix 'legacy-')",)
    md = plan.render_markdown()
    assert "### Not approvable: fix the ownership map" in md and "application 'legacy'" in md
    assert plan.to_dict()["approvable"] is False and plan.to_dict()["idle"][0]["app"] == "legacy"
    with pytest.raises(OwnershipNotApprovable, match="application 'legacy' .* matches no group"):
        plan.require_approvable()
    # a filter does not hide it: the map is wrong whichever applications a run selects
    assert not plan_waves(select(_whole_map_inventory(entry("pay-us-1")), m, apps=["orders"])).approvable
    whole = plan_waves(select(_whole_map_inventory(entry("legacy-1")), m))
    assert whole.approvable and whole.blockers == () and "Not approvable" not in whole.render_markdown()
    whole.require_approvable()


def test_a_rule_of_a_live_application_matching_nothing_is_a_warning():
    m = OwnershipMap.from_obj({"rules": [{"prefix": "orders-", "app": "orders", "team": "t"},
                                         {"prefix": "ordres-", "app": "orders", "team": "t"}]}, source="m")
    sel = select(inventory(entry("orders-1")), m)
    assert sel.idle == () and any("rules[1] (prefix 'ordres-') of application 'orders' matches no group" in w
                                  for w in sel.warnings)
    assert plan_waves(sel).approvable


@pytest.mark.parametrize("filters, message", [
    ({"apps": []}, "apps is empty: an empty filter selects no applications, it never means every one"),
    ({"teams": ()}, "teams is empty"),
    ({"prefixes": []}, "prefixes is empty"),
    ({"prefixes": [""]}, "prefixes has an empty or non-text value '' (an empty prefix would match every group)"),
    ({"prefixes": ""}, "an empty prefix would match every group"),
    ({"prefixes": ["pay-", "  "]}, "prefixes has an empty or non-text value '  '"),
    ({"apps": ""}, "apps has an empty or non-text value ''"),
    ({"readiness": []}, "readiness is empty: it would hold back every application"),
])
def test_an_empty_filter_is_refused_never_every_application(filters, message):
    with pytest.raises(InvalidArgument) as err:
        select(fleet(), ownership(), **filters)
    assert message in str(err.value) and err.value.remedy


def test_the_selection_says_in_words_what_it_chose_and_what_matched_nothing():
    inv, m = fleet(), ownership()
    assert select(inv, m).scope == "every application of the ownership map"
    assert select(inv, m, apps=["search", "payments"], readiness=["ready_online"]).scope == \
        "applications payments, search (readiness ready_online)"
    sel = select(inv, m, prefixes=["pay-", "ordrs-"], teams=["commerce"])
    assert sel.scope == "teams commerce and applications owning a group starting with 'pay-', 'ordrs-'"
    assert sel.unmatched == ("prefix 'ordrs-' matches no owned group of the inventory",)
    assert select(inv, m, apps=["legacy"]).unmatched == ("application 'legacy' owns no group of the inventory",)
    assert select(inv, m, prefixes=["legacy-"]).unmatched == (  # an unowned group is not the application's
        "prefix 'legacy-' matches no owned group of the inventory",)
    nothing = plan_waves(select(inv, m, apps=["legacy"]))
    md = nothing.render_markdown()
    assert "Selection: applications legacy." in md and "**Nothing selected**" in md and "**Matched nothing**" in md
    assert "Selection: every application of the ownership map." in plan_waves(select(inv, m)).render_markdown()


# -- waves -----------------------------------------------------------------------------------------------------

def big_fleet(sizes: dict[str, int], team_of=lambda app: f"team-{app[-1]}") -> tuple[GroupInventory, OwnershipMap]:
    entries, rules = [], []
    for app, n in sizes.items():
        rules.append({"prefix": f"{app}.", "app": app, "team": team_of(app)})
        entries += [entry(f"{app}.g{i:03d}") for i in range(n)]
    return inventory(*entries), OwnershipMap.from_obj({"rules": rules})


def test_canary_first_with_the_smallest_applications():
    inv, m = big_fleet({"app-a": 5, "app-b": 1, "app-c": 3, "app-d": 1, "app-e": 2})
    plan = plan_waves(select(inv, m), canary=2, wave_size=2, max_groups_per_wave=10)
    assert plan.waves[0].canary and plan.waves[0].apps == ("app-b", "app-d")
    assert [w.apps for w in plan.waves[1:]] == [("app-a", "app-c"), ("app-e",)]
    assert [w.number for w in plan.waves] == [1, 2, 3] and not any(w.canary for w in plan.waves[1:])
    assert plan_waves(select(inv, m), canary=0).waves[0].canary is False


def test_wave_size_and_blast_radius():
    inv, m = big_fleet({"app-a": 4, "app-b": 4, "app-c": 4, "app-d": 30, "app-e": 1, "app-f": 1})
    plan = plan_waves(select(inv, m), canary=1, wave_size=3, max_groups_per_wave=8)
    assert [(w.apps, w.group_count, w.oversized) for w in plan.waves] == [
        (("app-e",), 1, False),  # canary
        (("app-a", "app-b"), 8, False),  # app-c would make 12 groups
        (("app-c",), 4, False),  # app-d is over the limit alone: a wave of its own, flagged
        (("app-d",), 30, True),
        (("app-f",), 1, False)]
    assert "**Oversized**" in plan.waves[3].render_markdown()
    limitless = plan_waves(select(inv, m), canary=0, wave_size=2, max_groups_per_wave=None)
    assert [w.apps for w in limitless.waves] == [("app-a", "app-b"), ("app-c", "app-d"), ("app-e", "app-f")]


def test_an_oversized_smallest_application_is_a_canary_alone():
    inv, m = big_fleet({"app-a": 12, "app-b": 15})
    plan = plan_waves(select(inv, m), canary=2, max_groups_per_wave=10)
    assert [(w.apps, w.canary, w.oversized) for w in plan.waves] == [(("app-a",), True, True),
                                                                     (("app-b",), False, True)]


@pytest.mark.parametrize("kwargs, message", [
    ({"canary": -1}, "canary must be a whole number >= 0"),
    ({"wave_size": 0}, "wave_size must be a whole number >= 1"),
    ({"max_groups_per_wave": 0}, "max_groups_per_wave"),
    ({"parallelism": 0}, "parallelism"),
    ({"wave_size": True}, "wave_size"),
])
def test_bad_limits_are_refused(kwargs, message):
    inv, m = big_fleet({"app-a": 1})
    with pytest.raises(InvalidArgument, match=message):
        plan_waves(select(inv, m), **kwargs)


def test_the_plan_is_deterministic_and_its_hash_tied_to_the_content():
    inv, m = fleet(), ownership()
    plan = plan_waves(select(inv, m))
    shuffled = list(inv.entries)
    random.Random(7).shuffle(shuffled)
    again = plan_waves(select(GroupInventory(taken_at=datetime(2026, 1, 1, tzinfo=UTC), entries=tuple(shuffled),
                                             elapsed_s=9.0), m))
    assert again.plan_hash == plan.plan_hash and again.to_dict()["waves"] == plan.to_dict()["waves"]
    apps_only = plan_waves(list(reversed(select(inv, m).applications)), migration=C2C)
    assert [w.apps for w in apps_only.waves] == [w.apps for w in plan.waves]
    assert len(plan.plan_hash) == 64 and plan.plan_hash in plan.render_markdown()
    assert json.loads(json.dumps(plan.to_dict())) == plan.to_dict()  # plain JSON
    # member counts and reasons change without changing what the plan does: same hash
    varied = inventory(*(InventoryEntry(**{**e.__dict__, "member_count": 7}) for e in inv.entries))
    assert plan_waves(select(varied, m)).plan_hash == plan.plan_hash
    # what the plan does changes: another hash
    assert plan_waves(select(inv, m), parallelism=5).plan_hash != plan.plan_hash
    assert plan_waves(select(inv, m), canary=1).plan_hash != plan.plan_hash
    worse = inventory(*[e for e in inv.entries if e.group_id != "pay-us-1"], entry("pay-us-1", "offline_only"))
    changed = plan_waves(select(worse, m))
    assert changed.plan_hash != plan.plan_hash  # payments now offline
    w_before = {w.apps: w.wave_hash for w in plan.waves}
    w_after = {w.apps: w.wave_hash for w in changed.waves}
    unchanged = [apps for apps in w_before if "payments" not in apps and apps in w_after]
    assert unchanged and all(w_before[a] == w_after[a] for a in unchanged)
    assert all(w_before[a] != w_after[a] for a in w_before if "payments" in a)


def test_the_approver_sees_applications_groups_readiness_and_path():
    plan = plan_waves(select(fleet(), ownership()), canary=1)
    md = plan.waves[0].render_markdown()
    # names are code spans (kafka/inert.py)
    assert "Wave 1 (canary wave)" in md and "| `search` | `discovery` | offline | - | `search-1` |" in md
    assert "**`search`**: the ownership map asks for the offline path" in md
    full = plan.render_markdown()
    assert "| `payments` | `commerce` | online | - | `pay-eu-1` | classic / Stable | 2 | ready_online |" in full
    # the controller the ownership map names (a registry name) and its run arguments: what stops or rolls it
    assert ("| `orders` | `commerce` | offline | `orders-deployment` `{'namespace': 'shop', 'deployment': 'orders'}` | "
            "`orders-b` | classic / Stable | 2 | offline_only |") in full
    assert "orders-b is offline_only (custom_assignor: userData)" in full
    assert "reco" in full and "allows only the online path" in full
    assert "`legacy-x`, `stray`" in full
    d = plan.to_dict()
    assert d["summary"] == {"waves": 2, "applications": 3, "groups": 5, "held_back": 1, "migrated": 0,
                            "unowned": 2}
    assert d["waves"][0]["wave_hash"] == plan.waves[0].wave_hash


app_sizes = st.dictionaries(st.from_regex(r"app-[a-z]{1,4}", fullmatch=True), st.integers(1, 12),
                            min_size=1, max_size=15)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=app_sizes, canary=st.integers(0, 4), wave_size=st.integers(1, 6),
       limit=st.one_of(st.none(), st.integers(1, 15)), seed=st.integers(0, 1000))
def test_every_group_in_exactly_one_wave_and_no_wave_over_the_limits(sizes, canary, wave_size, limit, seed):
    inv, m = big_fleet(sizes)
    plan = plan_waves(select(inv, m), canary=canary, wave_size=wave_size, max_groups_per_wave=limit)
    ids = plan.group_ids
    assert sorted(ids) == sorted(e.group_id for e in inv.entries) and len(set(ids)) == len(ids)
    for w in plan.waves:
        assert w.applications, "no empty wave"
        assert len(w.applications) <= (canary if w.canary else wave_size)
        if limit is not None:
            assert w.group_count <= limit or (w.oversized and len(w.applications) == 1)
            assert w.oversized == (w.group_count > limit)
    assert sum(w.canary for w in plan.waves) == (1 if canary else 0) and (not canary or plan.waves[0].canary)
    if canary:  # the canary holds the smallest applications
        rest = [a.size for w in plan.waves[1:] for a in w.applications]
        assert not rest or max(a.size for a in plan.waves[0].applications) <= min(rest)
    shuffled = list(inv.entries)
    random.Random(seed).shuffle(shuffled)
    again = plan_waves(select(GroupInventory(TAKEN, tuple(shuffled), 0.0), m), canary=canary, wave_size=wave_size,
                       max_groups_per_wave=limit)
    assert again.plan_hash == plan.plan_hash


# -- the error budget ------------------------------------------------------------------------------------------

def waves_of(sizes: dict[str, int], **kw):
    inv, m = big_fleet(sizes)
    return plan_waves(select(inv, m), **kw)


def test_the_error_budget_counts_applications():
    plan = waves_of({"app-a": 2, "app-b": 1, "app-c": 1, "app-d": 1, "app-e": 1}, canary=1, wave_size=4)
    canary, wave = plan.waves
    assert canary.apps == ("app-b",) and wave.apps == ("app-a", "app-c", "app-d", "app-e")
    ok = {g: True for g in wave.group_ids}
    budget = ErrorBudget(max_failed_apps=1)
    v = budget.judge_wave(wave, ok)
    assert v.proceed and v.failed_apps == () and v.rollback_groups == ()
    one = budget.judge_wave(wave, [GroupResult(g, g != "app-a.g001", "state Dead" if g == "app-a.g001" else "")
                                   for g in wave.group_ids])
    assert one.proceed and one.failed_apps == ("app-a",) and dict(one.failed_groups) == {"app-a.g001": "state Dead"}
    assert one.rollback_groups == ("app-a.g000", "app-a.g001")  # the application moves back whole
    assert "1 of 4 application(s) failed (app-a); the budget allows 1 application(s): proceed" in one.reason
    two = budget.judge_wave(wave, {g: not g.startswith(("app-a", "app-c")) for g in wave.group_ids})
    assert not two.proceed and two.failed_apps == ("app-a", "app-c") and "stop the remaining waves" in two.reason
    assert two.succeeded_apps == ("app-d", "app-e")
    silent = budget.judge_wave(wave, {g: True for g in wave.group_ids if not g.startswith("app-e")})
    assert silent.failed_apps == ("app-e",) and "no result" in silent.failed_groups["app-e.g000"]


def test_ratio_both_limits_and_the_canary():
    plan = waves_of({"app-a": 1, "app-b": 1, "app-c": 1, "app-d": 1, "app-e": 1}, canary=1, wave_size=4)
    canary, wave = plan.waves
    assert canary.apps == ("app-a",) and wave.apps == ("app-b", "app-c", "app-d", "app-e")
    two_failed = {g: not g.startswith(("app-b", "app-c")) for g in wave.group_ids}
    assert ErrorBudget(max_failed_apps=None, max_failed_ratio=0.5).judge_wave(wave, two_failed).proceed
    assert not ErrorBudget(max_failed_apps=None, max_failed_ratio=0.25).judge_wave(wave, two_failed).proceed
    assert not ErrorBudget(max_failed_apps=1, max_failed_ratio=0.5).judge_wave(wave, two_failed).proceed
    assert ErrorBudget(max_failed_ratio=1.0, max_failed_apps=None).judge_wave(wave, dict.fromkeys(wave.group_ids,
                                                                                                   False)).proceed
    generous = ErrorBudget(max_failed_apps=5)
    v = generous.judge_wave(canary, {canary.group_ids[0]: False})
    assert not v.proceed and "(canary)" in v.reason and "0 in the canary" in v.reason
    assert ErrorBudget(max_failed_apps=5, canary_max_failed_apps=1).judge_wave(canary,
                                                                               {canary.group_ids[0]: False}).proceed
    assert json.loads(json.dumps(v.to_dict()))["rollback_groups"] == list(canary.group_ids)


def test_bad_budgets_and_foreign_results_are_refused():
    for kwargs in ({"max_failed_apps": None}, {"max_failed_apps": -1}, {"max_failed_ratio": 1.5},
                   {"canary_max_failed_apps": True}):
        with pytest.raises(InvalidArgument):
            ErrorBudget(**kwargs)
    wave = waves_of({"app-a": 1}, canary=0).waves[0]
    with pytest.raises(InvalidArgument, match="which wave 1 does not migrate"):
        ErrorBudget().judge_wave(wave, {"elsewhere": True})
    with pytest.raises(InvalidArgument, match="two results"):
        ErrorBudget().judge_wave(wave, [GroupResult("app-a.g000", True), GroupResult("app-a.g000", False)])
    assert GroupResult.from_dict({"group_id": "g", "ok": False, "detail": "x"}) == GroupResult("g", False, "x")
    with pytest.raises(InvalidArgument):
        GroupResult.from_dict({"group_id": "g", "ok": "yes"})


# -- resumability ----------------------------------------------------------------------------------------------

def test_remaining_skips_what_is_migrated_and_keeps_the_numbering():
    inv, m = big_fleet({"app-a": 2, "app-b": 1, "app-c": 3, "app-d": 1})
    plan = plan_waves(select(inv, m), canary=1, wave_size=2)
    assert [w.apps for w in plan.waves] == [("app-b",), ("app-a", "app-c"), ("app-d",)]
    left = remaining(plan, ["app-b.g000", "app-a.g000", "app-a.g001", "app-c.g000", "not-in-plan"])
    assert left.skipped == ("app-b", "app-a") and left.completed_waves == (1,)
    assert [(w.number, w.apps) for w in left.waves] == [(2, ("app-c",)), (3, ("app-d",))]
    assert left.waves[0].group_ids == ("app-c.g001", "app-c.g002")  # app-c partly done: the rest remains
    assert left.done_groups == ("app-a.g000", "app-a.g001", "app-b.g000", "app-c.g000")
    assert left.plan_hash == plan.plan_hash and not left.complete
    assert remaining(plan, plan.group_ids).complete
    assert remaining(plan, []).waves == plan.waves


def test_remaining_reads_a_fresh_inventory():
    inv, m = big_fleet({"app-a": 1, "app-b": 1, "app-c": 1})
    plan = plan_waves(select(inv, m), canary=1)
    fresh = inventory(entry("app-a.g000", gtype=GroupType.CONSUMER),  # migrated
                      entry("app-b.g000", gtype=GroupType.CONSUMER,  # mixed: not done
                            protocols=(MemberProtocol.CONSUMER, MemberProtocol.CLASSIC)),
                      entry("app-c.g000"))
    left = remaining(plan, fresh)
    assert left.skipped == ("app-a",) and left.done_groups == ("app-a.g000",)
    assert [a for w in left.waves for a in w.apps] == ["app-b", "app-c"]
    # a re-plan from the same fresh inventory names the migrated application as skipped too
    replanned = plan_waves(select(fresh, m), canary=1)
    assert [a.app for a in replanned.migrated] == ["app-a"] and "app-b" in [a.app for a in replanned.held_back]


def test_the_planner_loads_no_airflow():
    code = textwrap.dedent("""
        import sys
        import airflow_provider_kip848.fleet
        print(sorted(m for m in sys.modules if m == "airflow" or m.startswith("airflow.")))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout


def test_applications_are_plain_values():
    app = select(fleet(), ownership()).application("payments")
    assert isinstance(app, Application) and json.loads(json.dumps(app.to_dict()))["groups"][0]["group_id"] == \
        "pay-eu-1"


def test_a_wave_read_back_from_its_dict_has_the_same_content_and_hash():
    plan = plan_waves(select(fleet(), ownership()), canary=1, wave_size=2)
    for wave in plan.waves:
        again = Wave.from_dict(json.loads(json.dumps(wave.to_dict())))
        assert again.wave_hash == wave.wave_hash and again.group_ids == wave.group_ids
        assert again.render_markdown() == wave.render_markdown()


def test_a_wave_dict_whose_hash_does_not_match_its_content_is_refused():
    wave = plan_waves(select(fleet(), ownership()), canary=1, wave_size=2).waves[-1]
    data = wave.to_dict()
    data["applications"][0]["groups"][0]["group_id"] = "someone-else"
    data["applications"][0]["groups"][0]["status"] = "pending"
    with pytest.raises(InvalidArgument, match="does not match"):
        Wave.from_dict(data)


def test_a_wave_without_an_application_keeps_the_others():
    wave = plan_waves(select(fleet(), ownership()), canary=0, wave_size=10).waves[0]
    first = wave.apps[0]
    rest = wave.without([first])
    assert rest.apps == wave.apps[1:] and rest.wave_hash != wave.wave_hash and first not in rest.apps


def test_require_controller_holds_back_a_ready_application_without_one():
    plain = select(fleet(), ownership())
    strict = select(fleet(), ownership(), require_controller=True)
    for app in plain.ready:
        held = strict.application(app.app)
        if app.app_controller:
            assert held.status == "ready"
        else:
            assert held.status == "held" and "no app_controller" in held.reason
    assert any(not a.app_controller for a in plain.ready), "the fixture must have a ready app without a controller"


# -- generated filters (issue 31.1): never wider than asked ---------------------------------------------------------

FILTER_VALUES = st.one_of(st.none(), st.just([]), st.just(()), st.just(""), st.just([""]), st.just(["  "]),
                          st.lists(st.sampled_from(["orders", "payments", "search", "reco", "legacy", "commerce",
                                                    "discovery", "orders-", "pay-", "pay-eu-", "reco-1", "zzz"]),
                                   min_size=1, max_size=3))


@given(apps=FILTER_VALUES, teams=FILTER_VALUES, prefixes=FILTER_VALUES,
       readiness=st.one_of(st.none(), st.just([]), st.sampled_from([["ready_online"], ["offline_only"],
                                                                    ["ready_online", "offline_only"]])))
@settings(max_examples=150, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
def test_generated_filters_select_no_more_than_they_name(apps, teams, prefixes, readiness):
    """Whatever the filters: refused (with a remedy), or every selected application matches every filter that was
    given; an empty filter (or an empty value in one) is always refused, never read as "every application"."""
    inv, m = fleet(), ownership()
    values = [v for v in (apps, teams, prefixes, readiness) if v is not None]
    empty = any(v in ([], (), "") or (isinstance(v, list) and any(not str(x).strip() for x in v)) for v in values)
    try:
        sel = select(inv, m, apps=apps, teams=teams, prefixes=prefixes, readiness=readiness)
    except InvalidArgument as refused:
        assert refused.remedy and not refused.retriable
        return
    assert not empty, f"an empty filter was accepted: {(apps, teams, prefixes, readiness)}"
    everything = {a.app for a in select(inv, m).applications}
    chosen = {a.app: a for a in sel.applications}
    assert set(chosen) <= everything
    for a in chosen.values():
        assert apps is None or a.app in apps
        assert teams is None or a.team in teams
        assert prefixes is None or any(g.startswith(tuple(prefixes)) for g in a.group_ids)
    if apps is None and teams is None and prefixes is None:
        assert set(chosen) == everything and sel.scope.startswith("every application of the ownership map")
    else:
        assert "every application" not in sel.scope
