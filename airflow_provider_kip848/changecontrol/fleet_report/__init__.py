"""The fleet report: what one fleet migration run did, wave by wave and application by application, and how
the fleet moved from run to run.

A single-group run report (:mod:`.report`) tells one change. A fleet run moves hundreds of applications in
waves, and the people who approve and watch it ask other questions; the report answers them:

* how many groups were of each type (protocol) before the run and after each wave: a table and
  ``types_by_wave.svg``;
* per wave: its hash and approval, how long it took, which applications failed, which groups and why, what
  was rolled back and whether the way back held, and whether the error budget stopped the waves after it;
* per application: its path, outcome, duration and *processing gap* (the longest stretch it processed
  nothing, measured on the offline path), ranked longest first: a table and ``gaps.svg``;
* over time: one JSON line per run in a history file (:func:`append_history`), read back strictly
  (:func:`load_history`: a bad line is an error naming it, never skipped) and plotted
  (:func:`history_chart_svg`).

Unknown stays unknown: a wave without its end time, a gap on the online path (nothing is stopped there, so
no gap is measured), an inventory that was not taken are None in the JSON and ``?`` or "not measured" in the
Markdown, never 0.

Building and rendering are pure (they read only what they are given) and load no Airflow, so a report can
be built and checked anywhere; writing and reading a location go through :mod:`.storage` (a local path, all
or nothing, or an ObjectStoragePath URL), imported only when a location is touched. The records are those of
:mod:`airflow_provider_kip848.fleet.results`; ``fleet/`` sits beside ``changecontrol/`` (layer 1, see
tests/unit/test_architecture.py), so they are read by attribute and imported for type checking only.

One module per concern, the public names re-exported here: :mod:`.building` (records and plan -> the report's
dict), :mod:`.rendering` (charts, Markdown and the files written), :mod:`.history` (the history file).
"""

from airflow_provider_kip848.changecontrol.fleet_report.building import FILE_NAMES, build_fleet_report
from airflow_provider_kip848.changecontrol.fleet_report.history import (
    FleetHistoryInvalid,
    HistoryEntry,
    append_history,
    history_line,
    load_history,
    parse_history,
)
from airflow_provider_kip848.changecontrol.fleet_report.rendering import (
    gap_chart_svg,
    history_chart_svg,
    render_fleet_markdown,
    types_chart_svg,
    write_fleet_report,
)

__all__ = ["FILE_NAMES", "FleetHistoryInvalid", "HistoryEntry", "append_history", "build_fleet_report",
           "gap_chart_svg", "history_chart_svg", "history_line", "load_history", "parse_history",
           "render_fleet_markdown", "types_chart_svg", "write_fleet_report"]
