"""Small steps the single-group DAGs' ``@task`` functions call: the logic lives here, the DAG files wire it.

* :func:`capture_output`: the output topic's end offsets, the fixed range the continuity check reads;
* :func:`application_properties`, :func:`carried_settings`, :func:`carried_notes`: the group configs a
  streams or consumer migration carries over from the application's client properties
  (``kafka.rules.carried_settings``), with the streams restart's rebalance delay, and their lines in the approval;
* :func:`missing_source_topics`, :func:`diagnose_streams`: why a streams application did not become Stable;
* :func:`consumer_validation`: the consumer migrations' PySpark validation tasks (the checks' spec, the
  ``validate_with_spark`` gate, the validation), wired.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow.sdk import XComArg, task
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol.plan import Change
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.arguments import topic_list
from airflow_provider_kip848.kafka.rules.carried_settings import CarriedSetting, carry_over, to_set
from airflow_provider_kip848.kafka.rules.lag import MARGIN_FRACTION, MARGIN_RECORDS
from airflow_provider_kip848.operators.validation import KafkaValidationOperator, consumer_migration_checks

#: the streams group config the migration lowers for the restart only (put back once the group is Stable)
RESTART_DELAY = "streams.initial.rebalance.delay.ms"


def feature_readback(params: dict) -> dict:
    """The feature's finalized level read back after a change (the feature DAGs' ``verify``): the run's
    ``level`` or the task fails, naming both (a change the controller accepted but did not apply)."""
    with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
        level = hook.describe_features().level(params["feature"])
    if level != int(params["level"]):
        raise AirflowFailException(f"{params['feature']} reads back at {level}, not {params['level']}.")
    return {"feature": params["feature"], "finalized_level": level}


def capture_output(params: dict) -> dict:
    """End offsets of the run's ``output_topic`` (the fixed range the continuity check reads), or {} without one."""
    with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
        return hook.output_range(params["output_topic"])


def application_properties(params: dict, controller_result: dict | None) -> dict:
    """The application's client properties: the controller's reading of the platform, the form's on top."""
    config = (controller_result or {}).get("config") or {}
    return {**(config.get("properties") or {}), **(params["application_properties"] or {})}


def carried_settings(params: dict, controller_result: dict | None = None, *, group_type: str = "streams") -> dict:
    """The group configs this run sets, each with its source (see kafka.rules.carried_settings): a streams
    migration's standbys and timeouts (the application's ``application_id``; its config for streams as the
    controller reads it, the form's ``application_properties`` on top), a consumer migration's timeouts
    (``group_id``; the config the application runs with now, the controller's ``source_config``: on the consumer
    protocol the client refuses them); a move to classic sets none (classic members bring their own)."""
    if group_type == "classic":
        return {"settings": [], "set": {}, "restart_delay": None}
    streams = group_type == "streams"
    requested = {f"{group_type}.session.timeout.ms": params["session_timeout_ms"],
                 f"{group_type}.heartbeat.interval.ms": params["heartbeat_interval_ms"]}
    if streams:
        requested["streams.num.standby.replicas"] = params["standby_replicas"]
    group_id = params["application_id"] if streams else params["group_id"]
    with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
        dynamic = hook.describe_group_config(group_id).dynamic
        broker = hook.group_coordinator_config().values
    known = {k: v for k, v in dynamic.items() if v is not None}
    if streams:  # the streams client ignores them (no error): the config it will run with holds them
        properties = application_properties(params, controller_result)
    else:  # the consumer protocol refuses them: the config the application runs with now (classic) holds them
        properties = ((controller_result or {}).get("source_config") or {}).get("properties") or {}
    settings = carry_over(requested, properties, known, broker, group_type=group_type)
    to_apply = to_set(settings)
    out: dict[str, Any] = {"settings": [s.to_dict() for s in settings], "set": to_apply, "restart_delay": None}
    if params.get("restart_rebalance_delay_ms") is not None:  # for the restart only: put back once Stable
        previous = dynamic.get(RESTART_DELAY)
        to_apply[RESTART_DELAY] = str(params["restart_rebalance_delay_ms"])
        out["restart_delay"] = {"value": to_apply[RESTART_DELAY], "previous": previous,
                                "broker_default": broker.get("group." + RESTART_DELAY),
                                "restore_set": {RESTART_DELAY: previous} if previous is not None else {},
                                "restore_delete": [] if previous is not None else [RESTART_DELAY]}
    return out


