"""When the first member of a classic group may switch to the consumer protocol, and which brokers need the wait.

The online upgrade converts a classic group to a consumer group when the first
``ConsumerGroupHeartbeat`` reaches it; the conversion takes over each classic
member's assignment and the group's generation. Kafka 4.x before 4.3.3 and
4.4.1 gets two moments wrong:

- **generation 0** (KAFKA-21581, KAFKA-21584): the classic group has not
  finished its first rebalance (members joined, no assignment yet; a long
  ``group.initial.rebalance.delay.ms`` keeps it there). Seen on a real 4.4.0
  broker (``tests/integration/test_upgrade_window.py``): the coordinator's
  ``ConsumerGroup.fromClassicGroup`` throws ``NoSuchElementException``, the
  consumer-protocol member gets a fatal ``UNKNOWN_SERVER_ERROR``, the classic
  members' JoinGroup ``REBALANCE_IN_PROGRESS`` and the group stays in
  PreparingRebalance past its delay. The JIRA reports name "member epoch 0
  returned" for the same window.
- **a rebalance in progress** (KAFKA-21582): PreparingRebalance or
  CompletingRebalance, for instance while a static member replaces itself: the
  converted group keeps a stale target assignment.

So before the first member switches, every classic group must be **Stable at
generation >= 1 with no rebalance in progress**: :func:`upgrade_window` judges
that from :class:`UpgradeWindowFacts`. DescribeGroups gives the state and the
members but not the generation; the generation is the coordinator's own
``GroupMetadata`` record in ``__consumer_offsets`` (written when a rebalance
completes, :mod:`..group_records`), read between two descriptions so that a
rebalance starting during the read is seen. A fact that cannot be read (no
READ on ``__consumer_offsets``, a coordinator not answering, a record missing
or disagreeing with the description) is ``unknown``: the caller waits and
then fails, it never opens the window on a guess.

:func:`check_upgrade_bug_windows` is the preflight's side: which broker
releases have these bugs (and KAFKA-21176 of the way back, with the open PR
apache/kafka#23514), which fix them, and on affected brokers what the guard
protects. Pure: facts in, verdicts out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from airflow_provider_kip848.kafka.model import GroupState, GroupType
from airflow_provider_kip848.kafka.rules.preflight_model import PASS, WARN, Check, release_tuple


class Window(StrEnum):
    """``open``: the first member may switch now; ``wait``: not now (a rebalance, generation 0); ``unknown``: the
    facts could not be established (wait, then fail)."""

    OPEN = "open"
    WAIT = "wait"
    UNKNOWN = "unknown"


#: the bugs of the online classic -> consumer upgrade that the window guards against
UPGRADE_BUGS = "KAFKA-21581/KAFKA-21584 (generation 0) and KAFKA-21582 (a rebalance in progress)"


@dataclass(frozen=True)
class UpgradeWindowFacts:
    """One group, read for :func:`upgrade_window`. ``group_type`` None: no such group. ``members``: the member ids
    described before the records were read; ``generation`` and ``record_members``: the coordinator's last
    ``GroupMetadata`` record (None: none found); ``state_after``/``members_after``: described again after the
    read (None: not read, the first description settled it). ``error``: why a fact could not be read, and whether
    reading again can help (``retriable``: a coordinator failing over can; a refused READ cannot)."""

    group_id: str
    group_type: GroupType | None
    state: GroupState
    members: tuple[str, ...] = ()
    generation: int | None = None
    record_members: int | None = None
    state_after: GroupState | None = None
    members_after: tuple[str, ...] | None = None
    error: str | None = None
    retriable: bool = True

    def to_dict(self) -> dict[str, object]:
        return {"group_id": self.group_id, "type": None if self.group_type is None else self.group_type.value,
                "state": self.state.value, "members": len(self.members), "generation": self.generation,
                "record_members": self.record_members,
                "state_after": None if self.state_after is None else self.state_after.value, "error": self.error}


@dataclass(frozen=True)
class UpgradeWindow:
    """The verdict on one group: ``window`` and why (``reason``, Kafka's words). ``retriable`` False: an
    ``unknown`` that waiting cannot resolve (a refused read)."""

    group_id: str
    window: Window
    reason: str
    generation: int | None = None
    retriable: bool = True

    def to_dict(self) -> dict[str, object]:
        return {"group_id": self.group_id, "window": self.window.value, "reason": self.reason,
                "generation": self.generation, "retriable": self.retriable}


_REBALANCING = (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)


def upgrade_window(facts: UpgradeWindowFacts) -> UpgradeWindow:
    """Whether the first member of ``facts.group_id`` may switch to the consumer protocol now (see the module)."""
    g = facts.group_id

    def verdict(window: Window, reason: str) -> UpgradeWindow:
        return UpgradeWindow(g, window, reason, facts.generation, facts.retriable)

    if facts.error is not None:
        return verdict(Window.UNKNOWN, f"the group's state or generation cannot be read: {facts.error}")
    if facts.group_type is None:
        return verdict(Window.OPEN, "no such group: its first member creates it on the new protocol")
    if facts.group_type is not GroupType.CLASSIC:
        return verdict(Window.OPEN, f"a {facts.group_type.value} group: no classic group is converted")
    if facts.state is GroupState.EMPTY and not facts.members:
        return verdict(Window.OPEN, "an empty classic group: it converts offline, no member's assignment is taken over")
    generation = "unknown" if facts.generation is None else facts.generation
    if facts.state in _REBALANCING:
        bug = "KAFKA-21581/KAFKA-21584" if facts.generation in (None, 0) else "KAFKA-21582"
        return verdict(Window.WAIT, f"a rebalance is in progress (state {facts.state.value}, last completed "
                                    f"generation {generation}): an upgrade now hits {bug}")
    if facts.state is not GroupState.STABLE:
        return verdict(Window.UNKNOWN, f"state {facts.state.value}: neither Stable nor rebalancing")
    if facts.generation is None:
        return verdict(Window.UNKNOWN, "no GroupMetadata record of the group in __consumer_offsets: its generation "
                                       "cannot be read")
    if facts.generation < 1:
        return verdict(Window.WAIT, "generation 0: the group's first rebalance is not done (KAFKA-21581/KAFKA-21584)")
    if facts.state_after is None or facts.members_after is None:
        return verdict(Window.UNKNOWN, "the group was not described again after its records were read")
    if facts.state_after is not GroupState.STABLE or set(facts.members_after) != set(facts.members):
        return verdict(Window.WAIT, f"a rebalance began while the records were read (state now "
                                    f"{facts.state_after.value}, {len(facts.members_after)} member(s) were "
                                    f"{len(facts.members)}): KAFKA-21582")
    if facts.record_members != len(facts.members):
        return verdict(Window.UNKNOWN, f"the coordinator's last GroupMetadata record (generation {facts.generation}, "
                                       f"{facts.record_members} member(s)) disagrees with its description "
                                       f"({len(facts.members)} member(s))")
    return verdict(Window.OPEN, f"Stable at generation {facts.generation} with {len(facts.members)} member(s), no "
                                "rebalance in progress")


# -- the preflight: which releases have the bugs ---------------------------------------------------------------

#: the first fixed release of each line that has one (4.3.3, 4.4.1; 4.5.0 and later carry the fixes)
FIXED_IN: dict[tuple[int, ...], tuple[int, ...]] = {(4, 3): (4, 3, 3), (4, 4): (4, 4, 1)}
FIRST_FIXED_LINE: tuple[int, ...] = (4, 5)


def _fixed(release: str, declared: str | None) -> bool | None:
    """True when brokers reporting ``release`` (major.minor, as the protocol tells it) run a fixed release; False
    when affected; None when only the patch release could tell (4.3, 4.4 without a declared version)."""
    line = release_tuple(release)[:2]
    if line >= FIRST_FIXED_LINE:
        return True
    first = FIXED_IN.get(line)
    if first is None:
        return False  # 4.0 to 4.2: no fixed release in those lines
    if declared and release_tuple(declared)[:2] == line:
        return release_tuple(declared) >= first
    return None


def _fix_name(release: str) -> str:
    first = FIXED_IN.get(release_tuple(release)[:2])
    return ".".join(map(str, first)) if first else "4.3.3, 4.4.1 or 4.5.0"


def check_upgrade_bug_windows(releases: Iterable[str], declared: str | None, *, downgrade: bool) -> Check:
    """WARN on brokers with the online migration bugs (see the module), naming them, the fixed releases and the
    window the provider guards; PASS on fixed ones. ``downgrade``: the online way back (consumer -> classic),
    whose KAFKA-21176 and PR apache/kafka#23514 are named, not guarded."""
    seen = sorted(set(releases), key=release_tuple)
    verdicts = {r: _fixed(r, declared) for r in seen}
    fixed = "fixed in 4.3.3, 4.4.1 and 4.5.0 (none released as of Kafka 4.4.0)"
    if seen and all(v is True for v in verdicts.values()):
        return Check("upgrade_bug_windows", PASS, f"brokers {', '.join(seen)}"
                     + (f" (declared {declared})" if declared else "") + f": {UPGRADE_BUGS} and KAFKA-21176 are "
                     f"{fixed}")
    affected = [f"{r}{'' if verdicts[r] is False else ' (unless ' + _fix_name(r) + ' or later: declare it)'}"
                for r in seen if verdicts[r] is not True]
    where = f"brokers {', '.join(affected) or 'unknown'}"
    if downgrade:
        return Check("upgrade_bug_windows", WARN,
                     f"{where}: the online consumer -> classic downgrade does not clean up the group's topic index "
                     f"(KAFKA-21176, {fixed}); compaction racing the coordinator's replay can leave a downgraded "
                     "group unloadable ('Group ... is not a consumer group', open PR apache/kafka#23514)",
                     "Checked after the roll (prove_group_loads): the group described from its coordinator, "
                     "and its records in __consumer_offsets replayed as a loading coordinator replays them; the "
                     "way_back_path check says which way back is safer here.")
    return Check("upgrade_bug_windows", WARN,
                 f"{where}: the online classic -> consumer upgrade hits {UPGRADE_BUGS}, {fixed}",
                 "Guarded: before the first member switches (the roll by instance, and once before the platform's "
                 "own roll) every classic group must be Stable at generation >= 1 with no rebalance in progress, "
                 "read from the coordinator (DescribeGroups, and its GroupMetadata record in __consumer_offsets, "
                 "which needs READ on that topic); a static member's replacement is not started during a rebalance. "
                 "The platform's own roll is checked only before it begins. Upgrade the brokers to a fixed release "
                 "when one exists.")


#: the two ways back from a consumer group to classic, as the plan names them
WAY_BACK_PATHS = {
    "online": "online: the instances are rolled back to classic one by one while the group stays (no downtime; "
              "the broker converts the group when the last consumer-protocol member leaves)",
    "offline": "offline: every instance stopped, the group empty, all restarted on classic (downtime from the "
               "first stop to the restart; the broker converts the empty group)",
}


def check_way_back_path(releases: Iterable[str], declared: str | None, *, path: str, policy: str | None,
                        members: int) -> Check:
    """Which way back from consumer to classic this run takes (``path``: online or offline), the known risk of
    each, and which is safer here: PASS when the run takes it, WARN (with the other DAG) when it does not.

    The risks: the online path converts a live group, where KAFKA-21176 (its topic index) sits on brokers before
    4.3.3 / 4.4.1; the offline path costs downtime. Both leave the same records in ``__consumer_offsets`` (a
    classic record, the upgrade's tombstone, the consumer group's records and their tombstones, a classic record:
    seen on a 4.4.0 broker for both), which is what apache/kafka#23514's race needs: the group-load check after
    the way back judges them whichever path was taken. So where the policy allows both, offline is preferred while
    the brokers may carry KAFKA-21176 (it removes the one risk the paths do not share, at the price of the
    downtime), online once they are declared fixed (then the paths share their risks and online has no
    downtime). Where the policy forbids an online downgrade of a group with members, offline is the only way."""
    seen = sorted(set(releases), key=release_tuple)
    fixed = bool(seen) and all(_fixed(r, declared) is True for r in seen)
    policy = policy or "bidirectional"
    online_allowed = policy in ("bidirectional", "downgrade") or members == 0
    shared = ("both leave the consumer group's records that apache/kafka#23514 (open) needs to make a reload "
              "racing the log cleaner fail; the group-load check after the way back judges them")
    brokers = "declared fixed" if fixed else f"these brokers: {', '.join(seen) or 'unknown'}, not declared fixed"
    risks = (f"{WAY_BACK_PATHS['online']}: KAFKA-21176 on brokers before 4.3.3 / 4.4.1 ({brokers}); "
             f"{WAY_BACK_PATHS['offline']}: downtime; {shared}")
    if not online_allowed:
        preferred, why = "offline", f"group.consumer.migration.policy={policy} forbids an online downgrade"
    elif fixed:
        preferred, why = "online", ("the brokers are declared fixed: both paths share their risks and online has "
                                    "no downtime")
    else:
        preferred, why = "offline", ("the policy allows both and the brokers may carry KAFKA-21176: offline avoids "
                                     "the online conversion, the one risk the paths do not share, at the price of "
                                     "the downtime")
    evidence = f"this run takes the {path} way back; {risks}. Safer here: {preferred} ({why})"
    if path == preferred:
        return Check("way_back_path", PASS, evidence)
    other = "kip848_consumer_offline_migration (target_protocol=classic)" if preferred == "offline" else \
        "kip848_consumer_rolling_upgrade (target_protocol=classic)"
    return Check("way_back_path", WARN, evidence,
                 f"Take the {preferred} way back with the {other} DAG unless its "
                 f"{'downtime' if preferred == 'offline' else 'risks'} cannot be accepted; approving this run takes "
                 f"the {path} one.")


__all__ = ["FIXED_IN", "UPGRADE_BUGS", "WAY_BACK_PATHS", "UpgradeWindow", "UpgradeWindowFacts", "Window",
           "check_upgrade_bug_windows", "check_way_back_path", "upgrade_window"]
