"""Which group member is which instance: one pairing of the coordinator's members with the platform's instances.

The coordinator lists members, the platform lists instances, and neither knows
the other. A verdict that only counts each ("2 of 2 live members", "no instance
running") is fooled the moment they disagree: a consumer of the same group run
elsewhere (a second deployment, a debugging consumer, a host the controller does
not manage) stands in for an instance that never joined, or is forced out on the
platform's word that "no instance runs". So every verdict that joins the two
pairs them first, with :func:`pair_members` (pure, no I/O):

* an instance's identity is the strongest one it carries: its
  ``group.instance.id``, else its ``client.id``, else its host, which must be an
  address (the broker sees the address a member connects from; a host *name*
  cannot be compared with it and is no identity). A command controller's
  ``member_identity`` derives them from the instance names;
* a member carries an identity when its ``group.instance.id``, ``client.id``
  or address equals it. A Kafka Streams application on the classic protocol
  joins one member per stream thread, each with the client id
  ``<client.id>-StreamThread-<n>-consumer``: such a member carries the client id
  ``<client.id>``, and the threads of one process (one ``<client.id>``) are one
  instance's members;
* a member that carries the identity of several instances is *unaccounted*
  (ambiguous: never resolved by guessing); an instance whose identity the live
  members of more than one process carry (two consumers with its ``client.id``,
  a stray on its host) is *contested*, and every one of those members is
  unaccounted. An instance contested once in a wait stays contested for it
  (``contested``): the first member to expire does not make the other one its;
* a member that left (a negative member epoch: a static member that shut down
  waits for its session to expire) is paired with its instance but is never its
  live member;
* the instances of an earlier status (``earlier``: the one before the stop) that
  the platform no longer lists are *gone*, and a member may be paired with one
  (a Kubernetes pod deleted by the stop still has members of its own).

Without a status, a status the platform cannot give, or instances that carry no
identity at all, members cannot be paired: :attr:`Pairing.mappable` is False and
the verdicts rest on the broker's session timeout alone (said, never guessed).
"""

from __future__ import annotations

import ipaddress
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from airflow_provider_kip848.controllers.protocol import ApplicationStatus, Instance

#: the identities an instance may carry, strongest first: (the Instance field, the member field, the name said)
IDENTITIES = (("group_instance_id", "instance_id", "group.instance.id"), ("client_id", "client_id", "client.id"),
              ("host", "host", "host"))
#: a Kafka Streams stream thread's consumer on the classic protocol: ``<client.id>-StreamThread-<n>-consumer``
_STREAM_THREAD = re.compile(r"^(?P<process>.+)-StreamThread-[0-9]+-consumer$")
#: the member facts a pairing keeps (what names a member; no assignment)
MEMBER_FIELDS = ("member_id", "client_id", "host", "instance_id", "live", "protocol")


def _host(value: object) -> str:
    """A host as the broker shows it (``/10.0.0.7``) or the platform gives it, without the leading slash."""
    return str(value or "").strip().lstrip("/")


def is_address(value: str) -> bool:
    """Whether ``value`` is an IP address (what the broker shows as a member's host), not a host name."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def identity(instance: Instance) -> tuple[str, str, str] | None:
    """The identity ``instance`` carries: ``(member field, value, name said)``, strongest first; None: none that
    a member can be compared with (a host name is not an address)."""
    for attr, member_key, said in IDENTITIES:
        value = getattr(instance, attr)
        if attr == "host":
            value = _host(value)
            if value and not is_address(value):
                continue
        if value:
            return member_key, str(value), said
    return None


def facts(member: Mapping[str, object]) -> dict[str, object]:
    """A member's naming facts (member id, client id, host, ``group.instance.id``, live, protocol)."""
    out: dict[str, object] = {k: member.get(k) for k in MEMBER_FIELDS}
    if out["live"] is None:  # a description's member (to_dict) carries its epoch, not "live"
        epoch = member.get("member_epoch")
        out["live"] = not (isinstance(epoch, int) and epoch < 0)
    return out


def _carries(member: Mapping[str, object], key: str, value: str) -> bool:
    if key == "host":
        return _host(member.get("host")) == value
    mine = member.get(key)
    if not mine:
        return False
    if mine == value:
        return True
    if key == "client_id" and member.get("protocol") == "classic":
        thread = _STREAM_THREAD.match(str(mine))
        return thread is not None and thread["process"] == value
    return False


def _process(member: Mapping[str, object]) -> str:
    """Which process a member belongs to, as far as its own facts say: a classic stream thread's client id prefix
    (the threads of one Kafka Streams process), else the member itself."""
    client = str(member.get("client_id") or "")
    thread = _STREAM_THREAD.match(client) if member.get("protocol") == "classic" else None
    return f"streams:{thread['process']}" if thread else f"member:{member.get('member_id')}"


