"""The literal code-point tables equal their definitions, computed from this interpreter's Unicode data.

The tables exist so that importing the core does not walk every code point (issue 49: 1.7 s at each DAG parse);
this test is what keeps them true. On a Python whose Unicode data differs it fails, printing the new tables.
"""

from __future__ import annotations

import unicodedata

from airflow_provider_kip848.kafka import code_points
from airflow_provider_kip848.kafka.arguments import identifier_problem


def test_the_tables_are_the_categories_of_this_pythons_unicode_data():
    assert unicodedata.unidata_version == code_points.UNICODE_VERSION
    assert code_points.INVISIBLE_RANGES == code_points.as_ranges(code_points.compute_invisible())
    assert code_points.MARK_RANGES == code_points.as_ranges(code_points.compute_marks())


def test_lookups_at_the_edges_of_ranges():
    # a zero-width space (Cf), the no-break space (Zs), a tag (beyond the BMP), but not the plain space or 'a'
    assert code_points.is_invisible(0x200B) and code_points.is_invisible(0xA0) and code_points.is_invisible(0xE0041)
    assert not code_points.is_invisible(0x20) and not code_points.is_invisible(ord("a"))
    assert code_points.is_invisible(0x00) and code_points.is_invisible(0x1F) and not code_points.is_invisible(0x21)
    # the combining acute accent and the last mark of the tables; a letter next to it is not one
    assert code_points.is_mark(0x0301) and code_points.is_mark(code_points.MARK_RANGES[-1][1])
    assert not code_points.is_mark(code_points.MARK_RANGES[-1][1] + 1) and not code_points.is_mark(ord("e"))


def test_identifiers_are_judged_as_before():
    assert identifier_problem("orders-eu") is None
    assert "invisible" in (identifier_problem("orders\u200b-eu") or "")
    assert identifier_problem("\u0301orders") is not None
    assert identifier_problem("caf\u00e9") is None and identifier_problem("cafe\u0301") is None
