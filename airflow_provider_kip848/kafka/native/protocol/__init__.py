"""Kafka requests kafka-python 3.0 does not ship, declared for its message framework.

``ConsumerGroupDescribe`` (API 69, KIP-848) carries what confluent-kafka's
``describe_consumer_groups`` drops: group/assignment/member epochs and, from
v1, each member's type (classic or consumer) that tells a mixed group apart.
``StreamsGroupDescribe`` (API 89, KIP-1071) has no Python client at all.

The JSON files next to this module describe the wire format in the notation
kafka-python's ``ApiMessage`` reads; they were written for this project from
the schemas the Kafka 4.3.1 client reports at run time (``Schema.toString()``
of the generated message classes), and are checked against a real broker by
the integration tests.
"""

from kafka.protocol.api_message import ApiMessage

import airflow_provider_kip848.kafka.native.protocol as _here


class ConsumerGroupDescribeRequest(ApiMessage, load_json=_here):  # type: ignore[call-arg,misc]  # kafka-python's message metaclass, untyped
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=_here):  # type: ignore[call-arg,misc]  # kafka-python's message metaclass, untyped
    pass


class StreamsGroupDescribeRequest(ApiMessage, load_json=_here):  # type: ignore[call-arg,misc]  # kafka-python's message metaclass, untyped
    pass


class StreamsGroupDescribeResponse(ApiMessage, load_json=_here):  # type: ignore[call-arg,misc]  # kafka-python's message metaclass, untyped
    pass


#: ConsumerGroupDescribe v1 ``MemberType`` values.
MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1

__all__ = [
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "StreamsGroupDescribeRequest",
    "StreamsGroupDescribeResponse",
    "MEMBER_TYPE_CLASSIC",
    "MEMBER_TYPE_CONSUMER",
]