def group_config_changes(group: str, configs: dict, why: Callable[[str], str]) -> list[Change]:
    """The plan's rows for the group configs a run sets (``configs``: their dry run's result): each requested
    value the group does not have yet, from its value now (else the brokers' default), with ``why(key)``; set
    for the type the group is becoming (``for_group_type``), each row says so: the approval shows the override."""
    before = configs.get("before") or {}
    becoming = configs.get("for_group_type")
    now = configs.get("group_type") or "not existing yet"
    told = (f" (for the {becoming} group it becomes: for_group_type={becoming}, the group is {now} now)"
            if becoming and becoming != configs.get("group_type") else "")
    return [Change("group_config", f"{group}:{key}", before.get(key, "(broker default)"), str(value), why(key) + told)
            for key, value in sorted((configs.get("requested_set") or {}).items()) if before.get(key) != str(value)]


def carried_notes(carried: dict) -> list[str]:
    """The approval's lines on the carried settings: each value set, from where, or kept."""
    notes = []
    for raw in carried["settings"]:
        setting = CarriedSetting(**{k: raw[k] for k in ("config", "current", "value", "source")})
        if setting.changes:
            notes.append(f"{setting.config}: {setting.value} from the {setting.source}")
        else:
            notes.append(f"{setting.config}: {setting.current or 'unset'}, kept ({setting.source})")
    return notes


def missing_source_topics(hook: KafkaGroupAdminHook, params: dict) -> list[str]:
    """The run's ``source_topics`` that do not exist."""
    topics = topic_list(params["source_topics"], "source_topics") or []
    counts = hook.get_conn().topic_partition_counts(topics) if topics else {}
    return sorted(t for t, n in counts.items() if n is None)


def diagnose_streams(params: dict) -> dict:
    """Why the streams application did not become Stable, as far as the cluster shows it."""
    try:
        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            desc = hook.describe_group(params["application_id"])
            missing = missing_source_topics(hook, params)
    except Exception as exc:  # noqa: BLE001 - a diagnosis must not hide the fallback
        return {"error": str(exc)}
    found: dict[str, Any] = {"type": desc.type.value, "state": desc.state.value, "members": len(desc.members),
             "missing_source_topics": missing}
    if desc.state.value == "NotReady":
        found["reason"] = ("the streams group is NOT_READY: " + (f"source topic(s) {', '.join(missing)} do not exist"
                           if missing else "a source or internal topic is missing or not co-partitioned"))
    elif not desc.members:
        found["reason"] = "no streams member joined: the application did not start (see its log)"
    return found


def consumer_validation(snapshot_before: Any, snapshot_after: Any, out_before: Any, out_after: Any,  # Any: XComArgs
                        *,
                        kafka_conn_id: str, output_dir: str, title: str,
                        task_id: str = "validate") -> tuple[XComArg, KafkaValidationOperator]:
    """``validation_spec`` (offsets preserved, lag, and the output's continuity when there is an output topic)
    -> ``spark_enabled`` (the ``validate_with_spark`` Param) -> the validation, ``task_id``; returns (spec task,
    validation task) for the DAG to wire after its last snapshot and before its report."""

    @task(task_id="validation_spec")
    def validation_spec(before_snap: dict, after_snap: dict, before_out: dict, after_out: dict,
                        params: dict | None = None) -> dict:
        params = params or {}
        return consumer_migration_checks(before_snap["path"], after_snap["path"], before_out, after_out,
                                         max_lag=params["max_lag"], output_topic=params["output_topic"],
                                         id_source=params["id_source"], allowed_duplicates=params["allowed_duplicates"],
                                         margin_fraction=params.get("lag_margin_fraction", MARGIN_FRACTION),
                                         margin_records=params.get("lag_margin_records", MARGIN_RECORDS))

    @task.short_circuit(task_id="spark_enabled", ignore_downstream_trigger_rules=False)
    def spark_enabled(params: dict | None = None) -> bool:
        return bool((params or {})["validate_with_spark"])

    rendered_spec: Any = "{{ ti.xcom_pull(task_ids='validation_spec') }}"  # templated: rendered to the spec's dict
    validate = KafkaValidationOperator(task_id=task_id, kafka_conn_id=kafka_conn_id, checks=rendered_spec,
                                       output_dir=output_dir, reader="{{ params.reader }}", title=title)
    spec = validation_spec(snapshot_before, snapshot_after, out_before, out_after)
    spec >> spark_enabled() >> validate
    return spec, validate


__all__ = ["RESTART_DELAY", "application_properties", "capture_output", "carried_notes", "carried_settings",
           "consumer_validation", "group_config_changes",
           "diagnose_streams", "missing_source_topics"]
