"""The group-load rule (apache/kafka#23514) and the way-back path check, on the record shapes a real 4.4.0 broker
wrote (read back with ``logged_records`` from a single-node 4.4.0 broker: the online downgrade, a classic group's
first member converting it and leaving; and the offline way back, classic -> empty -> consumer -> empty ->
classic)."""

from __future__ import annotations

from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.rules.group_load import GroupLoad, LoggedRecord, judge_group_load, replay_failure
from airflow_provider_kip848.kafka.rules.preflight import run_preflight
from airflow_provider_kip848.kafka.rules.preflight_model import PASS, WARN
from airflow_provider_kip848.kafka.rules.upgrade_window import check_way_back_path
from tests.unit.test_preflight_rules import facts as preflight_facts


def _log(*shape: str) -> list[LoggedRecord]:
    """``"2+"``: a GroupMetadata at the next offset; ``"3T"``: a ConsumerGroupMetadata tombstone..."""
    return [LoggedRecord(i, int(s[:-1]), s.endswith("T")) for i, s in enumerate(shape)]


#: the online way back on 4.4.0 (offsets 0-39 of the group's records, offset commits left out as 1+)
ONLINE = _log("2+", "2+", "1+", "1+", "1+", "1+", "2+", "2T", "5+", "5+", "3+", "7+", "7+", "6+", "8+", "8+", "5+",
              "3+", "7+", "7+", "6+", "8+", "8+", "8+", "8+", "8+", "8T", "8T", "8T", "7T", "7T", "7T", "6T", "5T",
              "5T", "5T", "4T", "3T", "2+", "2+")
#: the offline way back on 4.4.0
OFFLINE = _log("2+", "2+", "1+", "1+", "1+", "1+", "2+", "2T", "5+", "3+", "7+", "6+", "8+", "8T", "7T", "5T", "3+",
               "6+", "6T", "4T", "3T", "2+", "2+")


def test_the_way_back_as_written_loads_but_is_exposed_to_a_load_racing_the_cleaner():
    for log in (ONLINE, OFFLINE):
        assert replay_failure(log) is None
        verdict = judge_group_load("g", 7, log)
        assert verdict.status is GroupLoad.EXPOSED and verdict.offsets == (6, 7, 8)
        assert "offset 7" in verdict.evidence and "#23514" in verdict.evidence


def test_the_upgrade_tombstone_gone_while_a_load_read_the_classic_record_is_unloadable():
    # what a load reads when the cleaner took the upgrade's batch (the tombstone and the records it superseded)
    # after the load had read the old classic record: the downgrade's tombstones then reach a classic group
    raced = [r for r in ONLINE if not 7 <= r.offset <= 25]
    verdict = judge_group_load("g", 7, raced)
    assert verdict.status is GroupLoad.UNLOADABLE and verdict.offsets == (6, 26)
    assert "not a consumer group" in verdict.evidence


def test_once_compacted_the_group_is_classic_only_and_loads():
    # one cleaner pass over the way back: the old classic records, the tombstone and the superseded consumer
    # records go; the downgrade's tombstones stay delete.retention.ms, then go too
    compacted = [r for r in ONLINE if r.offset >= 26]
    assert judge_group_load("g", 7, compacted).status is GroupLoad.LOADS
    assert judge_group_load("g", 7, [r for r in compacted if not r.deleted]).status is GroupLoad.LOADS
    # a group created on the consumer protocol and downgraded: no classic record before its consumer records
    assert judge_group_load("g", 7, _log("5+", "3+", "8+", "8T", "5T", "3T", "2+")).status is GroupLoad.LOADS


def test_the_way_back_path_says_both_paths_their_risks_and_the_safer_one():
    online = check_way_back_path(["4.4"], None, path="online", policy="bidirectional", members=2)
    assert online.status == WARN  # affected (or unknown) brokers: offline is safer
    assert "KAFKA-21176" in online.evidence and "downtime" in online.evidence and "#23514" in online.evidence
    assert "Safer here: offline" in online.evidence and "kip848_consumer_offline_migration" in online.remedy
    offline = check_way_back_path(["4.4"], None, path="offline", policy="bidirectional", members=2)
    assert offline.status == PASS and "this run takes the offline way back" in offline.evidence
    fixed = check_way_back_path(["4.4"], "4.4.1", path="online", policy="bidirectional", members=2)
    assert fixed.status == PASS and "Safer here: online" in fixed.evidence
    forbidden = check_way_back_path(["4.4"], "4.4.1", path="offline", policy="upgrade", members=2)
    assert forbidden.status == PASS and "forbids an online downgrade" in forbidden.evidence


def test_both_ways_back_carry_the_path_check_in_their_preflight():
    facts = preflight_facts(release="4.4", gtype=GroupType.CONSUMER)
    for mode, status in (("consumer_to_classic", WARN), ("consumer_to_classic_offline", PASS),
                         ("classic_to_consumer", None)):
        found = [c for c in run_preflight(facts, mode, group_id="g").checks if c.name == "way_back_path"]
        assert [c.status for c in found] == ([status] if status else []), (mode, found)
