"""Plan a feature-flag change the way ``kafka-features`` would, and make it idempotent.

``kafka-features upgrade --feature streams.version=1`` on a cluster already at
1 prints "was upgraded" and changes nothing; an automated runbook must instead
say "already at 1, nothing to do" and send no request. It must also refuse,
before sending, a level the cluster does not support or a change in the wrong
direction (an "upgrade" to a lower level). Both backends (native and CLI) use
this plan, so they refuse and no-op identically.
"""

from __future__ import annotations

from airflow_provider_kip848.kafka.errors import InvalidFeatureLevel
from airflow_provider_kip848.kafka.model import (
    METADATA_VERSION_NAMES,
    ClusterFeatures,
    FeatureUpdate,
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


def plan_feature_update(
    features: ClusterFeatures,
    feature: str,
    level: int | str | None,
    action: str,
    *,
    dry_run: bool = False,
) -> FeatureUpdate:
    """The change to make (or the no-op), validated against what the cluster reports."""
    if action not in ACTIONS:
        raise InvalidFeatureLevel(f"Unknown feature action {action!r}.", remedy=f"Use one of {', '.join(ACTIONS)}.")
    if feature not in features:
        raise InvalidFeatureLevel(
            f"Feature {feature!r} is not known to this cluster; it knows {', '.join(sorted(features.features))}."
        )
    info = features[feature]
    target = 0 if action == "disable" else resolve_level(feature, level)
    current = info.finalized_level
    shown = lambda lvl: feature_level_name(feature, lvl)  # noqa: E731
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
