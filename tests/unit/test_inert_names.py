"""Every name is inert in every rendering (issue 45, item 6): a group id, an application, team or controller name,
a topic, a user id or a Param value adds nothing to what an approver or a report's reader sees.

Each rendering the provider builds (a single-group plan as the change DAGs build it, who may approve, a fleet
wave's approval and the whole fleet plan, the run report with its downtime section and change control, the
fleet report, the reports page's HTML and its frame, the charts) is built twice: once with a plain name and once
with a hostile one in every place a name goes. The Markdown is parsed with markdown-it-py (CommonMark with raw
HTML on, GFM tables, strikethrough and linkify) and the two parses must have the same structure: no link, image,
emphasis, heading, HTML, list, table cell or line more. Airflow's UI (react-markdown + remark-gfm) also links
``www.``, ``http(s)://`` and e-mail addresses it finds in the text *after* escapes are resolved: the regular
expressions its bundle applies (airflow/ui/dist of Airflow 3.3.2, mdast-util-gfm-autolink-literal) are applied to
every run of text here, and must find nothing. And every character of the name shows: the name as
:func:`~airflow_provider_kip848.kafka.inert.visible` writes it is in the rendered text, and none of its hidden
characters (direction overrides, zero-width, controls) is.

The same with real groups on a real broker (the name comes from the cluster): tests/integration/
test_inert_names.py (the fleet plan from the cluster's inventory) and tests/e2e/test_inert_names.py (a group
config change run: its HITL body and its report); in Airflow's own approval page, in Chromium:
tests/deploy/test_approval_ui.py.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from html.parser import HTMLParser
from typing import Any

import pytest
from markdown_it import MarkdownIt
from markupsafe import Markup

from airflow_provider_kip848.changecontrol.approvals import ApprovalPolicy
from airflow_provider_kip848.changecontrol.downtime import downtime_chart, downtime_markdown
from airflow_provider_kip848.changecontrol.fleet_report import render_fleet_markdown
from airflow_provider_kip848.changecontrol.plan import Change, Plan
from airflow_provider_kip848.changecontrol.report import render_markdown as render_report
from airflow_provider_kip848.fleet import Application, PlannedGroup, plan_waves
from airflow_provider_kip848.kafka.arguments import is_hidden
from airflow_provider_kip848.kafka.inert import md_fence, md_name, md_text, visible, xml_text
from airflow_provider_kip848.plugins.pages import render as render_page
from airflow_provider_kip848.plugins.reports import render_markdown as report_html
from tests.unit import test_fleet_report as fleet_run

#: the issue's forged approval
FORGED = "orders-app](https://evil.example/approve) **APPROVED BY SECURITY** [x"
#: names that would be markup, links, lines, cells or hidden characters if they were not escaped
HOSTILE = (
    FORGED,
    "<b>bold</b>", "<img src=x onerror=alert(1)>", "<script>alert(1)</script>",
    "a`b``c", "`tick`", "x```y",
    "a|b|c", "\\|pipe",
    "x\n# heading", "x\r\n---\n| a | b |", "line  \nbreak",
    "www.evil.example", "a@evil.example", "https://evil.com/x", "WWW.EVIL.COM", "mailto:a@evil.com",
    "(www.evil.example)",
    "rtl\u202eelpmaxe", "zero\u200bwidth", "nb\u00a0space", "x\u2066isolate\u2069",
    "~~struck~~ ~one~", "_em_ *em* __strong__", "[x](https://evil.example) ![i](x.png) [^1]",
    "&lt;b&gt; &#x202e; &amp;", "1. item", "- item", "> quote", "# heading", "   ## indented",
    "\\*not\\* escaped\\", "x\tTab\x00nul\x1b[31m",
)
PLAIN = "plain-name"

#: CommonMark (raw HTML on: a name that became HTML is an html token) with GFM tables, strikethrough, linkify
MD = MarkdownIt("commonmark", {"linkify": True}).enable(["table", "strikethrough", "linkify"])
#: what Airflow 3.3.2's UI bundle links in a text node (mdast-util-gfm-autolink-literal's find-and-replace; the
#: e-mail pattern without its look-behind, so a superset)
GFM_AUTOLINKS = (re.compile(r"(https?://|www(?=\.))([-.\w]+)([^ \t\r\n]*)", re.IGNORECASE),
                 re.compile(r"([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)"))
#: inline tokens that carry text, not structure
TEXT_TOKENS = {"text", "code_inline", "text_special"}


def structure(markdown: str) -> list[tuple[str, str]]:
    """The blocks and the inline markup of ``markdown`` (token type and tag), without the text itself."""
    out: list[tuple[str, str]] = []
    for token in MD.parse(markdown):
        out.append((token.type, token.tag))
        out += [(child.type, child.tag) for child in token.children or () if child.type not in TEXT_TOKENS]
    return out


def shown(markdown: str) -> str:
    """The text a reader sees: each inline run's text and code, one line per block."""
    return "\n".join("".join(c.content for c in t.children or () if c.type in TEXT_TOKENS)
                     for t in MD.parse(markdown) if t.type == "inline")


