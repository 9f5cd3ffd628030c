"""One exception tree for everything the provider can refuse or fail at.

Every error carries two parts: ``what`` went wrong, in the cluster's own
vocabulary, and a ``remedy`` that tells the operator what to do next. ``str()``
of an error is both, on one line, because that is what ends up in an Airflow
task log or a terminal and it must be actionable without reading code.

This module imports nothing from Airflow so the core can be used from a
notebook or a plain script.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any


class Kip848Error(Exception):
    """Base class of every error raised by this provider."""

    #: Default remedy for the class; instances may give a more precise one.
    remedy: str = ""
    #: True when retrying the same call later can succeed (the cluster was unreachable or slow);
    #: False for bad input and refusals, which a retry would only repeat.
    retriable: bool = False

    def __init__(self, what: str, *, remedy: str | None = None) -> None:
        what = what.rstrip()
        while what.endswith(".."):  # a client message that ends in "." inside our own sentence
            what = what[:-1]
        self.what = what
        if remedy is not None:
            self.remedy = remedy
        super().__init__(self.message)

    @property
    def message(self) -> str:
        if not self.remedy:
            return self.what
        sep = " " if self.what.endswith((".", ":", "!", "?")) else ". "
        return f"{self.what}{sep}{self.remedy}"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message


class KafkaConnectionError(Kip848Error):
    """The cluster could not be reached at all (bootstrap servers wrong, broker down)."""

    retriable = True
    remedy = "Check the bootstrap servers and that the brokers are up and reachable from this worker."


class CoordinatorUnavailable(Kip848Error):
    """A group's coordinator kept answering "not the coordinator", "not available" or "still loading".

    Normal for seconds while a coordinator moves (a broker restarting or dying) or loads its
    ``__consumer_offsets`` partition; retriable. When it lasts, the partition fails to load on the
    broker (e.g. KAFKA-20254 on Kafka 4.2.0): the message names the group's ``__consumer_offsets``
    partition and the node leading it, whose log says why.
    """

    retriable = True
    remedy = ("Retry in a few seconds. If it lasts, read the log of the node named above for errors loading "
              "that __consumer_offsets partition (\"Failed to load\", \"is not a streams group\").")

    def __init__(self, what: str, *, remedy: str | None = None, group_id: str | None = None,
                 partition: int | None = None, leader: int | None = None, error: str | None = None) -> None:
        self.group_id, self.partition, self.leader, self.error = group_id, partition, leader, error
        super().__init__(what, remedy=remedy)


class OperationTimedOut(Kip848Error):
    """A request or a tool did not answer in time; the change may or may not have been applied."""

    retriable = True
    remedy = (
        "Re-run the task: every operation of this provider is idempotent and reads the "
        "cluster state before changing it."
    )


class AuthorizationFailed(Kip848Error):
    """The principal lacks a Kafka ACL for the operation.

    ``resource_type`` (``CLUSTER``, ``GROUP``, ``TOPIC`` ...) is the kind of resource the broker
    refused, when known; ``operation`` and ``resource_name`` are set once the provider knows which
    permission the refused request needs (see :func:`requires`), e.g. ``ALTER`` on ``CLUSTER`` for
    a feature change or ``READ`` on ``GROUP 'orders'`` for an offsets commit.
    """

    remedy = "Grant the missing ACL to the principal of this connection, or use a connection with more rights."

    def __init__(self, what: str, *, remedy: str | None = None, resource_type: str | None = None,
                 operation: str | None = None, resource_name: str | None = None) -> None:
        self.resource_type = resource_type
        self.operation = operation
        self.resource_name = resource_name
        super().__init__(what, remedy=remedy)

    @property
    def permission(self) -> str | None:
        """``"READ on GROUP 'orders'"``, when the missing permission is known."""
        if self.operation is None or self.resource_type is None:
            return None
        return _permission_text(self.operation, self.resource_type, self.resource_name)


#: Kafka ACL operation (AclOperation name) -> the spelling ``kafka-acls --operation`` takes.
_ACL_CLI_OPERATIONS = {
    "READ": "Read", "WRITE": "Write", "CREATE": "Create", "DELETE": "Delete", "ALTER": "Alter",
    "DESCRIBE": "Describe", "CLUSTER_ACTION": "ClusterAction", "DESCRIBE_CONFIGS": "DescribeConfigs",
    "ALTER_CONFIGS": "AlterConfigs", "IDEMPOTENT_WRITE": "IdempotentWrite",
}


def _permission_text(operation: str, resource_type: str, resource_name: str | None) -> str:
    name = f" {resource_name!r}" if resource_name and resource_type != "CLUSTER" else ""
    return f"{operation} on {resource_type}{name}"


def missing_permission(operation: str, resource_type: str, resource_name: str | None = None, *, action: str,
                       principal: str | None = None, detail: str = "") -> AuthorizationFailed:
    """The error for one known missing ACL: says what was refused, which permission it needs, and how to grant it."""
    who = f"User:{principal}" if principal else "the principal of this connection"
    one_name = shlex.quote(resource_name) if resource_name and ", " not in resource_name else "<name>"
    flag = "--cluster" if resource_type == "CLUSTER" else f"--{resource_type.lower()} {one_name}"
    cli_op = _ACL_CLI_OPERATIONS.get(operation, operation.title())
    note = ""
    if resource_type == "GROUP" and operation == "DESCRIBE":
        note = " (Kafka hides groups a principal may not describe, so whether it exists cannot be told)"
    return AuthorizationFailed(
        f"Not authorized to {action}: {who} needs {_permission_text(operation, resource_type, resource_name)}"
        f"{note}" + (f"; the broker said: {detail}" if detail else "") + ".",
        remedy=f"Grant it (kafka-acls --add --allow-principal {'User:' + principal if principal else 'User:<name>'} "
               f"--operation {cli_op} {flag}), or use a connection with more rights.",
        resource_type=resource_type, operation=operation, resource_name=resource_name,
    )


@contextmanager
def requires(action: str, *needs: tuple[str, str, str | None], principal: str | None = None) -> Iterator[None]:
    """Turn an :class:`AuthorizationFailed` raised inside into the specific permission ``action`` needs.

    ``needs`` are ``(operation, resource_type, resource_name)`` of the request(s) made inside, e.g.
    ``("READ", "GROUP", "orders"), ("READ", "TOPIC", "payments")`` for an offsets commit. The
    permission is chosen by the resource type the broker refused; an error that already names its
    permission (from a nested step) passes unchanged.
    """
    try:
        yield
    except AuthorizationFailed as exc:
        if exc.operation is not None:
            raise
        matching = [n for n in needs if exc.resource_type in (None, n[1])]
        if exc.resource_type is None and len(matching) > 1:
            matching = matching[:1] if len({n[1] for n in matching}) == 1 else []
        if not matching:
            raise
        operation, resource_type, name = matching[0]
        raise missing_permission(operation, resource_type, name, action=action, principal=principal,
                                 detail=exc.what) from exc


class AuthenticationFailed(Kip848Error):
    """The brokers refused the connection's credentials (SASL or TLS)."""

    remedy = (
        "Check the connection's username, password and SASL mechanism (and the CA file for TLS); "
        "the secret itself is never logged."
    )


