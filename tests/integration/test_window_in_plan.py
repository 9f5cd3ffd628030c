"""The approval shows the maintenance window as the guard read it (issue 31, class 5).

The offline consumer migration's plan (what its approvers are shown, and what is computed again right before the
downtime) on the session broker, with a window whose days are a range: the note gives the days as expanded, the
times, the zone, the length and that the window ends the next day. The other windowed DAGs (streams offline, its
way back, the fleet's plan and each wave's approval) add the same ``window_note``.
"""

from __future__ import annotations

import copy

from airflow_provider_kip848.changecontrol.window import window_note
from kip848_harness.clients import consume, create_topics, produce
from tests.e2e.helpers import load_dag


def test_the_offline_migrations_approval_shows_the_window_as_understood(airflow_db, kafka_conn, bootstrap, unique):
    topic, group = unique("plan-window-in"), unique("plan-window")
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, [b"1", b"2"])
    consume(bootstrap, group, [topic], 2, group_protocol="classic")
    dag = load_dag("kip848_consumer_offline_migration")
    form = copy.deepcopy(dag.params)  # the form's defaults, as a run gets them
    form.update({"group_id": group, "window_days": "FRI-MON", "window_start": "22:00", "window_end": "02:30",
                 "window_tz": "Europe/Berlin"})
    params = form.validate()
    module = __import__(dag.fileloc.rsplit("/", 1)[-1].removesuffix(".py"))
    plan = module.build_plan(params)
    note = ("maintenance window: MON,FRI,SAT,SUN 22:00-02:30 Europe/Berlin: 4.5 h, opening MON,FRI,SAT,SUN at 22:00 "
            "and closing at 02:30 the next day (Europe/Berlin clock); a window across midnight belongs to the day "
            "it opens; FRI-MON read as FRI,SAT,SUN,MON (across the weekend)")
    assert window_note(params) == note
    assert note in plan["notes"] and f"- {note}" in plan["markdown"], plan["markdown"]
