"""The pure rules pairing a group's members with the platform's instances (controllers/pairing.py): which identity
an instance carries, which member carries it, and when a member is unaccounted rather than guessed. The waits
that use them run against real brokers in tests/integration/test_member_pairing.py."""

from __future__ import annotations

from airflow_provider_kip848.controllers.pairing import (
    identity,
    migrated_pairing,
    pair_members,
    pairing_basis,
    removable,
)
from airflow_provider_kip848.controllers.protocol import ApplicationStatus, Instance


def member(mid: str, client_id: str = "", host: str = "/10.0.0.9", *, instance_id: str | None = None,
           protocol: str = "consumer", live: bool = True) -> dict[str, object]:
    return {"member_id": mid, "client_id": client_id, "host": host, "instance_id": instance_id, "live": live,
            "protocol": protocol}


def status(*instances: Instance) -> ApplicationStatus:
    return ApplicationStatus(True, tuple(instances), source="test")


def names(pairing) -> tuple[dict[str, str], list[str]]:
    """(member id -> instance) of the paired members, and the unaccounted member ids."""
    return ({str(p.member["member_id"]): p.instance for p in pairing.paired},
            [str(u.member["member_id"]) for u in pairing.unaccounted])


def test_group_instance_id_is_the_strongest_identity_and_a_member_must_carry_it():
    both = Instance("app:app_0", True, client_id="app-0", group_instance_id="app-static-0")
    assert identity(both) == ("instance_id", "app-static-0", "group.instance.id")
    pairing = pair_members([member("m1", "app-0", instance_id="app-static-0"), member("m2", "app-0")],
                           status(both))
    assert pairing.mappable and pairing.basis == "group.instance.id"
    assert names(pairing) == ({"m1": "app:app_0"}, ["m2"]), "the client id alone does not pair with a static one"


def test_client_id_pairs_one_member_per_instance_and_an_instance_without_a_member_is_named():
    pairing = pair_members([member("m0", "app-0")],
                           status(Instance("app:app_0", True, client_id="app-0"),
                                  Instance("app:app_1", True, state="RUNNING", client_id="app-1")))
    assert pairing.basis == "client.id"
    assert names(pairing) == ({"m0": "app:app_0"}, [])
    assert pairing.unpaired == ({"name": "app:app_1", "state": "RUNNING", "running": True},)


def test_a_host_is_an_identity_only_as_an_address():
    by_address = pair_members([member("m0", "x", host="/10.0.0.7"), member("m1", "y", host="/10.0.0.8")],
                              status(Instance("pod-0", True, host="10.0.0.7")))
    assert by_address.basis == "host"
    assert names(by_address) == ({"m0": "pod-0"}, ["m1"])
    by_name = pair_members([member("m0", "x", host="/10.0.0.7")], status(Instance("web-1", True, host="web-1.lan")))
    assert not by_name.mappable and "carry no group.instance.id, client.id or host address" in by_name.basis
    assert removable(by_name) == [], "members that cannot be paired are never forced out"


def test_the_stream_threads_of_one_classic_streams_process_are_one_instance():
    threads = [member(f"t{n}", f"wc-0-StreamThread-{n}-consumer", protocol="classic") for n in (1, 2)]
    pairing = pair_members(threads, status(Instance("wc:wc_0", False, state="STOPPED", client_id="wc-0")))
    assert names(pairing) == ({"t1": "wc:wc_0", "t2": "wc:wc_0"}, [])
    assert pairing.contested == ()
    assert [m["member_id"] for m in removable(pairing)] == ["t1", "t2"], "paired with a stopped instance"
    # the thread suffix is the classic protocol's: a streams-protocol member names its process itself
    other = pair_members([member("s1", "wc-0-StreamThread-1-consumer", protocol="streams")],
                         status(Instance("wc:wc_0", True, client_id="wc-0")))
    assert names(other) == ({}, ["s1"])


def test_an_instance_two_processes_claim_is_contested_and_stays_so():
    st = status(Instance("app:app_0", False, state="STOPPED", client_id="app-0"))
    pairing = pair_members([member("m0", "app-0"), member("stray", "app-0", host="/10.0.0.50")], st)
    assert names(pairing) == ({}, ["m0", "stray"]), "which one the instance runs is not guessed"
    assert pairing.contested == ("app:app_0",)
    assert all("several processes" in u.why for u in pairing.unaccounted)
    assert removable(pairing) == [], "neither is forced out on the platform's word"
    # one of them expired: the other is still not the instance's member within the same wait
    later = pair_members([member("stray", "app-0", host="/10.0.0.50")], st, contested=pairing.contested)
    assert names(later) == ({}, ["stray"]) and later.contested == ("app:app_0",)