class GroupNotFound(Kip848Error):
    """The group does not exist (or is not of the type the request needs)."""

    remedy = "Check the group id (kafka-groups --list shows every group with its type)."


class MemberNotFound(GroupNotFound):
    """A member id or ``group.instance.id`` the run names is not a member of the group, and no earlier try of the
    task removed it: a mistyped id, which a retry would repeat (nothing was removed)."""

    remedy = ("Check the ids against the group's members (kafka-consumer-groups --describe --members --verbose "
              "shows member ids and group.instance.ids), or pass all_members=True.")


class WrongGroupType(Kip848Error):
    """The group exists but is of another type than the action needs (e.g. a streams group for LeaveGroup)."""

    remedy = "Use the action for the group's actual type."

    def __init__(self, what: str, *, remedy: str | None = None,
                 actual: Any = None,  # Any: a GroupType; errors.py sits below model/ and cannot import it
                 ) -> None:
        #: the group's actual type (a GroupType) when known
        self.actual = actual
        super().__init__(what, remedy=remedy)


class GroupNotEmpty(Kip848Error):
    """The action needs an empty group (no active members) and the group has members."""

    remedy = (
        "Stop every instance of the application (or remove its members) and wait until the group "
        "is Empty, then retry."
    )


class MemberNotReconciled(Kip848Error):
    """A member of a consumer or streams group stayed behind its group's assignment (its member epoch below
    the group's assignment epoch, or its partitions or tasks not yet the target ones) for longer than the wait
    allows: it does not finish revoking (a blocked rebalance callback, a stuck poll loop)."""

    remedy = (
        "Look at that instance (its rebalance callback, its poll loop; kafka-consumer-groups --describe --members "
        "--verbose shows CURRENT-EPOCH / TARGET-EPOCH and both assignments); restart it, or raise the wait's "
        "reconcile bound if its revocation is slow by design."
    )


class InvalidFeatureLevel(Kip848Error):
    """A feature name or level the cluster does not support, or a change in the wrong direction."""

    remedy = "Run kafka-features describe (or describe_features()) for the supported range."


class InvalidGroupConfig(Kip848Error):
    """A group-level config change the broker would refuse."""

    remedy = "Fix the config name or value; the broker's bounds are in the message."


