"""The logger the native backend gives librdkafka: silent, because the errors the provider raises say the same, once.

Its own module so that what only reads a topic with confluent-kafka (:mod:`.group_log`) does not load kafka-python
with the transport (issue 49: the hooks import it when a DAG file is parsed).
"""

from __future__ import annotations

from typing import Any


class _QuietLogger:
    """librdkafka logs connection errors at WARNING/ERROR; the errors we raise say the same, once."""

    def log(self, *args: Any, **kwargs: Any) -> None:  # Any: logging's own call shape
        pass

    debug = info = warning = error = exception = critical = log


#: what the native backend passes as librdkafka's ``logger``
QUIET_LOGGER = _QuietLogger()

__all__ = ["QUIET_LOGGER"]
