"""Groups: listing, describing (classic, consumer, streams), deleting and removing members.

A group is described at its coordinator, with the describe of each type in turn; the listing decides only when
no describe answers, and a group missing from a listing while its coordinator moves is never called absent."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from kafka.admin import MemberToRemove
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest

from airflow_provider_kip848.kafka import errors
from airflow_provider_kip848.kafka.api import BeforeRemoval
from airflow_provider_kip848.kafka.arguments import (
    describe_similar,
    id_list,
    require_bool,
    require_group_id,
    show_id,
    similar_group_ids,
)
from airflow_provider_kip848.kafka.model import (
    ConsumerGroupDescription,
    GroupDescription,
    GroupListing,
    GroupState,
    GroupType,
    MemberRemoval,
    StreamsGroupDescription,
    TopicPartition,
    normalize_state,
)
from airflow_provider_kip848.kafka.native import converters
from airflow_provider_kip848.kafka.native.admin.base import NativeBase
from airflow_provider_kip848.kafka.native.protocol import ConsumerGroupDescribeRequest, StreamsGroupDescribeRequest
from airflow_provider_kip848.kafka.rules.offsets import streams_group_refusal
from airflow_provider_kip848.kafka.translate import (
    GROUP_ID_NOT_FOUND,
    NON_EMPTY_GROUP,
    UNSUPPORTED_VERSION,
    group_error,
)

_STREAMS_UNSUPPORTED_REMEDY = ("Finalize streams.version=1 (kafka-features upgrade --feature streams.version=1) on "
                               "Kafka 4.2.1+ brokers, or upgrade the brokers.")


def _group_errors(response: Any) -> list[tuple[int, str | None]]:
    """The per-group error codes of a describe answer (DescribeGroups, ConsumerGroupDescribe, StreamsGroupDescribe)."""
    return [(g.error_code, getattr(g, "error_message", None)) for g in response.groups]




class NativeGroups(NativeBase):
    """Every group action of the native backend."""

    def list_groups(self) -> list[GroupListing]:
        """Every group with its type and state, streams and share groups included."""
        rows = self._t.kafka_python_call("list_groups")
        return sorted((converters.group_listing(row) for row in rows), key=lambda g: g.group_id)

    def group_listing(self, group_id: str) -> GroupListing:
        """The listing of one group, or :class:`GroupNotFound` (:class:`AuthorizationFailed` when the
        principal may not describe it: ListGroups leaves such groups out instead of refusing)."""
        require_group_id(group_id)
        for listing in self.list_groups():
            if listing.group_id == group_id:
                return listing
        self._check_group_visible(group_id)
        self._confirm_absent(group_id)
        raise errors.GroupNotFound(f"Group {group_id!r} does not exist on {self.settings.bootstrap_servers}.")

    def _confirm_absent(self, group_id: str) -> None:
        """Ask the group's coordinator before calling a group absent.

        ListGroups is answered from every coordinator partition a broker leads *now*: while a broker
        shuts down, restarts or hands a partition over, the partitions it no longer (or not yet)
        leads are silently left out, and a live group vanishes from the listing. A sensor waiting
        for "empty" must not take that for "the group is gone". The coordinator itself answers
        with a retriable NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS in that window (retried
        here); it says "not found" only of a group it does not have. A group it describes, or
        one with committed offsets, exists.
        """
        moving = errors.KafkaConnectionError(
            f"Group {group_id!r} exists but is missing from the brokers' group listing: a group coordinator is "
            "moving (a broker restarting or shutting down)",
            remedy="Retry in a few seconds; sensors poke again by themselves.")
        response = self._t.send(lambda: DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False),
                                group_id=group_id, errors=_group_errors)
        group = response.groups[0]
        message = getattr(group, "error_message", None) or ""
        if group.error_code == 0 and normalize_state(group.group_state) is not GroupState.DEAD:
            raise moving  # a classic group its coordinator describes
        if group.error_code == GROUP_ID_NOT_FOUND and "not a classic group" in message:
            raise moving  # a consumer, streams or share group the coordinator has
        # kafka-python, not confluent-kafka: librdkafka 2.16 crashes the process (SIGSEGV) on
        # ListConsumerGroupOffsets of a group id that does not exist.
        committed = self._t.kafka_python_call("list_group_offsets", {group_id: None}).get(group_id) or {}
        if any(getattr(meta, "offset", -1) >= 0 for meta in committed.values()):
            raise moving

    def _check_group_visible(self, group_id: str) -> None:
        """Raise :class:`AuthorizationFailed` if the principal lacks DESCRIBE on the group.

        FindCoordinator needs DESCRIBE on the group, exists or not, so it tells "not there" from
        "not allowed to see it". Any other failure leaves the verdict to the caller.
        """
        try:
            with self.requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
                self._t.find_coordinator(group_id)
        except errors.AuthorizationFailed:
            raise
        except errors.Kip848Error:
            pass

    def describe_group(self, group_id: str) -> GroupDescription:
        """Describe a group of any type supported here (classic, consumer, streams).

        The group's coordinator is asked directly, with the describe of each type in turn (it answers
        "not a classic group" for a consumer group ...): no listing of every group. Only when no
        describe answers for it (absent, a share group, a type changing under our feet, or a refusal)
        does the listing decide, with the checks of :meth:`group_listing` (a group missing from a
        listing while its coordinator moves is not called absent).
        """
        require_group_id(group_id)
        with self.requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            found = self._describe_at_coordinator(group_id)
        if found is not None:
            return found
        listing = self.group_listing(group_id)
        if listing.type is GroupType.STREAMS:
            return self.describe_streams_group(group_id)
        return self._describe_consumer_group(group_id, listing)

    def _describe_at_coordinator(self, group_id: str) -> GroupDescription | None:
        """The group as its coordinator describes it, trying DescribeGroups, then ConsumerGroupDescribe, then
        StreamsGroupDescribe while the coordinator answers "not a <type> group"; None when none describes it.

        Each request goes through :meth:`Transport.send`: a coordinator loading or moving is retried
        (found anew) and a coordinator that stays unavailable raises, as before; an answer is never
        read from a coordinator that said it is not the group's.
        """
        response = self._t.send(lambda: DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False),
                                group_id=group_id, errors=_group_errors)
        group = response.groups[0]
        message = getattr(group, "error_message", None) or ""
        if group.error_code == 0 and normalize_state(group.group_state) is not GroupState.DEAD:
            return converters.classic_group(group, self._t.coordinator_id(group_id))
        if group.error_code != GROUP_ID_NOT_FOUND or "not a classic group" not in message:
            return None  # absent, or refused: the listing path decides and words it
        try:
            response = self._t.send(
                lambda: ConsumerGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False),
                group_id=group_id, errors=_group_errors)
        except errors.UnsupportedBrokerVersion:
            return None
        group = response.groups[0]
        if group.error_code == 0:
            return converters.consumer_group(group, self._t.coordinator_id(group_id))
        if group.error_code != GROUP_ID_NOT_FOUND or "not a consumer group" not in (group.error_message or ""):
            return None
        try:
            stream = self._streams_group_response(group_id)
        except errors.UnsupportedBrokerVersion:
            return None
        if stream.error_code == 0:
            return converters.streams_group(stream, self._t.coordinator_id(group_id))
        return None

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        """A classic or consumer group with members, assignments and (for consumer groups) epochs.

        Consumer (KIP-848) groups are described with ``ConsumerGroupDescribe``
        v1, which also says member by member whether a member still speaks the
        classic protocol (a mixed group during an online migration).
        """
        require_group_id(group_id)
        return self._describe_consumer_group(group_id, None)

    def _describe_consumer_group(self, group_id: str, listing: GroupListing | None) -> ConsumerGroupDescription:
        with self.requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            # A group converting between classic and consumer (its first consumer member joins, or its
            # last one leaves) can answer ConsumerGroupDescribe as "not found" while the listing, read a
            # moment later, already (or still) says consumer. That is a race, not a wrong type: read again.
            for attempt in range(2):
                try:
                    return self._describe_consumer_group_once(group_id, listing if attempt == 0 else None)
                except errors.WrongGroupType as exc:
                    if exc.actual is not GroupType.CONSUMER:
                        raise
                    time.sleep(0.2 * (attempt + 1))
            return self._describe_consumer_group_once(group_id, None)

    def _describe_consumer_group_once(self, group_id: str, listing: GroupListing | None) -> ConsumerGroupDescription:
        unsupported = None
        try:
            response = self._t.send(
                lambda: ConsumerGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False),
                group_id=group_id, errors=_group_errors,
            )
            group = response.groups[0]
            if group.error_code == 0:
                return converters.consumer_group(group, self._t.coordinator_id(group_id))
            if group.error_code == UNSUPPORTED_VERSION:
                unsupported = group.error_message or "UNSUPPORTED_VERSION"
            elif group.error_code != GROUP_ID_NOT_FOUND:
                raise group_error(group_id, group.error_code, group.error_message, self.settings)
        except errors.UnsupportedBrokerVersion as exc:
            unsupported = exc.what
        listing = listing or self.group_listing(group_id)
        if listing.type is GroupType.CLASSIC:
            return converters.classic_group(self._classic_group_response(group_id), self._t.coordinator_id(group_id))
        if unsupported is not None:
            # no ConsumerGroupDescribe: group.version is 0 (KIP-848 off) or the brokers predate 4.0
            raise errors.UnsupportedBrokerVersion(
                f"The cluster does not serve ConsumerGroupDescribe, needed for {listing.type.value} group "
                f"{group_id!r} ({unsupported}).",
                remedy="Finalize group.version=1 (kafka-features upgrade --feature group.version=1) on Kafka 4.0+ "
                       "brokers, or upgrade the brokers.",
            )
        raise errors.WrongGroupType(
            f"Group {group_id!r} is a {listing.type.value} group, not a classic or consumer group.",
            actual=listing.type,
            remedy="Use describe_streams_group() for streams groups." if listing.type is GroupType.STREAMS else None,
        )

    def classic_assignment_user_data(self, group_id: str) -> dict[str, bytes]:
        """Member id -> the ``userData`` of its classic assignment (non-empty means a custom client assignor).

        The broker refuses an online upgrade to the consumer protocol when any
        member's assignment carries userData ("unsupported custom assignor").
        """
        return converters.classic_user_data(self._classic_group_response(group_id))

    def _classic_group_response(self, group_id: str) -> Any:
        """The group's entry of a ``DescribeGroups`` answer from its coordinator (error code 0).

        A coordinator that is loading, moving or not yet known answers with a per-group error code
        and an empty group ("Unknown", no members): that is retried, and never read as an empty group.
        """
        response = self._t.send(lambda: DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False),
                                group_id=group_id, errors=_group_errors)
        group = response.groups[0]
        if group.error_code != 0:
            raise group_error(group_id, group.error_code, getattr(group, "error_message", None), self.settings)
        return group

    def describe_streams_group(self, group_id: str) -> StreamsGroupDescription:
        """A streams group with members, task assignments and epochs (``StreamsGroupDescribe``)."""
        require_group_id(group_id)
        with self.requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            group = self._streams_group_response(group_id)
            if group.error_code == GROUP_ID_NOT_FOUND:
                listing = self.group_listing(group_id)  # GroupNotFound if absent
                raise errors.WrongGroupType(
                    f"Group {group_id!r} is a {listing.type.value} group, not a streams group.",
                    remedy="Use describe_consumer_group() for classic and consumer groups.",
                )
            if group.error_code != 0:
                raise group_error(group_id, group.error_code, group.error_message, self.settings)
            return converters.streams_group(group, self._t.coordinator_id(group_id))

    def _streams_group_response(self, group_id: str) -> Any:
        """The group's entry of a ``StreamsGroupDescribe`` response (UNSUPPORTED_VERSION raised, with the remedy)."""
        try:
            response = self._t.send(
                lambda: StreamsGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False),
                group_id=group_id, errors=_group_errors,
            )
        except errors.UnsupportedBrokerVersion as exc:
            raise errors.UnsupportedBrokerVersion(f"The cluster does not serve StreamsGroupDescribe ({exc.what}).",
                                                  remedy=_STREAMS_UNSUPPORTED_REMEDY) from exc
        group = response.groups[0]
        if group.error_code == UNSUPPORTED_VERSION:
            raise errors.UnsupportedBrokerVersion(
                f"The cluster does not serve StreamsGroupDescribe ({group.error_message or 'UNSUPPORTED_VERSION'}).",
                remedy=_STREAMS_UNSUPPORTED_REMEDY)
        return group

    def streams_group_source_partitions(self, group_id: str) -> tuple[TopicPartition, ...]:
        """Input partitions (source and repartition topics) of the group's active tasks."""
        group = self._streams_group_response(group_id)
        return converters.streams_source_partitions(group) if group.error_code == 0 else ()

    def streams_group_internal_topics(self, group_id: str) -> tuple[str, ...]:
        """The internal topics (repartition and changelog) of a streams group's topology, as its coordinator
        holds it; () when it holds no topology. Deleting the group deletes none of them."""
        require_group_id(group_id)
        with self.requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            group = self._streams_group_response(group_id)
        if group.error_code != 0:
            raise group_error(group_id, group.error_code, group.error_message, self.settings)
        return converters.streams_internal_topics(group)

    def delete_group(self, group_id: str) -> None:
        """Delete an empty group (its committed offsets go with it)."""
        require_group_id(group_id)
        self.group_listing(group_id)
        with self.requires(f"delete group {group_id!r}", ("DELETE", "GROUP", group_id)):
            response = self._t.send(lambda: DeleteGroupsRequest(groups_names=[group_id]), group_id=group_id,
                                    errors=lambda r: [(code, None) for _, code in r.results])
            code = next((code for gid, code in response.results if gid == group_id), 0)
            if code == NON_EMPTY_GROUP:
                raise errors.GroupNotEmpty(f"Group {group_id!r} still has active members; it cannot be deleted.")
            if code == GROUP_ID_NOT_FOUND:
                raise errors.GroupNotFound(f"Group {group_id!r} does not exist on {self.settings.bootstrap_servers}.")
            if code != 0:
                raise group_error(group_id, code, f"DeleteGroups of {group_id!r}", self.settings)

    # -- membership ----------------------------------------------------------

    def remove_members(
        self,
        group_id: str,
        *,
        member_ids: Iterable[str] = (),
        instance_ids: Iterable[str] = (),
        all_members: bool = False,
        missing_ok: bool = False,
        expected_gone: Iterable[str] = (),
        reason: str = "removed by airflow-provider-kip848",
        before_send: BeforeRemoval | None = None,
    ) -> MemberRemoval:
        """Force members out of a classic or consumer group with LeaveGroup.

        This is how a classic group is emptied before an offline streams
        migration without waiting a whole session timeout. Static members are
        removed by ``group.instance.id`` (which also releases the instance id),
        dynamic ones by member id. Streams groups reject LeaveGroup, so they
        are refused here with the reason. An id that is not a member raises
        :class:`MemberNotFound` (naming it and the similar ids of the group's
        members) before anything is removed, unless it is in ``expected_gone``
        (the caller removed it before: a retry) or ``missing_ok``; with
        ``missing_ok``, a member that left on its own between the describe and
        the removal (the coordinator answers UNKNOWN_MEMBER_ID) is reported
        ``not_found``, not ``failed``. ``before_send(targets, description)``:
        called with the members about to be removed, right before LeaveGroup is
        sent (the audit trail's intent).
        """
        require_group_id(group_id)
        member_ids = id_list("member_ids", member_ids)
        instance_ids = id_list("instance_ids", instance_ids)
        gone_before = set(id_list("expected_gone", expected_gone))
        all_members = require_bool(all_members, "all_members")
        missing_ok = require_bool(missing_ok, "missing_ok")
        if not all_members and not member_ids and not instance_ids:  # never "every member" by omission
            raise errors.InvalidArgument(
                f"remove_members of group {group_id!r} names no member: an empty selection never means every member.",
                remedy="Pass member_ids or instance_ids, or all_members=True to remove every member.")
        if all_members and (member_ids or instance_ids):
            raise errors.InvalidArgument(
                f"remove_members of group {group_id!r} is given all_members=True and ids at once.",
                remedy="Pass either the ids to remove or all_members=True, not both.")
        desc = self.describe_group(group_id)
        if isinstance(desc, StreamsGroupDescription):
            raise streams_group_refusal(group_id, "the broker rejects LeaveGroup for streams groups",
                                        remedy="Stop the application's instances (they leave on close) or wait for "
                                               "streams.session.timeout.ms to expire them.")
        by_member = {m.member_id: m for m in desc.members}
        by_instance = {m.instance_id: m for m in desc.members if m.instance_id}
        wanted = {i for i in member_ids if i in by_member} | {by_instance[i].member_id for i in instance_ids
                                                               if i in by_instance}
        missing = sorted({i for i in member_ids if i not in by_member}
                         | {i for i in instance_ids if i not in by_instance})
        unexpected = [i for i in missing if i not in gone_before]
        if unexpected and not missing_ok:
            raise unknown_members(group_id, unexpected, desc)
        targets = list(desc.members) if all_members else [by_member[i] for i in sorted(wanted)]
        if not targets:
            return MemberRemoval(group_id, desc.type, removed=(), failed={}, not_found=tuple(missing))
        if before_send is not None:
            before_send(tuple(targets), desc)
        requests = [
            MemberToRemove(group_instance_id=m.instance_id, reason=reason) if m.instance_id
            else MemberToRemove(member_id=m.member_id, reason=reason)
            for m in targets
        ]
        with self.requires(f"remove members of group {group_id!r}", ("READ", "GROUP", group_id)):
            results = self._t.kafka_python_call("remove_group_members", group_id, requests)
        # the response is keyed by member id, or by group.instance.id for static members
        ident_of = {}
        for m in targets:
            ident = m.instance_id or m.member_id
            ident_of[m.member_id] = ident
            if m.instance_id:
                ident_of[m.instance_id] = ident
        removed, failed, gone = converters.removal_outcome(results, ident_of)
        if missing_ok:  # left on their own since the describe: not there, as asked
            missing = sorted({*missing, *gone})
        else:
            failed.update({ident: "UnknownMemberIdError" for ident in gone})
        return MemberRemoval(group_id, desc.type, removed=tuple(sorted(removed)), failed=failed,
                             not_found=tuple(missing))


def unknown_members(group_id: str, missing: list[str], desc: ConsumerGroupDescription) -> errors.MemberNotFound:
    """The refusal of ids that are not members of ``group_id``: each named, with the ids of the group's members
    that look like it (a typo'd ``group.instance.id``), never the whole member list."""
    known = [m.member_id for m in desc.members] + [m.instance_id for m in desc.members if m.instance_id]
    parts = []
    for given in missing:
        near = similar_group_ids(given, known)
        parts.append(show_id(given) + (f" ({describe_similar(given, near)})" if near else ""))
    return errors.MemberNotFound(
        f"Not a member of group {group_id!r} ({len(desc.members)} member(s) now): {'; '.join(parts)}. No earlier "
        "try of this task removed it, so it is not taken for already gone; nothing was removed.")
