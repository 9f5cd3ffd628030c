"""A run's report read back for the UI: its folder, the files it may serve, the listing rules, the Markdown."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from airflow.models.taskinstancekey import TaskInstanceKey

from airflow_provider_kip848.changecontrol import run_artifacts as ra
from airflow_provider_kip848.kafka.errors import ArtifactRefused, InvalidArgument
from airflow_provider_kip848.operators.report_link import ReportLink, ui_base_path
from airflow_provider_kip848.plugins.reports import RunFacts, listed_dag_ids, render_markdown, report_status

ROOT = Path(__file__).resolve().parents[2]
RUN = "manual__2026-11-28T00:20:00+00:00"


def test_the_provider_dag_ids_are_the_dag_files():
    # each DAG file is named after its DAG (docs/index.md's table), and names it
    assert {p.stem for p in (ROOT / "dags").glob("*.py")} == set(ra.PROVIDER_DAG_IDS)
    for dag_id in ra.PROVIDER_DAG_IDS:
        assert dag_id in (ROOT / "dags" / f"{dag_id}.py").read_text()


def test_the_folder_is_what_the_run_recorded_first():
    recorded = {"outcome": "migrated", "files": {"markdown": "/shared/a/d/r/report/report.md",
                                                 "json": "/shared/a/d/r/report/report.json"}}
    assert ra.report_folder("d", RUN, report_xcom=recorded, root="/root") == \
        ra.ReportFolder("/shared/a/d/r/report", ra.RECORDED)
    # none recorded: the deployment's location, as the DAGs compute it (never a folder from the run's conf)
    assert ra.report_folder("d", RUN, report_xcom={"outcome": "dry_run"}, root="/root") == \
        ra.ReportFolder("/root/d/manual__2026-11-28T00_20_00_00_00/report", ra.COMPUTED)
    assert ra.report_folder("d", RUN, root="/root/").location == "/root/d/manual__2026-11-28T00_20_00_00_00/report"
    assert ra.report_folder("d", RUN, root="s3://aws@bucket/k").location == \
        "s3://aws@bucket/k/d/manual__2026-11-28T00_20_00_00_00/report"
    assert ra.report_folder("d", RUN, report_xcom=None, root=None) is None
    assert ra.recorded_folder({"files": {"markdown": ""}}) is None and ra.recorded_folder("text") is None


@pytest.mark.parametrize("name", ["../report.md", "..", "a/b.svg", "/etc/passwd", ".hidden", "report.md/",
                                  "a\\b", "x\x00.md", "", "..%2Fx", "%2e%2e"])
def test_only_plain_names_are_served(tmp_path, name):
    with pytest.raises(ArtifactRefused, match="not a file name"):
        ra.artifact_location(str(tmp_path), name)
    assert issubclass(ArtifactRefused, InvalidArgument)


def test_a_link_leading_out_of_the_folder_is_refused(tmp_path):
    folder = tmp_path / "d" / "r" / "report"
    folder.mkdir(parents=True)
    (folder / "report.md").write_text("# ok\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    os.symlink(secret, folder / "leak.txt")
    assert ra.artifact_location(str(folder), "report.md") == f"{folder}/report.md"
    with pytest.raises(ArtifactRefused, match="leads out"):
        ra.artifact_location(str(folder), "leak.txt")
    assert ra.list_artifacts(str(folder)) == ["leak.txt", "report.md"]
    assert ra.list_artifacts(str(tmp_path / "none")) == []


def test_validation_pages_come_from_the_validate_tasks_only():
    xcoms = {"validate": {"files": {"html": "/a/d/r/snapshots/validation/validation.html"}},
             "wave_2.validate": {"files": {"html": "/a/fleet/r/validation/wave_2/validation.html"}},
             "wave_1.validate": {"files": {}},
             "other": {"files": {"html": "/a/x/validation.html"}},
             "wave_x.validate": {"files": {"html": "/a/y/validation.html"}}}
    xcoms["validate_evil"] = {"files": {"html": "/etc/passwd"}}
    assert ra.validation_pages(xcoms) == {"validate": "/a/d/r/snapshots/validation/validation.html",
                                          "wave_2.validate": "/a/fleet/r/validation/wave_2/validation.html"}
    assert ra.validation_pages({"validate": {"files": {"html": "/etc/passwd"}}}) == {}


def test_media_types_and_shown_locations():
    assert ra.media_type("downtime.svg") == "image/svg+xml" and ra.media_type("report.json") == "application/json"
    assert ra.media_type("x.bin").startswith("text/plain")
    assert ra.shown_location("s3://aws_default@bucket/k/report") == "s3://bucket/k/report"
    assert ra.shown_location("/shared/k/report") == "/shared/k/report"


def test_the_report_link_and_page_path():
    assert ra.report_page_path("kip848_fleet_migration", RUN) == \
        "/kip848-reports/kip848_fleet_migration/manual__2026-11-28T00%3A20%3A00%2B00%3A00"
    assert ReportLink().name == "Report" and ReportLink().xcom_key == "_link_ReportLink"
    key = TaskInstanceKey("kip848_fleet_migration", "report", RUN, 1, -1)
    assert ReportLink().get_link(None, ti_key=key) == ra.report_page_path("kip848_fleet_migration", RUN)


@pytest.mark.parametrize(("base_url", "path"), [("http://airflow.example:8080/", "/"), ("", "/"),
                                                  ("https://example.com/airflow", "/airflow/")])
def test_the_link_is_under_the_uis_base_path(monkeypatch, base_url, path):
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", base_url)
    assert ui_base_path() == path


# -- the list page's rules and the run's report status ---------------------------------------------------------


def test_the_list_reads_the_provider_dags_the_user_may_read():
    assert listed_dag_ids(None, lambda d: True) == list(ra.PROVIDER_DAG_IDS)
    assert listed_dag_ids(None, lambda d: d.startswith("kip848_")) == [
        "kip848_consumer_offline_migration", "kip848_consumer_rolling_upgrade", "kip848_fleet_migration"]
    assert listed_dag_ids("my_copy_of_a_runbook", lambda d: True) == ["my_copy_of_a_runbook"]
    assert listed_dag_ids("kip848_fleet_migration", lambda d: False) == []


@pytest.mark.parametrize(("run", "key", "words"), [
    (RunFacts("d", "r", "success", report_state="success",
              report_xcom={"outcome": "migrated", "files": {"markdown": "/a/report.md"}}), "written", "migrated"),
    (RunFacts("d", "r", "success", report_state="success", report_xcom={"outcome": "dry_run", "title": "t"}),
     "no_file", "no artifact location"),
    (RunFacts("d", "r", "success", report_state="success", report_xcom="Cluster features: ..."), "no_file",
     "recorded no report folder"),
    (RunFacts("d", "r", "running", report_state=None), "pending", "not reached its report task"),
    (RunFacts("d", "r", "running", report_state="queued"), "pending", "report task queued"),
    (RunFacts("d", "r", "failed", report_state="failed"), "failed", "failed before it recorded"),
    (RunFacts("d", "r", "failed", report_state="upstream_failed"), "no_file", "upstream_failed"),
    (RunFacts("d", "r", "failed", report_state=None), "no_file", "without running its report task"),
])
def test_what_a_run_has_as_a_report_is_said_plainly(run, key, words):
    got, sentence = report_status(run)
    assert got == key and words in sentence


def test_markdown_is_rendered_without_html():
    text = ("# Report of <script>alert(1)</script>\n\ngroup `<img src=x onerror=alert(1)>` and "
            "<b>bold</b> from the broker\n\n![timeline](downtime.svg) [json](report.json) [out](../other/report.md) "
            "[js](javascript:alert(1))\n\n| group | state |\n|---|---|\n| <script>x</script> | Stable |\n")
    html = str(render_markdown(text, lambda name: f"/kip848-reports/d/r/files/{name}"))
    assert "<script" not in html and "<b>" not in html and "<img src=x" not in html
    assert "<h1>Report of &lt;script&gt;alert(1)&lt;/script&gt;</h1>" in html
    assert "<code>&lt;img src=x onerror=alert(1)&gt;</code>" in html
    assert '<img src="/kip848-reports/d/r/files/downtime.svg" alt="timeline" />' in html
    assert '<a href="/kip848-reports/d/r/files/report.json">json</a>' in html
    assert 'href="../other/report.md"' in html  # not a file of this folder: left as it is, never served here
    assert "javascript:" not in html.replace("[js](javascript:alert(1))", "")
    assert "<td>&lt;script&gt;x&lt;/script&gt;</td>" in html
