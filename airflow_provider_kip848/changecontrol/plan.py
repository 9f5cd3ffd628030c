"""A migration plan: the exact changes (before -> after), the steps, and the preflight findings.

The same plan is rendered in the approval form (Markdown) and stored in the
run's report, so what the approver saw is what the report says was approved.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_kip848.kafka.inert import md_name, md_text


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
        """The plan as the approver reads it. The plan's own text (title, steps, notes, evidence) mixes the
        provider's wording with names, so each is inert text (:func:`.md_text`); a target is a name
        (:func:`.md_name`); only the headings, the tables and the labels are Markdown."""
        lines = [f"### {md_text(self.title)}", ""]
        if dry_run:
            lines += ["**Dry run**: nothing below will be changed by this run.", ""]
        if self.changes:
            lines += ["| change | target | before | after | note |", "|---|---|---|---|---|"]
            lines += [f"| {md_text(c.kind, cell=True)} | {md_name(c.target, cell=True)} | {_cell(c.before)} | "
                      f"{_cell(c.after)} | {md_text(c.note, cell=True)} |" for c in self.changes]
        else:
            lines += ["Nothing to change: the cluster is already in the target state."]
        lines += ["", "**Steps**", ""] + [f"{i}. {md_text(s)}" for i, s in enumerate(self.steps, 1)]
        if self.checks:
            lines += ["", "**Preflight**", "", "| check | result | evidence |", "|---|---|---|"]
            lines += [f"| {md_text(c['name'], cell=True)} | {md_text(str(c['status']).upper(), cell=True)} | "
                      f"{md_text(c['evidence'], cell=True)} |" for c in self.checks]
        if self.notes:
            lines += ["", "**Notes**", ""] + [f"- {md_text(n)}" for n in self.notes]
        lines += ["", f"Plan hash: `{self.digest()}`"]
        return "\n".join(lines)


def _cell(value: Any) -> str:
    """A before or after value in a table cell: a document as its JSON (a code span), a value as text."""
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return md_name(json.dumps(value, sort_keys=True, default=str), cell=True)
    return md_text(value, cell=True)