class ConfigUnknown(InvalidGroupConfig):
    """The config name is not a group-level config of this broker version."""


class ConfigOutOfBounds(InvalidGroupConfig):
    """The value is outside the bounds the broker's group.* configs allow, or of the wrong type."""


class ConfigNotApplicable(InvalidGroupConfig):
    """A group config of another group type than the group's (a ``streams.*`` key on a consumer group, any key on
    a classic group), or for a group whose type is unknown (it does not exist yet): Kafka stores it, and it never
    applies."""

    remedy = ("Set the configs of the group's own type; for a group about to change type (a migration carrying "
              "settings over) or one that does not exist yet, name that type with for_group_type.")


class InvalidArgument(Kip848Error, ValueError):
    """An argument of the wrong type or shape (a string where a list or a number is needed, ...)."""

    remedy = "Fix the task's arguments (each operator's documentation lists their types)."


class InvalidGroupId(InvalidArgument):
    """No group id, an empty one, or not a string."""

    remedy = ("Pass the group id: the consumers' group.id or the Streams application.id "
              "(kafka-groups --list shows every group).")


class InvalidMaintenanceWindow(InvalidArgument):
    """A maintenance window that cannot be what was meant: a day or time that does not read, a time with a UTC
    offset, start equal to end, or a window longer than the deployment's maximum (a swapped start and end)."""

    remedy = ("Give the window as MON..SUN days (comma-separated, ranges like THU-FRI), HH:MM opening and closing "
              "times on the clock of window_tz (an IANA zone such as Europe/Berlin).")


class InvalidSchedule(InvalidArgument):
    """A deployment's schedule for a DAG (``[kip848] <dag_id>_schedule``) that does not read: the DAG file's
    import fails with it, never falling back to another schedule or to none."""

    remedy = ("Give the schedule as five cron fields and an IANA time zone, e.g. '0 2 * * SAT Europe/Berlin', or "
              "unset the option (the DAG then runs only when triggered).")


class UnattendedRunRefused(Kip848Error):
    """A run nobody triggered by hand (scheduled, backfill, asset-triggered) that would act with what the
    deployment did not configure: an application controller missing from the registry, or the example's
    application named by a shipped default."""

    remedy = ("Configure what the run would use (the controller in [kip848] controllers, the group in your copy "
              "of the DAG's Params), or trigger the run by hand with the values you mean.")


class UnknownTopicOrPartition(Kip848Error):
    """A topic or partition named in the request does not exist."""

    remedy = "Check the topic name and partition number (kafka-topics --describe)."


class InvalidOffset(Kip848Error):
    """An offset to commit lies outside the partition's log."""

    remedy = "Use an offset between the partition's log start and log end (describe the group's offsets)."


class OffsetsNotConfirmed(Kip848Error):
    """Offsets were written, but reading them back does not show them (yet): the outcome is unknown.

    Raised by ``alter_group_offsets`` when its read-back does not show the write. Retriable:
    the write may still become visible (a coordinator moving), and a rerun of an
    idempotent restore writes only what is still missing.
    """

    retriable = True
    remedy = "Retry: the restore is idempotent and writes only the partitions still behind the snapshot."


class BrokerRefused(Kip848Error):
    """A broker refusal no more specific error describes: the broker's error name and its own words.

    ``retriable`` is the broker's own classification of the error code (a
    permanent refusal is not retried by Airflow; a transient one is).
    """

    remedy = "Read the broker's answer above (the Kafka protocol documentation lists each error code)."

    def __init__(self, what: str, *, remedy: str | None = None, error: str | None = None,
                 retriable: bool = False) -> None:
        self.error = error
        self.retriable = retriable
        super().__init__(what, remedy=remedy)


class FeatureInUse(Kip848Error):
    """A downgrade or disable of ``group.version``/``streams.version``/``share.version`` while groups need it.

    Lowering the level under live KIP-848 consumers or streams members makes
    their clients fail fatally, and the groups' state can no longer be read.
    ``groups`` maps each dependent group id to its number of members.
    """

    remedy = ("Migrate or stop those groups first (their members must be gone and the groups deleted or "
              "converted), or pass override_dependent_groups=True through an approved change if the outage is "
              "intended.")

    def __init__(self, what: str, *, remedy: str | None = None, groups: Mapping[str, int] | None = None) -> None:
        self.groups = dict(groups or {})
        super().__init__(what, remedy=remedy)


class KafkaToolError(Kip848Error):
    """A Kafka CLI tool failed in a way no more specific error describes; carries the tool's own words."""

    remedy = "Read the tool's message above; rerun with the same arguments to reproduce it."


class UnsupportedBrokerVersion(Kip848Error):
    """The broker is too old (or a known-bad release) for the requested action."""

    remedy = "Upgrade the brokers first: KIP-848 consumer groups need Kafka 4.0+, streams groups 4.2.1+."


