"""``KafkaClientConfigLintOperator``: what in an application's client config breaks under the target protocol."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol import storage
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.errors import GroupNotFound
from airflow_provider_kip848.kafka.model import ConsumerGroupDescription, GroupType
from airflow_provider_kip848.kafka.rules.lint import (
    ERROR,
    WARN,
    LintFinding,
    lint_client_config,
    load_properties,
    server_assignor_names,
)
from airflow_provider_kip848.operators.base import check_group_id_arg

SEVERITY_ORDER = {"info": 0, "warn": 1, "error": 2, "never": 3}


class KafkaClientConfigLintOperator(BaseOperator):
    """Lint client properties (a dict, properties text, or a ``.properties`` path/URL) for ``target``.

    It reads the application's config, as delivered by the team that owns the
    deployment, before the rollout starts. Given a connection it also reads
    the brokers' ``group.consumer.assignors`` (which server-side assignor a
    client that names none gets) and, given ``group_id``, the classic
    assignor the group uses today; without one it judges the config alone.

    :param target: ``consumer``, ``classic`` (rollback) or ``streams``.
    :param client: ``java`` or ``librdkafka``.
    :param client_version: the client library's release (e.g. ``4.1.0``, ``2.12.1``): checked against
        the first production-ready release of the target protocol.
    :param subscription_pattern: the application's regex subscription, if any.
    :param kafka_conn_id: optional connection to read the brokers' assignors (and the group's).
    :param group_id: optional group whose current assignor is mapped.
    :param fail_on: ``error`` (default), ``warn`` or ``never``.
    :param controller_result: the application controller's check (templated: the ``controller`` task's XCom).
        Its ``config`` (the client properties the application will run with on ``target``, as the platform holds
        them) is what is linted, with ``properties`` (typed into the form) on top and ``group.protocol`` set to
        ``target``; the client library and release come from it when it says. A controller that does not report
        its config makes a finding "not checked"; so does a DAG run without a controller.
    :param use_controller: whether this lint takes the controller's word at all (False: ``properties`` alone
        is the config, as a caller of this operator outside a migration DAG gives it).
    :returns: ``{target, errors, warnings, findings: [{key, severity, message, fix}], source, checked,
        linted: {key: {value, from}}}``
    """

    template_fields = ("properties", "target", "client", "client_version", "subscription_pattern",
                       "kafka_conn_id", "group_id", "controller_result")
    ui_color = "#fff4e5"

    def __init__(self, *, properties: dict | str, target: str = "consumer", client: str = "java",
                 client_version: str | None = None, subscription_pattern: str | None = None,
                 kafka_conn_id: str | None = None, group_id: str | None = None, fail_on: str = "error",
                 controller_result: dict | str | None = None, use_controller: bool = False,
                 **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        if fail_on not in SEVERITY_ORDER:
            raise ValueError(f"fail_on must be one of {', '.join(SEVERITY_ORDER)}")
        if group_id:
            check_group_id_arg(group_id)
        self.properties, self.target, self.client, self.client_version = properties, target, client, client_version
        self.subscription_pattern, self.fail_on = subscription_pattern, fail_on
        self.kafka_conn_id, self.group_id = kafka_conn_id, group_id
        self.controller_result, self.use_controller = controller_result, use_controller

    def _config(self, form: dict[str, str]) -> tuple[dict[str, str], dict[str, Any], list[LintFinding]]:
        """The properties to lint, each key's origin, and a finding when the deployed config was not read."""
        origin = {k: {"value": v, "from": "form"} for k, v in form.items()}
        if not self.use_controller:
            return form, {"source": "the properties given to the lint", "checked": True, "linted": origin}, []
        result = self.controller_result if isinstance(self.controller_result, dict) else None
        config = (result or {}).get("config")
        if not config:
            why = ("the controller does not report the config" if result else
                   "no application controller reports the deployed config")
            finding = LintFinding("(deployed config)", WARN, f"not checked: {why}; only the properties typed into "
                                                             "the form were linted",
                                  "Configure the controller's config step (docs/controllers.md), or type the "
                                  "application's properties into the form.")
            props = {"group.protocol": self.target, **form}  # the start sets the protocol; the form's keys on top
            origin = {"group.protocol": {"value": self.target, "from": "the start (group.protocol it sets)"},
                      **origin}
            return props, {"source": f"the form only ({why})", "checked": False, "linted": origin}, [finding]
        props = {str(k): str(v) for k, v in (config.get("properties") or {}).items()}
        linted = {k: {"value": v, "from": "controller"} for k, v in props.items()}
        props["group.protocol"] = self.target
        linted["group.protocol"] = {"value": self.target, "from": "the start (group.protocol it sets)"}
        for key, value in form.items():
            props[key] = value
            linted[key] = {"value": value, "from": "form (overrides the controller's)" if key in linted else "form"}
        name = (result or {}).get("controller", {}).get("name")
        if config.get("client") in ("java", "librdkafka"):
            self.client = config["client"]
        if config.get("client_version"):
            self.client_version = config["client_version"]
        return props, {"source": f"controller {name!r}: {config.get('source')}", "checked": True,
                       "linted": linted}, []

    def _cluster_facts(self) -> tuple[list[str] | None, str | None]:
        """The brokers' group.consumer.assignors and the group's classic assignor (None: not read)."""
        if not self.kafka_conn_id or self.target != "consumer":
            return None, None
        with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
            raw = hook.group_coordinator_config().values.get("group.consumer.assignors")
            assignors = list(server_assignor_names(raw)) or None
            current = None
            if self.group_id:
                try:
                    desc = hook.describe_group(self.group_id)
                except GroupNotFound:
                    desc = None
                if isinstance(desc, ConsumerGroupDescription) and desc.type is GroupType.CLASSIC:
                    current = desc.assignor or None
        return assignors, current

    def execute(self, context: Context) -> dict:
        source = self.properties
        if isinstance(source, str) and "\n" not in source and source.endswith(".properties") and "://" in source:
            source = storage.read_text(source)
        assignors, current = self._cluster_facts()
        if assignors:
            self.log.info("The brokers' group.consumer.assignors: %s", ", ".join(assignors))
        try:
            properties, origin, extra = self._config(load_properties(source))
            findings = extra + lint_client_config(properties, self.target, client=self.client,
                                          subscription_pattern=self.subscription_pattern or None,
                                          client_version=None if self.client_version in (None, "", "None")
                                          else str(self.client_version),
                                          broker_assignors=assignors, current_assignor=current)
        except ValueError as exc:
            raise AirflowFailException(str(exc)) from exc
        for f in findings:
            self.log.info("[%s] %s: %s -> %s", f.severity.upper(), f.key, f.message, f.fix)
        if not findings:
            self.log.info("Nothing in this config breaks under group.protocol=%s.", self.target)
        result = {"target": self.target, "errors": sum(f.severity == ERROR for f in findings),
                  "warnings": sum(f.severity == WARN for f in findings), "findings": [f.to_dict() for f in findings],
                  "client": self.client, "client_version": self.client_version, **origin}
        self.log.info("Linted the config from %s", origin["source"])
        worst = max((SEVERITY_ORDER[f.severity] for f in findings), default=-1)
        if worst >= SEVERITY_ORDER[self.fail_on]:
            raise AirflowFailException(
                f"The client config is not ready for group.protocol={self.target}: "
                + "; ".join(f"{f.key}: {f.fix}" for f in findings
                            if SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER[self.fail_on])
            )
        return result


#: the client properties an approval shows from the linted config (what the group protocols depend on)
SHOWN_KEYS = ("group.protocol", "partition.assignment.strategy", "group.remote.assignor", "session.timeout.ms",
              "heartbeat.interval.ms", "max.poll.interval.ms", "group.instance.id", "num.standby.replicas",
              "processing.guarantee")


def lint_lines(lint_result: dict | None) -> list[str]:
    """The approval's lines about the lint: which config was linted and from where, the group-protocol keys
    as linted (each with its origin), and every finding: errors, warnings and the notes an approver acts on too
    (the shutdown budget auto-commit needs, a release that was not checked)."""
    if not lint_result:
        return []
    lines = [f"client config linted: {lint_result.get('source', 'the properties given')}"
             + ("" if lint_result.get("checked", True) else " (the deployed config was NOT checked)")]
    linted = lint_result.get("linted") or {}
    shown = [f"{k}={linted[k]['value']} ({linted[k]['from']})" for k in SHOWN_KEYS if k in linted]
    if shown:
        lines.append("linted: " + ", ".join(shown))
    for finding in lint_result.get("findings", []):
        lines.append(f"client config ({finding['severity']}): {finding['key']}: {finding['message']}")
    return lines
