"""``KafkaMigrationPreflightOperator``: refuse a migration that would fail, before anything changes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.kafka.api import read_preflight_facts
from airflow_provider_kip848.kafka.arguments import parse_flag, parse_number, parse_optional_flag, topic_list
from airflow_provider_kip848.kafka.rules.client_release import InstanceRelease, resolve_releases
from airflow_provider_kip848.kafka.rules.preflight import MODES, run_preflight
from airflow_provider_kip848.operators.base import (
    KafkaAdminBaseOperator,
    check_choice_arg,
    check_flag_arg,
    check_group_id_arg,
)

#: the modes that lower a feature: they read the groups of the type it enables
LOWERING_MODES = ("downgrade_feature", "disable_feature")


class KafkaMigrationPreflightOperator(KafkaAdminBaseOperator[dict[str, object]]):
    """Check the cluster and the group for one migration mode and fail on any hard failure.

    Modes: ``classic_to_consumer`` (online KIP-848 upgrade), ``consumer_to_classic``
    (rollback), ``classic_to_consumer_offline`` and ``consumer_to_classic_offline`` (stop all,
    Empty, restart), ``classic_to_streams`` (offline KIP-1071 migration), ``streams_to_classic``
    (its way back),
    ``enable_feature`` (finalize ``feature``=``feature_level``), ``downgrade_feature``
    (lower ``feature`` to ``feature_level``, default 0: refused while groups of the type it
    enables exist, naming them and their members), ``disable_feature`` (the same under approval:
    refused while such a group has members, empty ones warned), ``delete_streams_group`` (the
    group is a streams group without members). See
    :mod:`airflow_provider_kip848.kafka.rules.preflight` for every check.

    :param declared_broker_version: the brokers' exact release (e.g. ``4.2.1``), needed on 4.2 for
        streams migrations because 4.2.0 cannot be told from 4.2.1 over the protocol.
    :param expect_empty: offline mode: fail (True, default) or only warn (False, when the DAG
        empties the group later) on active members.
    :param rollback: the run offers an online rollback (``classic_to_consumer``): ``fail`` (default
        for such DAGs) or ``warn`` when the broker's migration policy cannot carry it; None: no check.
    :param source_topics: streams modes: the application's source topics, checked to exist (a
        missing one leaves the streams group NOT_READY) and against the topics the group committed on.
    :param application_properties: the client properties typed into the run's form (templated), on top of
        ``controller_result``'s config: what the application will run with on the target protocol, for what the
        group's members cannot show before the restart (``classic_to_streams``: a ``group.instance.id``).
    :param controller_result: the application controller's check (templated: the ``controller`` task's XCom);
        its ``config.properties``. Neither given: the application's config is not judged (the check says so).
    :param client_release: judge the client release each instance runs (``client_release``, the modes to consumer
        and to streams; the migration DAGs: True): per instance, from its log at start as the controller task read
        it (``controller_result['client_releases']``), else the controller's config (``client``,
        ``client_version``), else ``client`` / ``client_version`` below (the run's Params). Below the protocol's
        minimum fails, naming the instance, its release and the source; unknown warns.
    :param client: the run's declared client library (``java`` or ``librdkafka``; templated).
    :param client_version: the run's declared client release (templated; empty: none declared).
    :param fail_on_warn: treat warnings as failures.
    :returns: the report: ``{mode, group_id, passed, failures, warnings, checks: [{name, status, evidence, remedy}]}``
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "group_id", "mode", "declared_broker_version",
                       "feature", "feature_level", "expect_empty", "rollback", "source_topics",
                       "application_properties", "controller_result", "client", "client_version")
    ui_color = "#fff4e5"
    supported_backends = ("native",)

    def __init__(self, *, mode: str, group_id: str | None = None, declared_broker_version: str | None = None,
                 expect_empty: bool | None = None, feature: str | None = None, feature_level: int | None = None,
                 rollback: str | None = None, source_topics: list[str] | str | None = None,
                 fail_on_warn: bool = False, application_properties: Mapping[str, object] | str | None = None,
                 controller_result: Mapping[str, Any] | str | None = None,  # Any: the controller task's XCom
                 client_release: bool = False, client: str | None = None, client_version: str | None = None,
                 **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        check_choice_arg(mode, "mode", tuple(MODES))
        self.mode, self.group_id = mode, group_id
        self.declared_broker_version = declared_broker_version
        self.expect_empty, self.feature, self.feature_level = expect_empty, feature, feature_level
        if rollback is not None:
            check_choice_arg(rollback, "rollback", ("fail", "warn"))
        check_flag_arg(fail_on_warn, "fail_on_warn")
        if group_id:  # None or "": the mode decides at run time whether it needs one
            check_group_id_arg(group_id)
        self.rollback = rollback
        self.source_topics = source_topics
        self.fail_on_warn = fail_on_warn
        self.application_properties, self.controller_result = application_properties, controller_result
        check_flag_arg(client_release, "client_release")
        self.client_release, self.client, self.client_version = client_release, client, client_version

    def _client_properties(self) -> dict[str, str] | None:
        """The application's client properties: its controller's config, the form's keys on top (None: neither
        says, so the checks that need them say the config was not given)."""
        result = self.controller_result if isinstance(self.controller_result, Mapping) else {}
        config = (result.get("config") or {}) if isinstance(result.get("config"), Mapping) else {}
        form = self.application_properties
        if form in (None, "", "None"):
            form = {}
        if not isinstance(form, Mapping):
            raise AirflowFailException(f"application_properties must be a mapping of client properties, not "
                                       f"{type(form).__name__}")
        if not config.get("properties") and not form:
            return None
        return {**{str(k): str(v) for k, v in (config.get("properties") or {}).items()},
                **{str(k): str(v) for k, v in form.items()}}

    def _client_releases(self) -> tuple[InstanceRelease, ...] | None:
        """Each instance's client release and its source: its log (the controller task's reading), the controller's
        config, the run's Params (None: not judged by this task)."""
        if not parse_flag(self.client_release, "client_release"):
            return None
        result: Mapping[str, Any] = (self.controller_result if isinstance(self.controller_result, Mapping)
                                     else {})  # Any: the controller task's XCom
        config: Mapping[str, Any] = result["config"] if isinstance(result.get("config"), Mapping) else {}
        logs = result.get("client_releases")
        name = (result.get("controller") or {}).get("name")
        return resolve_releases(
            logs if isinstance(logs, list) else None, config_client=config.get("client"),
            config_version=config.get("client_version"),
            config_source=f"controller {name!r}: {config.get('source')}" if name else str(config.get("source") or ""),
            declared_client=self.client if self.client not in ("", "None") else None,
            declared_version=self.client_version if self.client_version not in ("", "None") else None,
            no_instances=(f"controller {name!r} cannot say which instances run" if name and logs is None else ""))

    def run(self, context: Context) -> dict[str, object]:
        feature_mode = self.mode in ("enable_feature", *LOWERING_MODES)
        topics = topic_list(self.source_topics, "source_topics")
        # a feature level is a 16-bit number in Kafka's protocol (UpdateFeatures' MaxVersionLevel)
        level = parse_number(self.feature_level, "feature_level", maximum=32767, integer=True, optional=True)
        facts = read_preflight_facts(self.native_hook.get_conn(), None if feature_mode else self.group_id,
                                     feature=self.feature if self.mode in LOWERING_MODES else None,
                                     source_topics=topics)
        report = run_preflight(
            facts, self.mode, group_id=self.group_id or None,
            declared_broker_version=self.declared_broker_version or None,
            expect_empty=parse_optional_flag(self.expect_empty, "expect_empty"),
            feature=self.feature or None,
            feature_level=None if level is None else int(level),
            rollback=self.rollback if self.rollback not in ("", "None") else None,
            source_topics=topics,
            client_properties=self._client_properties(),
            client_releases=self._client_releases(),
        )
        for line in report.render_text().splitlines():
            self.log.info("%s", line)
        result = report.to_dict()
        failed = report.failures + (report.warnings if parse_flag(self.fail_on_warn, "fail_on_warn") else ())
        if failed:
            context["ti"].xcom_push(key="report", value=result)
            raise AirflowFailException(
                f"Preflight {self.mode} refused: " + "; ".join(f"{c.name}: {c.evidence}. {c.remedy}" for c in failed)
            )
        return result
