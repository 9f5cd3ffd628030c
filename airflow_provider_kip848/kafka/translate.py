"""Client errors -> provider errors, and redaction of secrets in client messages.

confluent-kafka raises ``KafkaException`` carrying a ``KafkaError`` code,
kafka-python raises one exception class per Kafka error code, and several
responses carry per-group or per-feature error codes instead of raising.
Everything that leaves the core is one of :mod:`.errors`, with the broker's
own words, the remedy, and a ``retriable`` flag that says whether running the
task again can help. Messages pass through :func:`redact` first: a client may
echo a credential back.
"""

from __future__ import annotations

import re

from confluent_kafka import KafkaError
from kafka import errors as kerr

from airflow_provider_kip848.kafka import errors
from airflow_provider_kip848.kafka.model import FeatureUpdate
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.kafka.settings import redact as redact  # re-exported: the native backend reads it here

#: The answers of a group coordinator that is moving or loading: retried, never read as a group's state.
COORDINATOR_ERRORS = (kerr.NotCoordinatorError, kerr.CoordinatorNotAvailableError, kerr.CoordinatorLoadInProgressError)

#: Kafka protocol error codes the provider reads from responses.
UNSUPPORTED_VERSION = 35
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69




#: The broker's own words in a response a client printed whole (kafka-python puts the request and the response
#: into the message of the error it raises: ``error_message='Invalid metadata.version 7. Refusing ...'``).
_ERROR_MESSAGE = re.compile(r"error_message=(?P<q>['\"])(?P<text>.+?)(?P=q)(?:,|\))")


def broker_reason(exc: BaseException) -> str | None:
    """The broker's (or controller's) reason for a refusal, wherever the client left it: in the exception's
    own text (a response printed whole), or only in its ``__cause__`` / ``__context__`` / ``args`` (a
    confluent-kafka ``KafkaException`` wrapping a ``KafkaError``). None when no reason was given."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        texts = [str(current), *(a.str() if isinstance(a, KafkaError) else str(a) for a in current.args)]
        for text in texts:
            found = [m.group("text") for m in _ERROR_MESSAGE.finditer(text) if m.group("text") not in ("None", "")]
            if found:
                return found[0]
        current = current.__cause__ or current.__context__
    return None


def feature_refusal(feature: str, plan: FeatureUpdate, outcome: str) -> errors.Kip848Error:
    """The controller's per-feature answer to UpdateFeatures (anything but "OK") as a provider error."""
    if "Authorization" in outcome:
        return errors.AuthorizationFailed(f"Not allowed to change {feature}: {outcome}",
                                          remedy="The principal needs ALTER on the CLUSTER resource.",
                                          resource_type="CLUSTER")
    return errors.InvalidFeatureLevel(
        f"The controller refused {plan.action} of {feature} to {plan.to_level}: {outcome}")



def group_error(group_id: str, code: int, message: str | None, settings: ClientSettings) -> errors.Kip848Error:
    """A per-group error code of a group request (DescribeGroups, ConsumerGroupDescribe ...) as a provider error."""
    error = kerr.for_code(code)
    name = error.__name__
    text = message or getattr(error, "description", None) or name
    if code == GROUP_ID_NOT_FOUND:
        return errors.GroupNotFound(f"Group {group_id!r}: {message or 'not found'}.")
    if name == "NonEmptyGroupError" or code == NON_EMPTY_GROUP:
        return errors.GroupNotEmpty(f"Group {group_id!r} is not empty: {text}.")
    translated = translate_kafka_python(error(text), settings)
    if isinstance(translated, errors.BrokerRefused):
        return errors.BrokerRefused(f"Group {group_id!r}: the broker answered {name}: {text}.", error=name,
                                    retriable=translated.retriable)
    return translated