def autolinked(markdown: str) -> list[str]:
    """What the UI's remark-gfm would link: its patterns on each run of text between two other inline nodes."""
    found = []
    for token in MD.parse(markdown):
        run = ""
        for child in [*(token.children or ()), None]:
            if child is not None and child.type in ("text", "text_special"):
                run += child.content
                continue
            found += [m.group() for pattern in GFM_AUTOLINKS for m in pattern.finditer(run)]
            run = ""
    return found


def assert_inert(rendered: dict[str, str], plain: dict[str, str], name: str) -> None:
    for what, markdown in rendered.items():
        assert structure(markdown) == structure(plain[what]), (what, name, markdown)
        assert autolinked(markdown) == autolinked(plain[what]) == [], (what, name, markdown)
        text = shown(markdown)
        assert visible(name) in text, (what, name, text)
        # a line break would be a softbreak (structure, above); the blocks are joined with "\n" here
        assert not any(c in text.replace("\n", "") for i, c in enumerate(name) if is_hidden(name, i)), (what, name)


# -- the renderings, each with ``name`` wherever a name goes ----------------------------------------------------


def single_group_plan(name: str) -> Plan:
    """A plan as kafka_group_config_change and the downtime DAGs build it: the group in the title, the targets,
    the steps, the preflight's evidence, the notes (controller commands, topics, hosts, the Params)."""
    return Plan(
        title=f"Group {name}: set consumer.session.timeout.ms",
        steps=(f"kafka-configs --alter --entity-type groups --entity-name {name}", f"read back: {name}"),
        changes=(Change("group_config", f"{name}:consumer.session.timeout.ms", "(broker default)", name,
                        f"for {name}"),
                 Change("application", name, {"instances": [name], "host": name}, "stopped", "downtime starts")),
        checks=({"name": "group_exists", "status": "pass", "evidence": f"group {name!r} exists ({name})"},),
        notes=(f"application controller: {name} (kind command)", f"controller stop: `supervisorctl stop {name}:*`",
               f"Internal topics: `{name}-changelog`, {name}-repartition", f"runs_on=SSH connection {name}",
               f"client config linted: controller {name!r}: `cat /etc/{name}.properties`"))


def wave_plan_markdown(name: str) -> tuple[str, str]:
    groups = tuple(PlannedGroup(group_id=f"{name}-{i}", type="classic", state="Stable", member_count=2,
                                status="pending", readiness="offline_only", reason=f"{name} uses a custom assignor",
                                path="offline") for i in (1, 2))
    application = Application(app=name, team=name, rule_index=0, groups=groups, status="ready", path="offline",
                              reason=f"the ownership map asks {name} for the offline path", warnings=(f"{name}!",),
                              app_controller=name, app_controller_args={"region": name})
    plan = plan_waves([application], canary=1, migration="classic_to_consumer")
    held = replace(application, status="held")
    plan = replace(plan, held_back=(held,), migrated=(application,), unowned=(name, f"{name}-x"),
                   warnings=(f"rule {name} matches nothing",), scope=f"applications of team {name!r}",
                   unmatched=(f"team {name}",))
    return plan.waves[0].render_markdown(), plan.render_markdown()


