"""Feature flags as ``kafka-features describe`` prints them, and one planned level change."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from airflow_provider_kip848.kafka.model.cluster import METADATA_VERSION_NAMES


def feature_level_name(feature: str, level: int) -> str:
    """A level as ``kafka-features describe`` shows it: ``4.3-IV0`` for metadata.version, else the number."""
    if feature == "metadata.version":
        return METADATA_VERSION_NAMES.get(level, str(level))
    return str(level)



@dataclass(frozen=True)
class Feature:
    """One feature flag as ``kafka-features describe`` prints it.

    ``finalized_level`` is 0 when the feature is not finalized (the tool prints
    ``FinalizedVersionLevel: 0`` too); levels are the protocol's integers
    (``metadata.version`` 30 is ``4.3-IV0``).
    """

    name: str
    supported_min: int
    supported_max: int
    finalized_level: int
    #: The finalized-features epoch (the metadata offset that last changed them); it moves as the
    #: metadata log advances, so it is reported but not part of equality.
    epoch: int | None = field(default=None, compare=False)

    @property
    def finalized(self) -> bool:
        return self.finalized_level > 0

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class ClusterFeatures:
    """Every feature the cluster reports, by name."""

    features: dict[str, Feature] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Feature:
        return self.features[name]

    def __contains__(self, name: object) -> bool:
        return name in self.features

    def level(self, name: str) -> int:
        """Finalized level of ``name`` (0 when absent or not finalized)."""
        feature = self.features.get(name)
        return feature.finalized_level if feature else 0

    def to_dict(self) -> dict[str, object]:
        return {name: f.to_dict() for name, f in sorted(self.features.items())}



@dataclass(frozen=True)
class FeatureUpdate:
    """One feature-level change as planned, and whether it was applied.

    ``noop`` is true when the feature already is at the requested level (the
    provider then sends nothing); ``applied`` is false for dry runs and no-ops.
    """

    feature: str
    action: str  # upgrade | downgrade | disable
    from_level: int
    to_level: int
    dry_run: bool
    noop: bool
    applied: bool
    message: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)
