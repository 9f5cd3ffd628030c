"""Which application and team own a group: the ownership map the platform team keeps.

Waves, approvals and reports speak of applications, not of group ids. The map
is a list of rules, each matching group ids by ``prefix`` or by ``regex``
(a full match), naming the application, its team, the controller that stops
and starts it (the name of an entry of the deployment's controller registry,
with the arguments that controller declares for a run: see
:mod:`airflow_provider_kip848.controllers.registry`), how
many instances it runs, and optionally which path it must take. The first
rule that matches a group, in file order, owns it; a group that no rule
matches is *unowned* and is never migrated (its owner is never guessed).
Rules of two applications matching one group of an inventory (a
:class:`Conflict`), or an application whose rules match no group of it (an
:class:`IdleApplication`), leave no approvable plan
(:class:`OwnershipNotApprovable`): the first is never settled by file order.

It is read from JSON or YAML text (a file, or the text of an Airflow
Variable) and strictly: an unknown key, a rule with both or neither of
``prefix`` and ``regex``, a regex that does not compile, a bad count ... each
is reported with the rule's index and field, all of them in one
:class:`OwnershipError`, and no map is returned. The text is bounded before it
is parsed (size, nesting, YAML aliases: :func:`~airflow_provider_kip848.kafka.documents.load_strict`),
and a ``regex`` is compiled with RE2 (:mod:`airflow_provider_kip848.kafka.patterns`): a group id,
which anyone who may create a group chooses, is matched in time linear in its length, whatever the
pattern. See docs/fleet.md.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from airflow_provider_kip848.kafka.arguments import CONTROLLER_NAME_PATTERN, load_strict
from airflow_provider_kip848.kafka.documents import DocumentRefused
from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.patterns import NamePattern, compile_name_pattern

#: the paths a rule may force: ``online`` (hold the application back when the online path is refused),
#: ``offline`` (stop every instance even when a rolling upgrade would work)
PATHS = ("online", "offline")
#: the format version of the map (``version:`` at the top, optional)
FORMAT_VERSION = 1
_TOP_KEYS = ("version", "rules")
_RULE_KEYS = ("prefix", "regex", "app", "team", "app_controller", "app_controller_args", "expected_instances",
              "migration")
_CONTROLLER = re.compile(CONTROLLER_NAME_PATTERN)


class OwnershipError(InvalidArgument):
    """The ownership map is not valid; ``problems`` lists every problem, each naming the rule and field."""

    remedy = "Fix the ownership map (docs/fleet.md describes its format) and run again."

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = list(problems)
        super().__init__(f"the ownership map {source} is not valid: " + "; ".join(self.problems) + ".")


@dataclass(frozen=True)
class OwnershipRule:
    """One rule: the groups it matches (``prefix`` or ``regex``, full match) and who owns them.

    ``index`` is the rule's position in the map (0-based, as ``rules[index]``
    in the error messages). ``migration`` forces a path for the application
    (``online`` or ``offline``); None follows the inventory's verdicts.
    """

    index: int
    app: str
    team: str
    prefix: str | None = None
    regex: str | None = None
    app_controller: str | None = None
    app_controller_args: Mapping[str, Any] = field(default_factory=dict)  # Any: registry arguments (YAML values)
    expected_instances: int | None = None
    migration: str | None = None

    def __post_init__(self) -> None:
        if (self.prefix is None) == (self.regex is None):
            raise InvalidArgument(f"ownership rule {self.index} needs exactly one of prefix and regex")
        pattern = compile_name_pattern(self.regex, f"rules[{self.index}].regex") if self.regex is not None else None
        object.__setattr__(self, "_pattern", pattern)
        # a plan asks about each group id several times (owners, conflicts, idle rules ...): RE2 answers in linear
        # time, but through its Python binding slower than re on ordinary ids, so each answer is kept
        object.__setattr__(self, "_answers", {})

    def matches(self, group_id: str) -> bool:
        """The rule matches ``group_id``: it starts with ``prefix``, or ``regex`` matches all of it."""
        if self.prefix is not None:
            return group_id.startswith(self.prefix)
        answers: dict[str, bool] = object.__getattribute__(self, "_answers")
        answer = answers.get(group_id)
        if answer is None:
            pattern: NamePattern = object.__getattribute__(self, "_pattern")
            answer = answers[group_id] = pattern.fullmatch(group_id) is not None
        return answer

    @property
    def match(self) -> str:
        """How the rule matches, as written: ``prefix 'orders-'`` or ``regex 'pay-.*'``."""
        return f"prefix {self.prefix!r}" if self.prefix is not None else f"regex {self.regex!r}"

    def to_dict(self) -> dict[str, object]:
        out: dict[str, Any] = {"index": self.index}
        out["prefix" if self.prefix is not None else "regex"] = self.prefix if self.prefix is not None else self.regex
        out.update(app=self.app, team=self.team, app_controller=self.app_controller,
                   app_controller_args=dict(self.app_controller_args), expected_instances=self.expected_instances,
                   migration=self.migration)
        return out


class OwnershipNotApprovable(InvalidArgument):
    """The map cannot give an approvable plan on this inventory: groups that rules of two applications claim
    (``conflicts``: the plan fails, naming every rule), and/or applications none of whose rules match a group
    of the inventory (``idle``: reported in the plan, which no one may approve while it holds).

    Why both stop the plan: a group claimed twice would move with whichever application the file happens to
    list first, without either team knowing; an application that matches nothing is a typo in a prefix or regex
    (its groups are then unowned and silently left behind) or an application that no longer exists."""

    remedy = ("Fix the ownership map: give each of these groups one application (narrow a prefix or regex, or "
              "remove a rule), and correct or remove the rules of an application that matches no group; then run "
              "again. Nothing was locked or changed.")

    def __init__(self, source: str, conflicts: Iterable[Conflict] = (), idle: Iterable[IdleApplication] = ()) -> None:
        self.source = source
        self.conflicts = tuple(conflicts)
        self.idle = tuple(idle)
        parts = [f"group {c.describe()}" for c in self.conflicts] + [i.describe() for i in self.idle]
        super().__init__(f"the ownership map {source} gives no approvable plan: " + "; ".join(parts) + ".")


@dataclass(frozen=True)
class IdleApplication:
    """An application of the map none of whose rules matches a group of the inventory. ``rules``: (index, how
    it matches) of each of its rules."""

    app: str
    team: str
    rules: tuple[tuple[int, str], ...]

    def describe(self) -> str:
        how = ", ".join(f"rules[{i}] ({match})" for i, match in self.rules)
        return f"application {self.app!r} (team {self.team!r}) matches no group of the inventory with {how}"

    def to_dict(self) -> dict[str, object]:
        return {"app": self.app, "team": self.team, "rules": [{"index": i, "match": m} for i, m in self.rules]}


@dataclass(frozen=True)
class Conflict:
    """A group that rules of different applications match: the map is ambiguous, and no plan is made from it
    (:class:`OwnershipNotApprovable`). ``rules``: (index, app) of every matching rule, in file order."""

    group_id: str
    rules: tuple[tuple[int, str], ...]

    @property
    def owner(self) -> str:
        return self.rules[0][1]

    def describe(self) -> str:
        names = ", ".join(f"rules[{i}] ({app})" for i, app in self.rules)
        return f"{self.group_id!r} is claimed by {len({a for _, a in self.rules})} applications: {names}"

    def to_dict(self) -> dict[str, object]:
        return {"group_id": self.group_id, "rules": [{"index": i, "app": a} for i, a in self.rules],
                "owner": self.owner}


@dataclass(frozen=True)
class GroupOwner:
    """Who owns one group: ``app`` and ``team`` of the first rule that matches it (None: unowned), and
    ``claims``: (app, team) of every application whose rules match it when there is more than one (a
    :class:`Conflict`; empty otherwise)."""

    group_id: str
    app: str | None
    team: str | None
    claims: tuple[tuple[str, str], ...] = ()

    @property
    def owned(self) -> bool:
        return self.app is not None

    @property
    def conflict(self) -> bool:
        return len(self.claims) > 1


@dataclass(frozen=True)
class OwnershipMap:
    """The rules in file order; ``source`` says where they were read from (for messages)."""

    rules: tuple[OwnershipRule, ...]
    source: str = "<text>"

    # -- reading ---------------------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | Path) -> OwnershipMap:
        """The map in the JSON or YAML file at ``path`` (``.json``: JSON; anything else: YAML, which
        also reads JSON)."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise OwnershipError(str(p), [f"cannot be read: {exc.strerror or exc}"]) from exc
        return cls.from_text(text, source=str(p), json_only=p.suffix.lower() == ".json")

    @classmethod
    def from_text(cls, text: str, *, source: str = "<text>", json_only: bool = False) -> OwnershipMap:
        """The map in ``text`` (JSON or YAML; e.g. an Airflow Variable's value). A key repeated in one
        mapping is an error in both formats (neither silently keeps the last)."""
        if not isinstance(text, str):
            raise OwnershipError(source, [f"expected JSON or YAML text, got {type(text).__name__}"])
        is_json = json_only or text.lstrip().startswith(("{", "["))
        try:
            data = load_strict(text, json_only=json_only, source="the document")
        except DocumentRefused as exc:  # beyond the reader's bounds: said before anything formats the value
            raise OwnershipError(source, [exc.what.replace("the document is refused: ", "is refused: ", 1)]) from exc
        except (ValueError, yaml.YAMLError) as exc:
            raise OwnershipError(source, [f"is not valid {'JSON' if is_json else 'YAML'}: {_one_line(exc)}"]) from exc
        return cls.from_obj(data, source=source)

    @classmethod
    def from_obj(cls, data: object, *, source: str = "<object>") -> OwnershipMap:
        """The map from already parsed data (``{"version": 1, "rules": [...]}``), checked as strictly."""
        problems: list[str] = []
        if not isinstance(data, Mapping):
            raise OwnershipError(source, [f"the top level must be a mapping with 'rules', got {_kind(data)}"])
        unknown = sorted(str(k) for k in data if k not in _TOP_KEYS)
        if unknown:
            problems.append(f"unknown top-level key(s) {', '.join(map(repr, unknown))} (known: version, rules)")
        version = data.get("version", FORMAT_VERSION)
        if version != FORMAT_VERSION or isinstance(version, bool):
            problems.append(f"version: {_show(version)} is not supported (this provider reads version "
                            f"{FORMAT_VERSION})")
        raw_rules = data.get("rules")
        if not isinstance(raw_rules, list):
            problems.append("rules: " + ("missing" if raw_rules is None else
                                         f"must be a list of rules, got {_kind(raw_rules)}"))
            raise OwnershipError(source, problems)
        if not raw_rules:
            problems.append("rules: empty (every group would be unowned)")
        rules: list[OwnershipRule] = []
        for index, raw in enumerate(raw_rules):
            rule = _rule(index, raw, problems)
            if rule is not None:
                rules.append(rule)
        _consistency(rules, problems)
        if problems:
            raise OwnershipError(source, problems)
        return cls(tuple(rules), source=source)

    # -- asking ----------------------------------------------------------------------------------

    def owner_of(self, group_id: str) -> OwnershipRule | None:
        """The first rule (file order) that matches ``group_id``; None: the group is unowned."""
        for rule in self.rules:
            if rule.matches(group_id):
                return rule
        return None

    def matching(self, group_id: str) -> tuple[OwnershipRule, ...]:
        """Every rule that matches ``group_id``, in file order."""
        return tuple(r for r in self.rules if r.matches(group_id))

    def conflicts(self, group_ids: Iterable[str]) -> tuple[Conflict, ...]:
        """The groups of ``group_ids`` matched by rules of more than one application (sorted by group id).

        Rules of the same application overlapping is no conflict. Regex overlaps cannot be decided from
        the rules alone, so conflicts are found on real group ids (an inventory's)."""
        out = []
        for gid in sorted(set(group_ids)):
            matched = self.matching(gid)
            if len({r.app for r in matched}) > 1:
                out.append(Conflict(gid, tuple((r.index, r.app) for r in matched)))
        return tuple(out)

    def idle(self, group_ids: Iterable[str]) -> tuple[IdleApplication, ...]:
        """The applications none of whose rules matches one of ``group_ids`` (in map order)."""
        ids = set(group_ids)
        live = {r.app for r in self.rules if any(r.matches(g) for g in ids)}
        out: dict[str, IdleApplication] = {}
        for rule in self.rules:
            if rule.app not in live:
                found = out.get(rule.app, IdleApplication(rule.app, rule.team, ()))
                out[rule.app] = IdleApplication(rule.app, rule.team, (*found.rules, (rule.index, rule.match)))
        return tuple(out.values())

    def dead_rules(self, group_ids: Iterable[str]) -> tuple[OwnershipRule, ...]:
        """The rules that match none of ``group_ids`` although their application owns other groups there (a
        prefix with a typo next to a right one: the groups it was meant for are unowned)."""
        ids = set(group_ids)
        idle = {i.app for i in self.idle(ids)}
        return tuple(r for r in self.rules if r.app not in idle and not any(r.matches(g) for g in ids))

    def owners(self, group_ids: Iterable[str]) -> dict[str, GroupOwner]:
        """Who owns each of ``group_ids``, by the rules :func:`~airflow_provider_kip848.fleet.selection.select`
        applies (the first matching rule in file order; none: unowned), with every application that claims
        a group matched by rules of more than one (a conflict: the fleet plan refuses it)."""
        out = {}
        for gid in group_ids:
            matched = self.matching(gid)
            claims: dict[str, str] = {}
            for rule in matched:
                claims.setdefault(rule.app, rule.team)
            first = matched[0] if matched else None
            out[gid] = GroupOwner(gid, first.app if first else None, first.team if first else None,
                                  tuple(claims.items()) if len(claims) > 1 else ())
        return out

    def unowned(self, group_ids: Iterable[str]) -> tuple[str, ...]:
        """The groups of ``group_ids`` no rule matches (sorted)."""
        return tuple(sorted(g for g in set(group_ids) if self.owner_of(g) is None))

    @property
    def apps(self) -> tuple[str, ...]:
        return tuple(sorted({r.app for r in self.rules}))

    @property
    def teams(self) -> tuple[str, ...]:
        return tuple(sorted({r.team for r in self.rules}))

    def to_dict(self) -> dict[str, object]:
        return {"version": FORMAT_VERSION, "source": self.source, "rules": [r.to_dict() for r in self.rules]}