class ResourceLocked(Kip848Error):
    """Another run holds the change lock of this group or feature (see :mod:`kafka.lock`)."""

    remedy = "Wait for the other run to finish, then rerun."

    def __init__(  # Any: JSON of several shapes (XCom, reports)
            self, what: str, *, remedy: str | None = None, holder: dict[str, Any] | None = None) -> None:
        #: the current holder's record (DAG, run, triggered by, host, since)
        self.holder = holder
        super().__init__(what, remedy=remedy)


class SnapshotInvalid(Kip848Error):
    """An offsets snapshot that cannot be read (not JSON, another format or version, a field missing)."""

    remedy = "Point the task at a snapshot written by KafkaSnapshotGroupOffsetsOperator (or take a new one)."


class SnapshotConflict(Kip848Error):
    """A snapshot that belongs to another group or cluster than the one the task works on."""

    remedy = "Use another path (the default includes the run id), or delete the old snapshot if it is obsolete."


class SnapshotTopicsNotRead(SnapshotConflict):
    """A restore would commit offsets on topics the group no longer reads (offsets nobody consumes)."""

    remedy = ("Take a new snapshot of what the group reads now; to commit these offsets anyway (the application "
              "will read those topics again), pass allow_unread_topics=True, which the audit record states.")


class SnapshotFromOtherCluster(SnapshotConflict):
    """A snapshot taken on another cluster (its cluster id differs) than the one the task connects to."""

    remedy = ("Point the task at the snapshot of this cluster. For a deliberate cross-cluster restore pass "
              "allow_other_cluster=True (recorded in the audit trail).")


class ArtifactUnwritable(Kip848Error):
    """A snapshot, report or audit record cannot be written (permissions, a full disk, a missing bucket)."""

    remedy = "Fix the location (it must be writable by the Airflow worker) or point the task at another one."


class ArtifactRefused(InvalidArgument):
    """A run's artifact asked for by a name that is not a plain file name of that run's report folder (a path,
    ``..``, a hidden file, a link leading out of the folder): refused, nothing read."""

    remedy = "Ask for a file by its name as the run's report page lists it (report.md, report.json, downtime.svg ...)."


class InvalidClientSettings(Kip848Error):
    """The connection's bootstrap servers or security settings cannot be used."""

    remedy = "Fix the Kafka connection (bootstrap servers and security settings) and retry."


class ConnectionNotFound(InvalidClientSettings):
    """No Airflow connection with the given id (a typo in ``kafka_conn_id``): a retry cannot find it either."""

    remedy = "Create the connection (Admin > Connections, type kafka_admin) or fix kafka_conn_id."


# -- broker metrics (Prometheus text from each broker's JMX exporter) ---------------------------


class MetricsUnavailable(Kip848Error):
    """A broker's metrics endpoint did not answer (refused, timed out, unknown host, HTTP 5xx); ``urls`` names
    every endpoint that failed. Retriable: an exporter restarting with its broker answers again."""

    retriable = True
    remedy = ("Check that the Prometheus JMX exporter runs on each broker and that this worker reaches it "
              "(the connection's metrics_url extra lists one URL per broker), then retry.")

    def __init__(self, what: str, *, remedy: str | None = None, urls: tuple[str, ...] = ()) -> None:
        self.urls = urls
        super().__init__(what, remedy=remedy)


class MetricsUnreadable(Kip848Error):
    """A metrics endpoint answered, but not with Prometheus text (HTTP 404, an HTML page, a malformed line)."""

    remedy = ("Point the connection's metrics_url at each broker's exporter endpoint, "
              "e.g. http://broker1:7071/metrics (the exporter's own port and path).")


# -- where the Kafka CLI tools come from ------------------------------------------------


class ToolchainError(Kip848Error):
    """The Kafka CLI tools cannot run on this machine (no Java, no Maven to fetch them, a bad version)."""


class JavaNotFoundError(ToolchainError):
    remedy = (
        "Install a JDK 17 or newer (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless; "
        "macOS: brew install openjdk@17) or point JAVA_HOME at one."
    )


class MavenNotFoundError(ToolchainError):
    remedy = (
        "Install Apache Maven 3.6+ (Debian/Ubuntu: apt-get install maven; macOS: brew install maven) "
        "or set KIP848_MVN to the mvn executable. Maven is only needed the first time, to fetch the Kafka jars."
    )


class ArtifactResolutionError(ToolchainError):
    remedy = (
        "Check that Maven Central (or the mirror in ~/.m2/settings.xml) is reachable and that the "
        "Kafka version exists there, then run the command again."
    )


class UnsupportedKafkaVersion(ToolchainError):
    remedy = "Use a Kafka 4.x release, for example 4.4.0 (the default), 4.3.1 or 4.2.2."
