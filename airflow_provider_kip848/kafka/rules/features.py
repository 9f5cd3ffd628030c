"""Plan a feature-flag change the way ``kafka-features`` would, and make it idempotent.

``kafka-features upgrade --feature streams.version=1`` on a cluster already at
1 prints "was upgraded" and changes nothing; an automated runbook must instead
say "already at 1, nothing to do" and send no request. It must also refuse,
before sending, a level the cluster does not support or a change in the wrong
direction (an "upgrade" to a lower level). Both backends (native and CLI) use
this plan, so they refuse and no-op identically.

An argument the action ignores is refused too (:func:`refuse_ignored_arguments`):
a level given to ``disable`` (which always sets 0: ``disable`` with level 1
reads as "lower it to 1" and would remove the feature), ``unsafe`` on an
upgrade, an override of dependent groups where no group can depend on the
change. Each would be silently dropped, so the change run is not the one asked.
"""

from __future__ import annotations

from collections.abc import Mapping

from airflow_provider_kip848.kafka.errors import FeatureInUse, InvalidArgument, InvalidFeatureLevel
from airflow_provider_kip848.kafka.model import (
    METADATA_VERSION_NAMES,
    ClusterFeatures,
    FeatureUpdate,
    GroupType,
    feature_level_name,
)

ACTIONS = ("upgrade", "downgrade", "disable")
_METADATA_LEVELS = {name: level for level, name in METADATA_VERSION_NAMES.items()}


def resolve_level(feature: str, level: int | str | None) -> int:
    """A level as an int; ``metadata.version`` also takes release names such as ``4.3-IV0``."""
    if level is None:
        raise InvalidFeatureLevel(f"No level given for {feature}.",
                                  remedy="Pass the target level, e.g. streams.version=1.")
    if isinstance(level, bool):
        raise InvalidFeatureLevel(f"{feature} level {level!r} is not a number.")
    if isinstance(level, int):
        return level
    text = str(level).strip()
    if feature == "metadata.version" and text in _METADATA_LEVELS:
        return _METADATA_LEVELS[text]
    try:
        return int(text)
    except ValueError:
        raise InvalidFeatureLevel(f"{feature} level {level!r} is not a number.") from None


def level_given(level: object) -> bool:
    """Whether a level was given (None, empty text and the text a template renders for None: not given)."""
    return not (level is None or (isinstance(level, str) and level.strip() in ("", "None")))


def refuse_ignored_arguments(feature: object, action: object, level: object, *, unsafe: bool = False,
                             override_dependent_groups: bool = False, allow_empty_dependent_groups: bool = False
                             ) -> None:
    """Refuse an argument ``action`` would ignore: a level other than 0 for ``disable``, ``unsafe`` on an
    ``upgrade``, a dependent-groups override on an upgrade or on a feature no group type depends on."""
    if action == "disable" and level_given(level) and str(level).strip() != "0":
        raise InvalidFeatureLevel(
            f"A disable of {feature} takes no level: it always sets level 0, and level={level!r} would be ignored.",
            remedy=f"To lower {feature} to {level}, use action='downgrade' with level={level}; to disable it, give "
                   "no level (or 0).")
    if action == "upgrade" and unsafe:
        raise InvalidArgument(
            f"unsafe=True applies to a downgrade or disable (Kafka's --unsafe); an upgrade of {feature} ignores it.",
            remedy="Drop unsafe for an upgrade; if you meant to lower the level, use action='downgrade'.")
    overrides = [name for name, on in (("override_dependent_groups", override_dependent_groups),
                                       ("allow_empty_dependent_groups", allow_empty_dependent_groups)) if on]
    if overrides and (action == "upgrade" or feature not in FEATURE_GROUP_TYPES):
        why = (f"an upgrade of {feature} takes no group's protocol away" if action == "upgrade"
               else f"no group type depends on {feature} (only {', '.join(FEATURE_GROUP_TYPES)} have dependants)")
        raise InvalidArgument(
            f"{' and '.join(overrides)} would be ignored: {why}.",
            remedy=f"Drop {' and '.join(overrides)}; it belongs to a downgrade or disable of "
                   f"{', '.join(FEATURE_GROUP_TYPES)}.")


