"""A migration plan: the exact changes (before -> after), the steps, and the preflight findings.

The same plan is rendered in the approval form (Markdown) and stored in the
run's report, so what the approver saw is what the report says was approved.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Change:
    kind: str  # feature | group_config | offsets | members | application | protocol
    target: str
    before: Any  # Any: a value of any kind a change sets
    after: Any  # Any: a value of any kind a change sets
    note: str = ""


@dataclass(frozen=True)
class Plan:
    title: str
    steps: tuple[str, ...]
    changes: tuple[Change, ...] = ()
    checks: tuple[dict[str, Any], ...] = ()  # Any: JSON of several shapes
    notes: tuple[str, ...] = ()
    facts: dict[str, Any] = field(default_factory=dict)  # Any: JSON of several shapes

    @property
    def nothing_to_do(self) -> bool:
        return not self.changes

    def to_dict(self) -> dict[str, object]:
        return {"title": self.title, "steps": list(self.steps), "changes": [asdict(c) for c in self.changes],
                "checks": list(self.checks), "notes": list(self.notes), "facts": self.facts,
                "nothing_to_do": self.nothing_to_do, "hash": self.digest()}

    def digest(self) -> str:
        """A hash of the exact changes, so an apply step can prove it applies what was approved."""
        body = json.dumps({"changes": [asdict(c) for c in self.changes], "steps": list(self.steps)},
                          sort_keys=True, default=str)
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:  # Any: JSON read back (XCom, a file, a response)
        return cls(title=data["title"], steps=tuple(data["steps"]),
                   changes=tuple(Change(**c) for c in data.get("changes", [])),
                   checks=tuple(data.get("checks", [])), notes=tuple(data.get("notes", [])),
                   facts=dict(data.get("facts", {})))

    def render_markdown(self, *, dry_run: bool = False) -> str:
        lines = [f"### {self.title}", ""]
        if dry_run:
            lines += ["**Dry run**: nothing below will be changed by this run.", ""]
        if self.changes:
            lines += ["| change | target | before | after | note |", "|---|---|---|---|---|"]
            lines += [f"| {c.kind} | `{c.target}` | {_cell(c.before)} | {_cell(c.after)} | {c.note} |"
                      for c in self.changes]
        else:
            lines += ["Nothing to change: the cluster is already in the target state."]
        lines += ["", "**Steps**", ""] + [f"{i}. {s}" for i, s in enumerate(self.steps, 1)]
        if self.checks:
            lines += ["", "**Preflight**", "", "| check | result | evidence |", "|---|---|---|"]
            lines += [f"| {c['name']} | {c['status'].upper()} | {c['evidence']} |" for c in self.checks]
        if self.notes:
            lines += ["", "**Notes**", ""] + [f"- {n}" for n in self.notes]
        lines += ["", f"Plan hash: `{self.digest()}`"]
        return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return "`" + json.dumps(value, sort_keys=True, default=str) + "`"
    return str(value).replace("|", "\\|")
