"""Change control: who may approve a change, four eyes, approval expiry, and "apply what was approved".

Platform teams let a tool change a production cluster only if it enforces
their change process. These rules are checked here, with no Airflow import,
and enforced by the approval operators (``operators/approval.py``):

* **Approvers** are named per run (a DAG Param): the approval task hands them
  to Airflow's HITL ``assigned_users``, so Airflow itself answers anybody else
  with 403.
* **Four eyes** (on by default): the user who triggered the run cannot approve
  it. The triggering user is taken off the assigned users (Airflow refuses
  them), and a self-approval that still arrives (no approvers named: anybody
  may answer) is refused here. Rejecting your own change is always allowed.
* **Expiry**: an approval older than ``max_age`` when the change is about to be
  applied is not reused; a new one is requested.
* **Plan hash**: the approver approves a plan whose hash is shown in the form.
  Right before applying, the plan is computed again from the cluster; if the
  hash differs, the cluster changed under the approver and a new approval,
  showing the difference, is requested.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_provider_kip848.kafka.arguments import (
    folded,
    identifier_problem,
    parse_flag,
    parse_number,
    require_single_values,
    show_id,
)
from airflow_provider_kip848.kafka.errors import InvalidArgument, Kip848Error
from airflow_provider_kip848.kafka.inert import md_name

#: The longest an approval may stay valid (``approval_max_age_minutes``): a year.
MAX_APPROVAL_AGE_MINUTES = 525_600

#: Options that approve a change; anything else (Reject, Rollback ...) declines it.
APPROVING_OPTIONS = ("Approve", "Proceed", "Apply")


class ChangeControlError(Kip848Error):
    """The change process was not followed; nothing was changed."""


class SelfApprovalRefused(ChangeControlError):
    remedy = ("Ask another approver to approve this run (four-eyes rule), or, on a development cluster only, "
              "trigger the run with the Param four_eyes=false.")


class NoEligibleApprover(ChangeControlError):
    remedy = "Add another user to the Param approvers, or relax four_eyes on a development cluster."


class ApprovalMissing(ChangeControlError):
    remedy = "The change needs an approval first: let the approval task run (or rerun the DAG)."


class ApprovalExpired(ChangeControlError):
    remedy = "A new approval of the current plan is requested."


class PlanChanged(ChangeControlError):
    remedy = "Review the new plan: a new approval of it is requested; the old approval is not reused."


def parse_users(value: object) -> tuple[str, ...]:
    """Approvers from a Param: a list of user names/ids, or one comma/space-separated string."""
    if value is None or value == "":
        return ()
    if isinstance(value, str) and value.strip().startswith("["):  # a list rendered as text
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise ChangeControlError(f"approvers is not a list of user ids: {value!r}",
                                     remedy='Give e.g. ["alice", "bob"].') from None
    items = value if isinstance(value, (list, tuple, set)) else str(value).replace(",", " ").split()
    try:  # "alice;bob" (or ["alice bob"]) is one user nobody is called, and nobody could approve
        require_single_values(items, "approvers", 'as a list of Airflow user ids (["alice", "bob"]) or as '
                                                  "comma-separated text (alice,bob)")
    except InvalidArgument as exc:
        raise ChangeControlError(exc.what, remedy=exc.remedy) from None
    users: list[str] = []
    for item in items:
        name = str(item).strip(" \t\r\n")
        if not name:
            continue
        # an id with a no-break space or a zero-width character names nobody Airflow knows (nobody could
        # approve), or, under four eyes, someone who only looks like another user
        if (problem := identifier_problem(name)) is not None:
            raise ChangeControlError(f"approver {show_id(name)} {problem}",
                                     remedy="Type the Airflow user id again (only the plain space U+0020 may "
                                            "stand for a blank).")
        if name not in users:
            users.append(name)
    return tuple(users)


def same_user(one: str | None, other: str | None) -> bool:
    """Whether two user ids name the same person as far as a reader can tell (one Unicode normalization, one
    case, no invisible characters): the four-eyes rule compares so, failing closed on a look-alike id."""
    return bool(one) and bool(other) and folded(str(one)) == folded(str(other))


def is_approving(option: str | None) -> bool:
    return option in APPROVING_OPTIONS


def connection_requires_four_eyes(value: object, conn_id: str) -> bool:
    """The connection extra ``four_eyes``: ``required`` (a run's Params cannot relax the rule) or ``default`` / unset
    (the run's Param decides); JSON ``true`` / ``false`` read as those two. Read strictly: a value set outside the
    connection form (an environment variable, the CLI, a secrets backend) that is neither is refused, never taken
    for "not required" (a typo such as ``requried`` would otherwise let a run relax four eyes on production)."""
    if value is None or value is False:
        return False
    if value is True:
        return True
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("", "default", "false"):
            return False
        if text in ("required", "true"):
            return True
    raise ChangeControlError(
        f"Connection {conn_id!r}: its extra four_eyes must be 'required' or 'default' (or unset), not {value!r}; "
        "nothing was asked or changed",
        remedy="Fix the connection's extra four_eyes ('required' on a production cluster: a run's Params cannot "
               "relax it).")


@dataclass(frozen=True)
class ApprovalPolicy:
    """Who may approve one run's change, and for how long an approval stays valid."""

    approvers: tuple[str, ...] = ()
    four_eyes: bool = True
    max_age: timedelta | None = None

    @classmethod
    def from_values(cls, approvers: object = None, four_eyes: object = True,
                    max_age_minutes: Any = None,  # Any: a Param or connection extra as given, checked here
                    ) -> ApprovalPolicy:
        try:
            four = parse_flag(four_eyes, "four_eyes")
        except Kip848Error as exc:
            raise ChangeControlError(exc.what, remedy=exc.remedy) from None
        age = None
        if max_age_minutes not in (None, "", 0, "0"):
            try:  # finite and at most a year: NaN, Infinity or 1e18 were a bare error of timedelta's
                minutes = parse_number(max_age_minutes, "approval_max_age_minutes", maximum=MAX_APPROVAL_AGE_MINUTES)
            except Kip848Error as exc:
                raise ChangeControlError(exc.what, remedy="Give e.g. 60, or 0 for no expiry.") from None
            age = timedelta(minutes=minutes) if minutes else None
        return cls(approvers=parse_users(approvers), four_eyes=four, max_age=age)

    def assigned_users(self, triggered_by: str | None) -> list[dict[str, str]] | None:
        """HITL ``assigned_users`` for this run: the approvers, minus the triggering user under four eyes.

        ``None`` (anybody allowed by the auth manager may answer) when no approvers are named.
        """
        if not self.approvers:
            return None
        eligible = [u for u in self.approvers if not (self.four_eyes and same_user(u, triggered_by))]
        if not eligible:
            raise NoEligibleApprover(
                f"The only approver named ({', '.join(self.approvers)}) is the user who triggered the run "
                f"({triggered_by}); under the four-eyes rule nobody could approve it")
        return [{"id": u, "name": u} for u in eligible]

    def check_response(  # Any: JSON of several shapes (XCom, reports)
            self, option: str | None, responder: dict[str, Any] | None, triggered_by: str | None) -> None:
        """Refuse an approving answer from the user who triggered the run (four eyes)."""
        if not (self.four_eyes and triggered_by and is_approving(option)):
            return
        ids = {str(v) for v in ((responder or {}).get("id"), (responder or {}).get("name")) if v}
        if any(same_user(i, triggered_by) for i in ids):
            raise SelfApprovalRefused(
                f"Self-approval refused: {triggered_by} triggered this run and cannot also approve it; "
                "the change was not applied")

    def check_fresh(self, approved_at: str | datetime | None, now: datetime | None = None) -> None:
        if self.max_age is None or approved_at is None:
            return
        at = approved_at if isinstance(approved_at, datetime) else datetime.fromisoformat(str(approved_at))
        if at.tzinfo is None:
            at = at.replace(tzinfo=UTC)
        age = (now or datetime.now(UTC)) - at
        if age > self.max_age:
            raise ApprovalExpired(
                f"The approval given at {at.isoformat(timespec='seconds')} is {_minutes(age)} old, more than the "
                f"allowed {_minutes(self.max_age)} before the change is applied")

    def who_may_approve(self, triggered_by: str | None) -> str:
        """The Markdown the approval form shows: who may answer, who may not and why, and for how long
        the approval holds (Airflow's own refusal of another user is a bare "403 Forbidden"). User ids are
        names (:func:`~airflow_provider_kip848.kafka.inert.md_name`): a user id is no Markdown."""
        lines = ["**Who may approve**", ""]
        if self.approvers:
            eligible = [u for u in self.approvers if not (self.four_eyes and same_user(u, triggered_by))]
            lines.append(f"- Approvers: {', '.join(md_name(u) for u in eligible)} (anyone else is refused by "
                         "Airflow).")
        else:
            lines.append("- Any user Airflow allows to answer approvals of this DAG (no approvers are named).")
        if self.four_eyes and triggered_by:
            lines.append(f"- Not {md_name(triggered_by)}: they triggered this run (four-eyes rule).")
        elif not self.four_eyes:
            lines.append("- The four-eyes rule is relaxed for this run: the triggering user may approve.")
        if self.max_age is not None:
            lines.append(f"- The approval holds for {_minutes(self.max_age)}; after that the change asks again.")
        return "\n".join(lines)

    def describe(self) -> dict[str, Any]:  # Any: JSON of several shapes (XCom, reports)
        return {"approvers": list(self.approvers) or "anyone allowed by Airflow",
                "four_eyes": "enforced" if self.four_eyes else "relaxed",
                "approval_max_age_minutes": None if self.max_age is None else self.max_age.total_seconds() / 60}


def plan_diff(  # Any: JSON of several shapes (XCom, reports)
        approved: dict[str, Any] | None, current: dict[str, Any]) -> list[str]:
    """Readable differences between the approved plan's changes and the current ones."""
    def index(plan: dict[str, Any] | None) -> dict[tuple[str, str], dict[str, Any]]:
        return {(c["kind"], c["target"]): c for c in (plan or {}).get("changes", [])}

    old, new = index(approved), index(current)
    lines = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        label = f"{key[0]} {key[1]}"
        if a and not b:
            lines.append(f"{label}: approved {a['before']} -> {a['after']}, now nothing to change")
        elif b and not a:
            lines.append(f"{label}: not in the approved plan, now {b['before']} -> {b['after']}")
        elif a and b and (a["before"], a["after"]) != (b["before"], b["after"]):
            lines.append(f"{label}: approved {a['before']} -> {a['after']}, now {b['before']} -> {b['after']}")
    if not lines and (approved or {}).get("steps") != current.get("steps"):
        lines.append("the steps of the plan changed")
    return lines


def check_plan(  # Any: JSON of several shapes (XCom, reports)
        approved_hash: str | None, approved_plan: dict[str, Any] | None, current: dict[str, Any]) -> None:
    """Refuse when the plan computed now is not the plan that was approved."""
    if approved_hash and approved_hash == current.get("hash"):
        return
    diff = plan_diff(approved_plan, current) or [f"plan hash {approved_hash} approved, {current.get('hash')} now"]
    raise PlanChanged(f"The cluster changed since the approval (plan {approved_hash} -> {current.get('hash')}): "
                      + "; ".join(diff))


def _minutes(delta: timedelta) -> str:
    minutes = delta.total_seconds() / 60
    return f"{minutes:.1f} min" if minutes < 120 else f"{minutes / 60:.1f} h"