def translate_kafka_python(exc: Exception, settings: ClientSettings) -> errors.Kip848Error:
    """kafka-python exception -> this provider's error (:class:`BrokerRefused` when nothing more specific fits)."""
    name = type(exc).__name__
    where = settings.bootstrap_servers
    if isinstance(exc, kerr.KafkaTimeoutError):
        return errors.KafkaConnectionError(f"No broker answered at {where} in time ({exc}).")
    if isinstance(exc, kerr.KafkaConnectionError):
        return errors.KafkaConnectionError(f"Cannot reach {where}: {exc}.")
    if "Authentication" in name or "SaslAuthentication" in name:
        return errors.AuthenticationFailed(f"The brokers at {where} refused this connection's credentials ({name}).")
    if name.endswith("AuthorizationFailedError"):
        # Cluster-, Group-, Topic-, TransactionalId-AuthorizationFailedError; str(exc) repeats the whole
        # request and response, so only the error's name and description are kept
        resource = name.removesuffix("AuthorizationFailedError").upper() or None
        description = getattr(exc, "description", "") or ""
        return errors.AuthorizationFailed(
            f"The principal of this connection is not authorized on {resource or 'a resource'} for this request "
            f"({name}{': ' + description if description else ''}).",
            resource_type=resource,
        )
    if isinstance(exc, kerr.RequestTimedOutError):
        return errors.OperationTimedOut(f"The cluster at {where} did not answer in time: {exc}.")
    if isinstance(exc, kerr.UnsupportedVersionError):
        return errors.UnsupportedBrokerVersion(f"The brokers at {where} do not support this request: {exc}.")
    if name in ("InvalidUpdateVersionError", "FeatureUpdateFailedError"):
        # UpdateFeatures refused as a whole (v2+ answers carry only the top-level error): the controller's
        # reason (a metadata.version downgrade that might lose metadata) is only in the response it printed
        reason = broker_reason(exc) or getattr(exc, "description", "") or name
        return errors.InvalidFeatureLevel(
            f"The controller refused the feature change ({name}): {redact(reason, settings)}",
            remedy="Read the controller's reason above: kafka-features describe shows the finalized levels and the "
                   "range each broker supports; a metadata.version downgrade is refused where it could lose metadata.")
    if isinstance(exc, COORDINATOR_ERRORS):
        return errors.CoordinatorUnavailable(
            f"A group coordinator at {where} kept answering {name} for {settings.request_timeout_ms} ms", error=name)
    if getattr(exc, "retriable", False):
        return errors.OperationTimedOut(
            f"The cluster at {where} kept answering {name} for {settings.request_timeout_ms} ms "
            "(a broker restarting or a coordinator loading)."
        )
    return _refused(name, broker_reason(exc) or getattr(exc, "description", "") or "", str(exc),
                    bool(getattr(exc, "retriable", False)), settings)


def _refused(name: str, description: str, text: str, retriable: bool, settings: ClientSettings) -> errors.BrokerRefused:
    """The fallback: the error's name and the broker's words, never the whole request a client may print."""
    words = description or text
    if len(words) > 300:  # kafka-python prints the request and response after the description
        words = words[:300] + "..."
    return errors.BrokerRefused(f"The brokers at {settings.bootstrap_servers} refused the request: {name}"
                                f"{': ' + redact(words, settings) if words and words != name else ''}.",
                                error=name, retriable=retriable)



def confluent_retriable(err: KafkaError) -> bool:
    """Whether asking again can help: librdkafka's flag, or the Kafka protocol's for a broker error code.

    librdkafka leaves the flag unset on per-partition errors it hands back in a result (a ListOffsets
    answer of NOT_LEADER_OR_FOLLOWER for a partition whose leader just moved), which the protocol marks
    retriable: the same request asked again of the new leader succeeds.
    """
    if err.retriable():
        return True
    code = err.code()
    return code > 0 and bool(getattr(kerr.for_code(code), "retriable", False))


def translate_confluent(exc: Exception, settings: ClientSettings) -> errors.Kip848Error:
    """confluent-kafka KafkaException / KafkaError -> this provider's error (:class:`BrokerRefused` as fallback)."""
    err = exc if isinstance(exc, KafkaError) else next((a for a in exc.args[:1] if isinstance(a, KafkaError)), None)
    cause = exc.__cause__
    while err is None and cause is not None:  # a wrapper whose KafkaError (the reason) is only in its cause
        err = next((a for a in cause.args[:1] if isinstance(a, KafkaError)), None)
        cause = cause.__cause__
    if err is None:
        return _refused(type(exc).__name__, broker_reason(exc) or "", str(exc), False, settings)
    code = err.code()
    where = settings.bootstrap_servers
    text = err.str()
    if code in (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT):
        return errors.OperationTimedOut(f"The cluster at {where} did not answer in time: {text}.")
    if code in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE):
        return errors.KafkaConnectionError(f"Cannot reach {where}: {text}.")
    if code in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
        return errors.AuthenticationFailed(
            f"The brokers at {where} refused this connection's credentials: {redact(text, settings)}.")
    if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
        return errors.AuthorizationFailed(f"Not authorized on the GROUP: {text}.",
                                          remedy="Grant the principal the needed ACL on the group (DESCRIBE, READ "
                                            "or ALTER_CONFIGS/DESCRIBE_CONFIGS).",
                                          resource_type="GROUP")
    if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        return errors.AuthorizationFailed(f"Not authorized on a TOPIC: {text}.",
                                          remedy="Grant the principal DESCRIBE (and READ for offsets) on the group's "
                                            "topics.",
                                          resource_type="TOPIC")
    if code == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
        return errors.AuthorizationFailed(f"Not authorized on the CLUSTER: {text}.",
                                          remedy="Grant the principal the needed ACL on the CLUSTER resource.",
                                          resource_type="CLUSTER")
    if code == KafkaError.GROUP_ID_NOT_FOUND:
        return errors.GroupNotFound(f"{text}.")
    if code == KafkaError.NON_EMPTY_GROUP:
        return errors.GroupNotEmpty(f"{text}.")
    if code == KafkaError.INVALID_CONFIG:
        return errors.InvalidGroupConfig(f"The broker refused the config: {text}.")
    if code == KafkaError.UNSUPPORTED_VERSION:
        return errors.UnsupportedBrokerVersion(f"The brokers at {where} do not support this request: {text}.")
    if code in (KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS):
        return errors.GroupNotEmpty(f"The group has active members: {text}.")
    return _refused(err.name(), "", text, confluent_retriable(err), settings)