def member_name(member: Mapping[str, object], since: float | None = None) -> str:
    """A member as a person looks for it: client id, host, member id, ``group.instance.id``, listed since when."""
    bits = [f"member id {member.get('member_id')}"]
    if member.get("instance_id"):
        bits.append(f"group.instance.id {member.get('instance_id')}")
    if since is not None:
        bits.append("listed since " + time.strftime("%H:%M:%SZ", time.gmtime(since)))
    who = member.get("client_id") or member.get("member_id")
    return f"{who} on {_host(member.get('host')) or '?'} ({', '.join(bits)})"


@dataclass(frozen=True)
class Pair:
    """A member paired with an instance: ``by`` which identity; the instance's ``state`` and whether it runs as
    the platform shows it now (``gone``: listed earlier, no longer)."""

    member: dict[str, object]
    instance: str
    by: str
    state: str
    running: bool

    def to_dict(self) -> dict[str, object]:
        return {"member": dict(self.member), "instance": self.instance, "by": self.by, "state": self.state,
                "running": self.running}


@dataclass(frozen=True)
class Unaccounted:
    """A member no instance accounts for, and why (it matches none, several, or an instance contested)."""

    member: dict[str, object]
    why: str

    def to_dict(self) -> dict[str, object]:
        return {**self.member, "why": self.why}


@dataclass(frozen=True)
class Pairing:
    """The pairing of a group's members with the platform's instances.

    ``mappable`` False: members cannot be paired (``basis`` says why) and nothing below is filled. Otherwise
    ``paired`` (each member with its instance), ``unpaired`` (the instances, running or not, without a live
    member: ``{name, state, running}``), ``unaccounted`` (members no instance accounts for, with why) and
    ``contested`` (instances whose identity the members of several processes carry)."""

    mappable: bool
    basis: str
    paired: tuple[Pair, ...] = ()
    unpaired: tuple[dict[str, object], ...] = ()
    unaccounted: tuple[Unaccounted, ...] = ()
    contested: tuple[str, ...] = ()

    def live_pairs(self) -> tuple[Pair, ...]:
        return tuple(p for p in self.paired if p.member.get("live"))

    def to_dict(self) -> dict[str, object]:
        return {"mappable": self.mappable, "basis": self.basis, "paired": [p.to_dict() for p in self.paired],
                "unpaired_instances": [dict(i) for i in self.unpaired],
                "unaccounted": [u.to_dict() for u in self.unaccounted], "contested": list(self.contested)}

    def describe(self, since: Mapping[str, float] | None = None) -> str:
        """One line for a note or a report: who is paired with what, which instances have no member, and which
        members no instance accounts for (each named, with since when it is listed when ``since`` says)."""
        if not self.mappable:
            return f"members not paired with instances: {self.basis}"
        when = since or {}
        parts = [f"paired by {self.basis}: " + (", ".join(
            f"{p.member.get('client_id') or p.member.get('member_id')} = {p.instance} ({p.state})"
            + ("" if p.member.get("live") else ", left") for p in self.paired) or "none")]
        if self.unpaired:
            parts.append("instance(s) without a member: " + ", ".join(f"{i['name']} ({i['state']})"
                                                                     for i in self.unpaired))
        if self.unaccounted:
            parts.append("member(s) no instance accounts for: " + "; ".join(
                f"{member_name(u.member, when.get(str(u.member.get('member_id'))))}: {u.why}"
                for u in self.unaccounted))
        return "; ".join(parts)


@dataclass
class _Claims:
    instance: Instance
    state: str
    running: bool
    members: list[dict[str, object]] = field(default_factory=list)


def known_instances(status: ApplicationStatus, earlier: Iterable[Instance] = ()) -> list[tuple[Instance, str, bool]]:
    """The instances a pairing considers: the status's (with their state and whether they run), then the
    earlier ones it no longer lists (gone)."""
    out = [(i, i.state or ("running" if i.running else "not running"), i.running) for i in status.instances]
    listed = {i.name for i in status.instances}
    for before in earlier:
        if before.name not in listed:
            listed.add(before.name)
            out.append((before, "gone", False))
    return out