# -- strict parsing ------------------------------------------------------------------------------


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


#: how a value a problem quotes is shown: cut short (a map's value may be large; the message stays a line)
_SHOW = reprlib.Repr()
_SHOW.maxlevel, _SHOW.maxdict, _SHOW.maxlist, _SHOW.maxstring, _SHOW.maxother = 2, 4, 4, 80, 80


def _show(value: object) -> str:
    return _SHOW.repr(value)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _text(where: str, raw: Mapping[str, Any], key: str, problems: list[str], *, required: bool) -> str | None:
    value = raw.get(key)
    if value is None:
        if required:
            problems.append(f"{where}.{key}: missing")
        return None
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}.{key}: must be a non-empty string, got {_show(value)}")
        return None
    if value != value.strip():
        problems.append(f"{where}.{key}: {_show(value)} has leading or trailing whitespace")
        return None
    return value


def _rule(index: int, raw: Any, problems: list[str]) -> OwnershipRule | None:
    """One rule from ``raw``, or None with its problems appended (each naming ``rules[index].field``)."""
    where = f"rules[{index}]"
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: must be a mapping, got {_kind(raw)}")
        return None
    before = len(problems)
    unknown = sorted(str(k) for k in raw if k not in _RULE_KEYS)
    if unknown:
        problems.append(f"{where}: unknown key(s) {', '.join(map(repr, unknown))} (known: {', '.join(_RULE_KEYS)})")
    has_prefix, has_regex = raw.get("prefix") is not None, raw.get("regex") is not None
    if has_prefix == has_regex:
        problems.append(f"{where}: needs exactly one of prefix and regex, got "
                        + ("both" if has_prefix else "neither"))
    prefix = _text(where, raw, "prefix", problems, required=False)
    regex = raw.get("regex")
    if has_regex:
        if not isinstance(regex, str) or not regex:
            problems.append(f"{where}.regex: must be a non-empty string, got {_show(regex)}")
        else:
            try:
                compile_name_pattern(regex, f"{where}.regex")
            except InvalidArgument as exc:
                problems.append(exc.what)
    app = _text(where, raw, "app", problems, required=True)
    team = _text(where, raw, "team", problems, required=True)
    controller = _text(where, raw, "app_controller", problems, required=False)
    if controller is not None and not _CONTROLLER.fullmatch(controller):
        problems.append(f"{where}.app_controller: {controller!r} is not the name of a controller of the deployment's "
                        "registry (a name, never a module path: docs/controllers.md)")
    args = raw.get("app_controller_args")
    if args is not None:
        if not isinstance(args, Mapping) or not all(isinstance(k, str) and k for k in args):
            problems.append(f"{where}.app_controller_args: must be a mapping of keyword arguments, got {_show(args)}")
        elif raw.get("app_controller") is None:
            problems.append(f"{where}.app_controller_args: given without app_controller")
    instances = raw.get("expected_instances")
    if instances is not None and (isinstance(instances, bool) or not isinstance(instances, int) or instances < 1):
        problems.append(f"{where}.expected_instances: must be a whole number >= 1 (or null), got {_show(instances)}")
    migration = raw.get("migration")
    if migration is not None and migration not in PATHS:
        problems.append(f"{where}.migration: must be one of {', '.join(PATHS)} (or null to follow the verdicts), "
                        f"got {_show(migration)}")
    if len(problems) > before:
        return None
    assert app is not None and team is not None  # checked above
    return OwnershipRule(index=index, app=app, team=team, prefix=prefix if has_prefix else None,
                         regex=regex if has_regex else None, app_controller=controller,
                         app_controller_args=dict(args or {}), expected_instances=instances, migration=migration)


def _consistency(rules: list[OwnershipRule], problems: list[str]) -> None:
    """Rules of one application agree on its team, controller, instances and path; no match is repeated."""
    first_of_app: dict[str, OwnershipRule] = {}
    first_of_match: dict[str, OwnershipRule] = {}
    for rule in rules:
        earlier = first_of_match.setdefault(rule.match, rule)
        if earlier is not rule:
            problems.append(f"rules[{rule.index}]: repeats the {rule.match} of rules[{earlier.index}] "
                            "(it can never match first)")
        first = first_of_app.setdefault(rule.app, rule)
        for name in ("team", "app_controller", "app_controller_args", "expected_instances", "migration"):
            mine, theirs = getattr(rule, name), getattr(first, name)
            if mine != theirs:
                problems.append(f"rules[{rule.index}].{name}: application {rule.app!r} has {_show(mine)} here but "
                                f"{_show(theirs)} in rules[{first.index}] (one application, one {name})")


__all__ = ["PATHS", "Conflict", "GroupOwner", "IdleApplication", "OwnershipError", "OwnershipMap",
           "OwnershipNotApprovable", "OwnershipRule"]