def plan_feature_update(
    features: ClusterFeatures,
    feature: str,
    level: int | str | None,
    action: str,
    *,
    dry_run: bool = False,
) -> FeatureUpdate:
    """The change to make (or the no-op), validated against what the cluster reports."""
    if not isinstance(feature, str):
        raise InvalidFeatureLevel(f"The feature name must be a string, not {type(feature).__name__} {feature!r}.")
    if not isinstance(action, str) or action not in ACTIONS:
        raise InvalidFeatureLevel(f"Unknown feature action {action!r}.", remedy=f"Use one of {', '.join(ACTIONS)}.")
    if feature not in features:
        raise InvalidFeatureLevel(
            f"Feature {feature!r} is not known to this cluster; it knows {', '.join(sorted(features.features))}."
        )
    info = features[feature]
    target = 0 if action == "disable" else resolve_level(feature, level)
    current = info.finalized_level

    def shown(level: int) -> str:
        return feature_level_name(feature, level)

    if target != 0 and not info.supported_min <= target <= info.supported_max:
        raise InvalidFeatureLevel(
            f"{feature} level {shown(target)} is not supported: the cluster supports "
            f"{shown(info.supported_min)}..{shown(info.supported_max)}."
        )
    if target == current:
        return FeatureUpdate(feature, action, current, target, dry_run, noop=True, applied=False,
                             message=f"{feature} is already at level {shown(current)}; nothing to change.")
    if action == "upgrade" and target < current:
        raise InvalidFeatureLevel(
            f"{feature} is at {shown(current)}; an upgrade to {shown(target)} would lower it.",
            remedy="Use action 'downgrade' (or 'disable' for level 0) if that is what you mean.",
        )
    if action == "downgrade" and target > current:
        raise InvalidFeatureLevel(
            f"{feature} is at {shown(current)}; a downgrade to {shown(target)} would raise it.",
            remedy="Use action 'upgrade' if that is what you mean.",
        )
    return FeatureUpdate(feature, action, current, target, dry_run, noop=False, applied=False,
                         message=f"{feature}: {action} {shown(current)} -> {shown(target)}"
                                 + (" (dry run)" if dry_run else ""))


_PAST = {"upgrade": "upgraded", "downgrade": "downgraded", "disable": "disabled"}


def outcome_message(update: FeatureUpdate, *, dry_run: bool) -> str:
    """The sentence ``kafka-features`` prints for a validated (dry run) or applied change."""
    verb = _PAST[update.action]
    target = "" if update.action == "disable" else f" to {feature_level_name(update.feature, update.to_level)}"
    return f"{update.feature} {'can be' if dry_run else 'was'} {verb}{target}."


#: The group type each group-protocol feature enables. Lowering the feature under such groups makes
#: their members fail fatally (UNSUPPORTED_VERSION on every heartbeat) and their state unreadable.
FEATURE_GROUP_TYPES = {"group.version": GroupType.CONSUMER, "streams.version": GroupType.STREAMS,
                       "share.version": GroupType.SHARE}


def dependent_group_type(update: FeatureUpdate) -> GroupType | None:
    """The group type a planned change takes away (a downgrade or disable of a group-protocol feature)."""
    if update.noop or update.to_level >= update.from_level:
        return None
    return FEATURE_GROUP_TYPES.get(update.feature)


def describe_dependents(groups: Mapping[str, int]) -> str:
    """``'orders' (3 member(s)), 'audit' (empty)`` for at most ten groups, those with members first."""
    def one(group_id: str, members: int) -> str:
        count = "members unknown" if members < 0 else "empty" if members == 0 else f"{members} member(s)"
        return f"{group_id!r} ({count})"
    ranked = sorted(groups.items(), key=lambda item: (-item[1] if item[1] > 0 else 1 if item[1] == 0 else 0, item[0]))
    shown = ", ".join(one(g, n) for g, n in ranked[:10])
    return shown + (f" and {len(groups) - 10} more" if len(groups) > 10 else "")


def refuse_dependents(update: FeatureUpdate, groups: Mapping[str, int], *,
                      allow_empty: bool = False) -> FeatureInUse | None:
    """The refusal of a change that lowers a feature while ``groups`` (id -> members) depend on it.

    ``allow_empty``: empty groups (0 members) do not refuse it (an approved change that leaves them in
    place, unusable until the feature is raised again); a group with members, or whose members could
    not be counted (-1), still does."""
    gtype = dependent_group_type(update)
    if gtype is None or not groups:
        return None
    if allow_empty and all(n == 0 for n in groups.values()):
        return None
    live = sum(n for n in groups.values() if n > 0)
    return FeatureInUse(
        f"{update.action.capitalize()} of {update.feature} {update.from_level} -> {update.to_level} refused: "
        f"{len(groups)} {gtype.value} group(s) depend on it ({live} live member(s)): {describe_dependents(groups)}",
        groups=groups)
