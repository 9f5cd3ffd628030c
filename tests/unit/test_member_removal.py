"""LeaveGroup's per-member answers as the provider reads them (kafka-python's error classes)."""

from __future__ import annotations

from kafka.errors import FencedInstanceIdError, NoError, UnknownMemberIdError

from airflow_provider_kip848.kafka.native.converters import removal_outcome


def test_a_member_already_gone_is_told_from_a_failed_removal():
    results = {"m-1": NoError, "m-2": UnknownMemberIdError, "static-3": FencedInstanceIdError}
    removed, failed, gone = removal_outcome(results, {"m-1": "m-1", "m-2": "m-2", "static-3": "inst-3"})
    assert removed == ["m-1"] and gone == ["m-2"] and failed == {"inst-3": "FencedInstanceIdError"}