def run_report(name: str) -> dict[str, Any]:
    plan = single_group_plan(name)
    downtime = {"since": "2026-01-01T00:00:00.000+00:00", "gap_source": "committed offsets", "target_type": "consumer",
                "processing_gap": {"seconds": 1.5, "partition": f"{name}:0", "started": "a", "ended": "b"},
                "committed_gap": None, "output_gap": None, "settle_s": None, "first_member_left": None,
                "stable_on_target": None, "rebalances": 1, "types": ["classic", "consumer"], "classic_empty": None,
                "states": [{"type": "classic", "state": "Empty", "members": {"classic": 1}, "at": "x" * 23}],
                "notes": [f"member {name} left"],
                "partitions": [{"partition": f"{name}:0", "seconds": 1.5, "started_at": 0.0, "ended_at": 1.5}],
                "output_partitions": []}
    return {"title": f"Group config change on {name}", "outcome": "changed", "generated_at": "2026-01-01T00:00:00",
            "dag_id": "kafka_group_config_change", "run_id": f"manual__{name}", "group_id": name,
            "triggered_by": name, "approvals": {"approval": {"decision": "Approve", "by": name, "at": "now"}},
            "lock": {"refused": f"held by run {name}", "held_by": name},
            "downtime": downtime,
            "before": {"group": name}, "after": {"group": name},
            "metrics": {"note": f"sampled for {name}", "samples": [{"label": name, "taken_at": None, "note": name}]},
            "change_control": {
                "policy": {"four_eyes": "enforced", "approvers": [name, "bob"], "triggered_by": name},
                "recheck": {"reasons": [f"group_config {name}:k: approved (broker default) -> 2, now 0 -> 2"]},
                "audit": [{"kind": "group_config", "target": f"{name}:k", "before": None, "after": name,
                           "approved_by": [name], "record_id": "0123456789abcdef"}]},
            "plan": {**plan.to_dict(), "markdown": plan.render_markdown()},
            "results": {"preflight": {"evidence": name}, name: [name]}}


