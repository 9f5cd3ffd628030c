"""LeaveGroup's per-member answers as the provider reads them (kafka-python's error classes), and which static
members the rolling upgrade removes."""

from __future__ import annotations

import pytest
from kafka.errors import FencedInstanceIdError, NoError, UnknownMemberIdError

from airflow_provider_kip848.controllers import ApplicationStatus, Instance
from airflow_provider_kip848.engine.instance_roll import unmatched_static_members
from airflow_provider_kip848.hooks.members import departed_static_members
from airflow_provider_kip848.kafka.model import ConsumerGroupMember, MemberProtocol
from airflow_provider_kip848.kafka.native.converters import removal_outcome


def test_a_member_already_gone_is_told_from_a_failed_removal():
    results = {"m-1": NoError, "m-2": UnknownMemberIdError, "static-3": FencedInstanceIdError}
    removed, failed, gone = removal_outcome(results, {"m-1": "m-1", "m-2": "m-2", "static-3": "inst-3"})
    assert removed == ["m-1"] and gone == ["m-2"] and failed == {"inst-3": "FencedInstanceIdError"}


# -- which static members the rolling upgrade removes: only those whose instance the platform confirms gone ------

def _member(instance_id, client_id, protocol="consumer", epoch=3):
    return ConsumerGroupMember(member_id=f"m-{client_id}", client_id=client_id, host="/10.0.0.1",
                               instance_id=instance_id, member_epoch=epoch, protocol=MemberProtocol(protocol))


STATUS = ApplicationStatus(known=True, instances=(
    Instance("app:app_0", running=False, state="EXITED", client_id="app-0", group_instance_id="app-0"),
    Instance("app:app_1", running=True, state="RUNNING", client_id="app-1", group_instance_id="app-1")))


def test_a_static_member_is_departed_only_when_its_instance_is_confirmed_not_running():
    members = [_member("app-0", "app-0"), _member("app-1", "app-1"),
               _member("app-9", "app-9"),  # matches no instance: may be a live one elsewhere, never removed
               _member(None, "dyn"),  # dynamic: expires with its session, nothing to release
               _member("app-0", "app-0", epoch=-2),  # left on purpose: its id is released already
               _member("app-0", "app-0", protocol="classic", epoch=None)]  # the broker hands a classic id over
    assert departed_static_members(members[:4], STATUS) == ["app-0"]
    assert departed_static_members(members[4:], STATUS) == []
    with pytest.raises(ValueError, match="cannot tell"):
        departed_static_members(members, ApplicationStatus.unknown("ssh down"))


def test_static_members_that_match_no_instance_are_named_before_anything_stops():
    members = [_member("app-0", "app-0"), _member("app-9", "app-9"), _member(None, "dyn")]
    assert unmatched_static_members(members, STATUS.instances) == ["app-9"]