def pair_members(members: Sequence[Mapping[str, object]], status: ApplicationStatus | None, *,
                 earlier: Iterable[Instance] = (), contested: Iterable[str] = ()) -> Pairing:
    """Pair ``members`` (a condition's member facts or a description's members as dicts) with the instances of
    ``status`` and the ``earlier`` ones it no longer lists; ``contested``: instances found contested earlier in the
    same wait (they stay so). See the module docstring for the rules."""
    if status is None:
        return Pairing(False, "no application controller was named, so no instance is known")
    if not status.known:
        return Pairing(False, f"the controller cannot tell which instances exist ({status.reason})")
    instances = known_instances(status, earlier)
    claims: dict[str, _Claims] = {}
    keys: dict[str, tuple[str, str, str]] = {}
    for instance, state, running in instances:
        found = identity(instance)
        if found is not None:
            keys[instance.name] = found
            claims[instance.name] = _Claims(instance, state, running)
    if not keys:
        listed = "the platform lists no instance" if not instances else (
            f"its {len(instances)} instance(s) carry no group.instance.id, client.id or host address")
        return Pairing(False, f"{listed} (a command controller's member_identity derives them from the names)")
    said = sorted({v[2] for v in keys.values()}, key=[i[2] for i in IDENTITIES].index)
    basis = " / ".join(said)
    unaccounted: list[Unaccounted] = []
    for m in members:
        member = facts(m)
        matches = [name for name, (key, value, _) in keys.items() if _carries(m, key, value)]
        if not matches:
            unaccounted.append(Unaccounted(member, f"no instance of the platform carries its {basis}"))
        elif len(matches) > 1:
            unaccounted.append(Unaccounted(member, f"it carries the identity of {len(matches)} instances ("
                                                   f"{', '.join(matches)}): ambiguous, not guessed"))
        else:
            claims[matches[0]].members.append(member)
    still = set(contested)
    paired: list[Pair] = []
    unpaired: list[dict[str, object]] = []
    for name, claim in claims.items():
        live = [m for m in claim.members if m.get("live")]
        processes = {_process(m) for m in live}
        if len(processes) > 1 or (name in still and claim.members):
            still.add(name)
            who = ", ".join(str(m.get("client_id") or m.get("member_id")) for m in claim.members)
            unaccounted += [Unaccounted(m, f"the members of several processes carry the identity of instance "
                                           f"{name} ({who}): which one it runs is not guessed")
                            for m in claim.members]
            unpaired.append({"name": name, "state": claim.state, "running": claim.running})
            continue
        key = keys[name][2]
        paired += [Pair(m, name, key, claim.state, claim.running) for m in claim.members]
        if not live:
            unpaired.append({"name": name, "state": claim.state, "running": claim.running})
    return Pairing(True, basis, tuple(paired), tuple(unpaired), tuple(unaccounted), tuple(sorted(still)))


def pairing_basis(status: ApplicationStatus | None) -> str:
    """How members will be paired with this platform's instances, for the approval (before any member is
    seen): by which identity, or why they cannot be (then instance verdicts rest on the broker's session timeout
    alone)."""
    found = pair_members([], status)
    if found.mappable:
        return (f"members are paired with the platform's instances by {found.basis}: a member no instance accounts "
                "for is never forced out and fails the Migrated wait, named")
    return (f"members cannot be paired with instances ({found.basis}): a member is never forced out on the "
            "platform's word, and the instance verdicts rest on the broker's session timeout only (slower, never "
            "guessed)")


# -- the verdicts that rest on a pairing ----------------------------------------------------------------


def removable(pairing: Pairing) -> list[dict[str, object]]:
    """The members that may be forced out on the platform's word: those paired with an instance the platform
    shows stopped or gone. An unaccounted member never is (it may be a live consumer the platform does not run)."""
    if not pairing.mappable:
        return []
    return [p.member for p in pairing.paired if not p.running]


@dataclass(frozen=True)
class PairingVerdict:
    """``ok`` (every expected instance paired with a live member on the protocol, no member unaccounted, or only
    foreign members the run allows), ``pending`` (an instance without its member yet: ask again), ``failed`` (a
    member no instance accounts for: named) or ``unknown`` (members cannot be paired: ``message`` says so)."""

    outcome: str
    message: str
    pairing: Pairing

    def to_dict(self) -> dict[str, object]:
        return {"outcome": self.outcome, "message": self.message, "pairing": self.pairing.to_dict()}


def migrated_pairing(pairing: Pairing, *, protocol: str, allow_foreign: bool = False,
                     since: Mapping[str, float] | None = None) -> PairingVerdict:
    """The Migrated rule over a pairing: every running instance paired with a live, reconciled member on
    ``protocol``; a live member no instance accounts for fails it, named, unless ``allow_foreign``."""
    if not pairing.mappable:
        return PairingVerdict("unknown", f"members not paired with instances: {pairing.basis}; the verdict rests "
                                         "on the broker (each member proven alive)", pairing)
    when = since or {}
    foreign = [u for u in pairing.unaccounted if u.member.get("live")]
    waiting = [f"{i['name']} ({i['state']}) has no live member in the group" for i in pairing.unpaired
               if i["running"]]
    for p in pairing.live_pairs():
        if p.running and p.member.get("protocol") != protocol:
            waiting.append(f"{p.instance}'s member {p.member.get('member_id')} is on {p.member.get('protocol')}, "
                           f"not {protocol}")
    if foreign and not allow_foreign:
        named = "; ".join(f"{member_name(u.member, when.get(str(u.member.get('member_id'))))}: {u.why}"
                          for u in foreign)
        also = f" And {'; '.join(waiting)}." if waiting else ""
        return PairingVerdict("failed", f"{len(foreign)} live member(s) no instance of the platform accounts for "
                                        f"(paired by {pairing.basis}): {named}.{also}", pairing)
    if waiting:
        return PairingVerdict("pending", "; ".join(waiting), pairing)
    note = pairing.describe(since)
    if foreign:
        note += " (foreign members allowed by the run)"
    return PairingVerdict("ok", note, pairing)


__all__ = ["IDENTITIES", "Pair", "Pairing", "PairingVerdict", "Unaccounted", "facts", "identity", "is_address",
           "known_instances", "member_name", "migrated_pairing", "pair_members", "pairing_basis", "removable"]