def fleet_report(name: str) -> dict[str, Any]:
    """The fleet report of test_fleet_report.py's run with its application ``billing`` (and its groups, the
    approver ``alice``, the held-back application and team) renamed to ``name``."""
    def swap(value: Any) -> Any:  # Any: the report's JSON
        if isinstance(value, str):
            for old in ("billing", "alice", "legacy", "core"):
                value = value.replace(old, name)
            return value
        if isinstance(value, dict):
            return {swap(k): swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    return swap(fleet_run.build())


def approval_and_report_markdown(name: str) -> dict[str, str]:
    wave, whole = wave_plan_markdown(name)
    policy = ApprovalPolicy(approvers=(name, "bob"), four_eyes=True)
    return {"single-group plan": single_group_plan(name).render_markdown(),
            "dry run plan": single_group_plan(name).render_markdown(dry_run=True),
            "who may approve": policy.who_may_approve(triggered_by=name),
            "fleet wave approval": wave, "fleet plan": whole,
            "run report": render_report(run_report(name), chart="metrics.svg", downtime_file="downtime.svg"),
            "downtime section": "\n".join(downtime_markdown(run_report(name)["downtime"], "downtime.svg")),
            "fleet report": render_fleet_markdown(fleet_report(name))}


PLAIN_MARKDOWN = approval_and_report_markdown(PLAIN)


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_a_name_adds_nothing_to_an_approval_or_a_report(name):
    assert_inert(approval_and_report_markdown(name), PLAIN_MARKDOWN, name)


def test_the_forged_approval_of_the_issue_is_text():
    """The issue's group id: no link to evil.example, no bold "APPROVED BY SECURITY", its name whole."""
    body = single_group_plan(FORGED).render_markdown()
    html = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(body)
    assert "<a " not in html and "<strong>APPROVED" not in html and "evil.example" in html
    assert ("<h3>Group <code>orders-app](https://evil.example/approve)</code> **APPROVED BY SECURITY** [x: set "
            "consumer.session.timeout.ms</h3>") in html
    assert f"Group {FORGED}: set" in shown(body)


# -- HTML: the reports page and its frame -----------------------------------------------------------------------


class Tags(HTMLParser):
    """The elements of an HTML page, in order, and its text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text = ""
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text += data


def report_page(name: str) -> str:
    body = report_html(render_report(run_report(name), downtime_file="downtime.svg"), lambda f: f"files/{f}")
    urls = {k: f"/kip848-reports/{k}" for k in ("all", "list", "run", "report_task", "files", "validation")}
    return render_page("report.html", dag_id=name, run_id=name, urls=urls, run=None, folder=None,
                       error=f"The report folder of {name} could not be read", absent=None, files=[f"{name}.md"],
                       validations=[], body=body)


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_a_name_adds_no_element_to_the_reports_page_and_shows_every_character(name):
    page, plain = Tags(report_page(name)), Tags(report_page(PLAIN))
    # a word Airflow's UI would link is a code span in free text (kafka/inert.py): one <code> more, nothing else
    assert [t for t in page.tags if t != "code"] == [t for t in plain.tags if t != "code"], name
    assert visible(name) in page.text
    assert not any(c in page.text.replace("\n", "") for i, c in enumerate(name) if is_hidden(name, i)), name


def test_markup_the_page_built_on_purpose_stays_markup():
    page = render_page("report.html", dag_id="d", run_id="r", urls={k: "" for k in ("all", "list", "run",
                       "report_task", "files", "validation")}, run=None, folder=None, error=None, absent=None,
                       files=[], validations=[], body=Markup("<p>rtl\u202e</p>"))
    assert "<p>rtl\u202e</p>" in page  # the report's HTML (markdown-it's, from escaped Markdown) is not changed


# -- SVG ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_a_name_in_a_chart_is_one_text_every_character_shown(name):
    section = {"group_id": name, "chart": {"states": [[0.0, f"{name} Empty"], [2.0, "consumer Stable"]],
                                           "members": [[0.0, {"classic": 1}], [2.0, {"consumer": 1}]],
                                           "committed_rate": [[0.0, 1.0], [2.0, 2.0]], "output_rate": []}}
    svg = downtime_chart(section)
    assert svg is not None
    root = ET.fromstring(svg)  # well-formed: no control character XML forbids, no element from the name
    plain = ET.fromstring(downtime_chart({**section, "group_id": PLAIN}) or "")
    assert [e.tag for e in root.iter()] == [e.tag for e in plain.iter()]
    text = "".join(root.itertext())
    assert f"Group {visible(name)} through the change" in text
    assert not any(c in svg.replace("\n", "") for i, c in enumerate(name) if is_hidden(name, i))


# -- the functions ----------------------------------------------------------------------------------------------


def test_visible_shows_each_hidden_character_by_its_escape():
    assert visible("a\u202eb\u200bc\u00a0d\ne\tf\x00g\U000e0041") == "a\\u202eb\\u200bc\\u00a0d\\ne\\tf\\u0000g\\U000e0041"
    assert visible("plain-id.with_punct") == "plain-id.with_punct" and visible("Grüße 東京") == "Grüße 東京"
    assert visible("-\u0301") == "-\\u0301" and visible("e\u0301") == "e\u0301"  # a mark on a letter is a letter


def test_a_name_is_a_code_span_its_fence_longer_than_its_backticks():
    assert md_name("orders") == "`orders`" and md_name("a`b``c") == "```a`b``c```"
    assert md_name("`x`") == "`` `x` ``" and md_name(" x ") == "`  x  `" and md_name("") == "(empty)"
    assert md_name("a|b") == "`a|b`" and md_name("a|b", cell=True) == "`a\\|b`"
    assert md_name("\\|", cell=True) == "`\\\\\\|`"  # no backslash pairs with the pipe's escape


def test_free_text_is_escaped_and_its_link_prone_words_are_code():
    assert md_text("group_config of orders-app") == "group_config of orders-app"  # readable where nothing acts
    assert md_text("*a* _b_ [c](d) <e> &f; ~g~ `h` \\") == "\\*a\\* \\_b\\_ \\[c\\](d) \\<e> \\&f; \\~g\\~ \\`h\\` \\\\"
    assert md_text("see www.evil.example or a@b.c") == "see `www.evil.example` or `a@b.c`"
    assert md_text("# x") == "\\# x" and md_text("12. x") == "12\\. x" and md_text("  - x") == "  \\- x"


def test_a_fence_no_line_of_its_text_can_close():
    text = json.dumps({"group": "x```\n```y"}, indent=1)
    lines = md_fence(text, "json")
    assert lines[0] == "````json" and lines[-1] == "````"
    assert [t.type for t in MD.parse("\n".join(lines))] == ["fence"]
    lines = md_fence("a\n````\nb", "json")
    assert lines[0] == "`````json" and lines[-1] == "`````"
    assert [t.type for t in MD.parse("\n".join(lines))] == ["fence"]


def test_svg_text_is_escaped_visible_and_xml():
    assert xml_text("<a href='x'>\u202e\x00\ufffe") == "&lt;a href=&#x27;x&#x27;&gt;\\u202e\\u0000\\ufffe"
