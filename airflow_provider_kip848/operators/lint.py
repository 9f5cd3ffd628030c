"""``ClientConfigLintOperator``: what in an application's client config breaks under the target protocol."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol import storage
from airflow_provider_kip848.kafka.rules.lint import ERROR, WARN, lint_client_config, load_properties

SEVERITY_ORDER = {"info": 0, "warn": 1, "error": 2, "never": 3}


class ClientConfigLintOperator(BaseOperator):
    """Lint client properties (a dict, properties text, or a ``.properties`` path/URL) for ``target``.

    Needs no cluster: it reads the application's config, as delivered by the
    team that owns the deployment, before the rollout starts.

    :param target: ``consumer``, ``classic`` (rollback) or ``streams``.
    :param client: ``java`` or ``librdkafka``.
    :param subscription_pattern: the application's regex subscription, if any.
    :param fail_on: ``error`` (default), ``warn`` or ``never``.
    :returns: ``{target, errors, warnings, findings: [{key, severity, message, fix}]}``
    """

    template_fields = ("properties", "target", "client", "subscription_pattern")
    ui_color = "#fff4e5"

    def __init__(self, *, properties: dict | str, target: str = "consumer", client: str = "java",
                 subscription_pattern: str | None = None, fail_on: str = "error", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if fail_on not in SEVERITY_ORDER:
            raise ValueError(f"fail_on must be one of {', '.join(SEVERITY_ORDER)}")
        self.properties, self.target, self.client = properties, target, client
        self.subscription_pattern, self.fail_on = subscription_pattern, fail_on

    def execute(self, context: Any) -> dict:
        source = self.properties
        if isinstance(source, str) and "\n" not in source and source.endswith(".properties") and "://" in source:
            source = storage.read_text(source)
        try:
            findings = lint_client_config(load_properties(source), self.target, client=self.client,
                                          subscription_pattern=self.subscription_pattern or None)
        except ValueError as exc:
            raise AirflowFailException(str(exc)) from exc
        for f in findings:
            self.log.info("[%s] %s: %s -> %s", f.severity.upper(), f.key, f.message, f.fix)
        if not findings:
            self.log.info("Nothing in this config breaks under group.protocol=%s.", self.target)
        result = {"target": self.target, "errors": sum(f.severity == ERROR for f in findings),
                  "warnings": sum(f.severity == WARN for f in findings), "findings": [f.to_dict() for f in findings]}
        worst = max((SEVERITY_ORDER[f.severity] for f in findings), default=-1)
        if worst >= SEVERITY_ORDER[self.fail_on]:
            raise AirflowFailException(
                f"The client config is not ready for group.protocol={self.target}: "
                + "; ".join(f"{f.key}: {f.fix}" for f in findings
                            if SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER[self.fail_on])
            )
        return result
