"""Which path of a migration works for one group: ready online, offline only, blocked, or unknown.

The preflight (:mod:`.preflight`) judges one *mode* (the online upgrade, the
offline migration ...) of one group. A fleet inventory asks the question an
operator asks first: for each group, which of the provider's migrations can
run, and by which path? The answer is two preflights of the same facts: the
online mode (members keep consuming while they are rolled) and the offline
mode (stop every instance, the group empties, restart on the new protocol;
an empty group converts under every migration policy). Online passes: ready
online. Only offline passes: offline only, because of the online checks that
failed (a custom assignor's userData, the migration policy, the group size).
Neither passes: blocked, by the offline checks that failed.

Nothing here reads the cluster: the facts are read once for the whole fleet
(:class:`~.preflight.PreflightFacts` with :meth:`~.preflight.PreflightFacts.for_group`)
and every group is judged from them, so an inventory of 10,000 groups sends
no request per group for its verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from airflow_provider_kip848.kafka.model import (
    ConsumerGroupDescription,
    GroupDescription,
    GroupListing,
    GroupType,
)
from airflow_provider_kip848.kafka.rules.preflight import (
    FAIL,
    PASS,
    WARN,
    PreflightFacts,
    PreflightReport,
    run_preflight,
)


class Readiness(StrEnum):
    """The verdict on one migration of one group."""

    #: the online (rolling) migration can run: no instance has to stop
    READY_ONLINE = "ready_online"
    #: only the offline path works (stop every instance, wait for Empty, restart on the new protocol)
    OFFLINE_ONLY = "offline_only"
    #: neither path works until the reason is fixed
    BLOCKED = "blocked"
    #: a fact the verdict needs could not be read (the reason names it): never a guess
    UNKNOWN = "unknown"


#: migration -> (its online preflight mode or None, its offline preflight mode). The streams migrations
#: have no online path: a streams member is refused by a non-empty classic group and vice versa.
MIGRATIONS: dict[str, tuple[str | None, str]] = {
    "classic_to_consumer": ("classic_to_consumer", "classic_to_consumer_offline"),
    "consumer_to_classic": ("consumer_to_classic", "consumer_to_classic_offline"),
    "classic_to_streams": (None, "classic_to_streams"),
    "streams_to_classic": (None, "streams_to_classic"),
}
#: the classic assignor name of Kafka Streams (``StreamsPartitionAssignor.name()``): such a classic group is
#: a Streams application's, which moves to a streams group, never to a consumer group
STREAMS_CLASSIC_ASSIGNOR = "stream"
#: the migrations a group of each type can take
_BY_TYPE: dict[GroupType, tuple[str, ...]] = {
    GroupType.CLASSIC: ("classic_to_consumer", "classic_to_streams"),
    GroupType.CONSUMER: ("consumer_to_classic",),
    GroupType.STREAMS: ("streams_to_classic",),
    GroupType.SHARE: (),
    GroupType.UNKNOWN: tuple(MIGRATIONS),
}


@dataclass(frozen=True)
class MigrationVerdict:
    """The verdict on one migration of one group, with the reason and what to do.

    ``checks`` names the preflight checks behind the verdict that did not pass
    (check name -> ``fail``/``warn``), so a report can link to them.
    """

    migration: str
    readiness: Readiness
    reason: str
    remedy: str = ""
    checks: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"migration": self.migration, "readiness": self.readiness.value, "reason": self.reason,
                "remedy": self.remedy, "checks": dict(self.checks)}


def relevant_migrations(listing: GroupListing | None, description: GroupDescription | None) -> tuple[str, ...]:
    """The migrations the provider runs that apply to a group of this type.

    A classic group with members tells its kind by its assignor: ``stream`` is a
    Kafka Streams application (-> streams), any other a consumer application
    (-> consumer). An *empty* classic group has no assignor (nor any other
    trace of what its members were), so both migrations are judged rather
    than one guessed. Share groups take none; a group whose type is not known
    is judged for all (each verdict then says why it is unknown).
    """
    gtype = description.type if description is not None else (listing.type if listing else GroupType.UNKNOWN)
    if gtype is GroupType.CLASSIC and isinstance(description, ConsumerGroupDescription) and description.members:
        if description.assignor == STREAMS_CLASSIC_ASSIGNOR:
            return ("classic_to_streams",)
        return ("classic_to_consumer",)
    if gtype is GroupType.CLASSIC and listing is not None and listing.protocol_type not in ("consumer", ""):
        return ("classic_to_consumer",)  # Connect and other embedded protocols: the verdict says why not
    return _BY_TYPE[gtype]


def unknown_verdicts(migrations: tuple[str, ...], reason: str) -> tuple[MigrationVerdict, ...]:
    """Every migration of ``migrations`` judged UNKNOWN because of ``reason`` (a fact that could not be read)."""
    return tuple(MigrationVerdict(m, Readiness.UNKNOWN, reason) for m in migrations)


def _not_passed(report: PreflightReport, status: str) -> list[str]:
    return [f"{c.name}: {c.evidence}" for c in report.checks if c.status == status]


def _checks(*reports: PreflightReport) -> dict[str, str]:
    out: dict[str, str] = {}
    for report in reports:
        for c in report.checks:
            if c.status != PASS and out.get(c.name) != FAIL:
                out[c.name] = c.status
    return out


def migration_verdict(facts: PreflightFacts, migration: str, group_id: str, *,
                      declared_broker_version: str | None = None) -> MigrationVerdict:
    """Judge ``migration`` of ``group_id`` from ``facts`` (already narrowed to the group with ``for_group``).

    The offline mode is judged with ``expect_empty=False``: members still
    running are the offline path's first step (stop them), not a reason
    against it.
    """
    online_mode, offline_mode = MIGRATIONS[migration]
    offline = run_preflight(facts, offline_mode, group_id=group_id, declared_broker_version=declared_broker_version,
                            expect_empty=False)
    online = (run_preflight(facts, online_mode, group_id=group_id, declared_broker_version=declared_broker_version)
              if online_mode is not None else None)
    if online is not None and online.passed:
        warnings = _not_passed(online, WARN)
        return MigrationVerdict(migration, Readiness.READY_ONLINE,
                                "every online check passes" + (f" (warnings: {'; '.join(warnings)})" if warnings
                                                               else ""),
                                remedy=online.warnings[0].remedy if online.warnings else "",
                                checks=_checks(online))
    if offline.passed:
        if online is not None:
            failed = online.failures
            return MigrationVerdict(migration, Readiness.OFFLINE_ONLY,
                                    "the online path is refused: " + "; ".join(_not_passed(online, FAIL)),
                                    remedy=failed[0].remedy, checks=_checks(online, offline))
        warnings = _not_passed(offline, WARN)
        return MigrationVerdict(migration, Readiness.OFFLINE_ONLY,
                                "an offline migration (stop every instance, Empty, restart); its checks pass"
                                + (f" (warnings: {'; '.join(warnings)})" if warnings else ""),
                                remedy=offline.warnings[0].remedy if offline.warnings else "",
                                checks=_checks(offline))
    return MigrationVerdict(migration, Readiness.BLOCKED, "; ".join(_not_passed(offline, FAIL)),
                            remedy=offline.failures[0].remedy,
                            checks=_checks(*(r for r in (online, offline) if r is not None)))


class FleetJudge:
    """Judges every group of a fleet against one set of cluster-wide facts.

    ``facts`` None means they could not be read (``facts_error`` says why):
    every verdict is then UNKNOWN. Groups without members are judged on their
    type, state, protocol type and assignor alone, so thousands of empty
    groups share a handful of judgments (an inventory of 10,000 offset-only
    groups would otherwise spend most of its time re-running the same checks).
    """

    def __init__(self, facts: PreflightFacts | None, *, facts_error: str | None = None,
                 declared_broker_version: str | None = None) -> None:
        self.facts = facts
        self.facts_error = facts_error if facts is None else None
        self.declared_broker_version = declared_broker_version
        self._memberless: dict[tuple[object, ...], tuple[MigrationVerdict, ...]] = {}

    def verdicts(self, listing: GroupListing | None, description: GroupDescription | None,
                 user_data: dict[str, bytes], *, unknown_reason: str | None = None) -> tuple[MigrationVerdict, ...]:
        """The verdict on every relevant migration of one group; ``unknown_reason`` set (a fact of this group
        could not be read) makes every verdict UNKNOWN with that reason."""
        migrations = relevant_migrations(listing, description)
        reason = unknown_reason or self.facts_error
        if reason is not None or self.facts is None or description is None:
            return unknown_verdicts(migrations, reason or "the group could not be described")
        key: tuple[object, ...] | None = None
        if not description.members and listing is not None:
            key = (listing.type, listing.state, listing.protocol_type, type(description), description.type,
                   description.state, getattr(description, "assignor", None), migrations)
            if key in self._memberless:
                return self._memberless[key]
        narrowed = self.facts.for_group(listing, description, user_data)
        out = tuple(migration_verdict(narrowed, m, description.group_id,
                                      declared_broker_version=self.declared_broker_version) for m in migrations)
        if key is not None:
            self._memberless[key] = out
        return out