def test_a_member_carrying_several_instances_identity_is_unaccounted():
    st = status(Instance("pod-a", False, state="STOPPED", host="10.0.0.7"),
                Instance("pod-b", False, state="STOPPED", host="10.0.0.7"))
    pairing = pair_members([member("m0", "x", host="/10.0.0.7")], st)
    [lost] = pairing.unaccounted
    assert lost.member["member_id"] == "m0" and "identity of 2 instances (pod-a, pod-b)" in lost.why
    assert removable(pairing) == []


def test_a_member_that_left_is_paired_but_is_not_its_instances_live_member():
    st = status(Instance("app:app_0", True, client_id="app-0"))
    pairing = pair_members([member("m0", "app-0", live=False), member("m1", "app-0")], st)
    assert names(pairing) == ({"m0": "app:app_0", "m1": "app:app_0"}, []), "a leaving member is no other process"
    assert [p.member["member_id"] for p in pairing.live_pairs()] == ["m1"]
    alone = pair_members([{"member_id": "m0", "client_id": "app-0", "member_epoch": -2}], st)
    assert alone.paired[0].member["live"] is False and alone.unpaired[0]["name"] == "app:app_0"


def test_a_member_of_an_instance_the_platform_no_longer_lists_is_paired_with_it_gone():
    before = Instance("web-7f9c-abcde", True, host="10.1.0.4")
    pairing = pair_members([member("m0", "x", host="/10.1.0.4"), member("m1", "y", host="/10.1.0.99")],
                           status(), earlier=[before])
    assert pairing.mappable and names(pairing) == ({"m0": "web-7f9c-abcde"}, ["m1"])
    assert pairing.paired[0].state == "gone" and not pairing.paired[0].running
    assert [m["member_id"] for m in removable(pairing)] == ["m0"]
    without = pair_members([member("m0", "x", host="/10.1.0.4")], status())
    assert not without.mappable and "lists no instance" in without.basis


def test_only_members_of_stopped_or_gone_instances_may_be_forced_out():
    st = status(Instance("app:app_0", True, state="RUNNING", client_id="app-0"),
                Instance("app:app_1", False, state="STOPPED", client_id="app-1"))
    pairing = pair_members([member("m0", "app-0"), member("m1", "app-1"), member("x", "debug")], st)
    assert [m["member_id"] for m in removable(pairing)] == ["m1"]


def test_without_a_status_the_members_cannot_be_paired_and_the_approval_says_so():
    assert not pair_members([member("m0", "a")], None).mappable
    unknown = pair_members([member("m0", "a")], ApplicationStatus.unknown("no status command"))
    assert not unknown.mappable and "no status command" in unknown.basis
    assert "session timeout only" in pairing_basis(None)
    assert "paired with the platform's instances by client.id" in pairing_basis(
        status(Instance("a", True, client_id="a")))


def test_the_migrated_rule_over_a_pairing():
    st = status(Instance("app:app_0", True, client_id="app-0"), Instance("app:app_1", True, client_id="app-1"))
    both = [member("m0", "app-0"), member("m1", "app-1")]
    assert migrated_pairing(pair_members(both, st), protocol="consumer").outcome == "ok"
    stand_in = migrated_pairing(pair_members([member("m0", "app-0"), member("x", "debugger")], st),
                                protocol="consumer", since={"x": 0.0})
    assert stand_in.outcome == "failed" and "debugger" in stand_in.message and "listed since 00:00:00Z" in \
        stand_in.message and "app:app_1 (running) has no live member" in stand_in.message
    allowed = migrated_pairing(pair_members([*both, member("x", "debugger")], st), protocol="consumer",
                               allow_foreign=True)
    assert allowed.outcome == "ok" and "foreign members allowed" in allowed.message
    old = migrated_pairing(pair_members([member("m0", "app-0"), member("m1", "app-1", protocol="classic")], st),
                           protocol="consumer")
    assert old.outcome == "pending" and "app:app_1's member m1 is on classic" in old.message
    assert migrated_pairing(pair_members(both, None), protocol="consumer").outcome == "unknown"
