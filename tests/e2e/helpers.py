"""Running the example DAGs end to end (see kip848_harness.dagrun)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from markdown_it import MarkdownIt

from airflow_provider_kip848.changecontrol.runpaths import ARTIFACTS_ENV, run_location
from airflow_provider_kip848.kafka.errors import GroupNotFound, Kip848Error
from kip848_harness import dagrun
from kip848_harness.clients import Record, read_topic
from tests.conftest import REPO


def load_dag(module: str):
    return dagrun.load_dag(module, REPO / "dags")


def run_dag(module: str, conf: dict[str, Any], **kwargs):
    return dagrun.run_dag(module, conf, dags_folder=REPO / "dags", **kwargs)


state = dagrun.run_state


def shown(markdown: str) -> str:
    """An approval body's text as the approver reads it rendered (escapes resolved, code spans as their text, one
    line per paragraph, list item or cell): a plan's notes are inert text, so the provider's own backticks in a
    note (``controller stop: `...` ``) are shown as they are."""
    return "\n".join("".join(child.content for child in token.children or ())
                     for token in MarkdownIt("commonmark").enable("table").parse(markdown) if token.type == "inline")


def approve(detail: dict) -> str:
    return "Approve"


def reject(detail: dict) -> str:
    return "Reject"


def application_down(admin, group_id: str) -> bool:
    """A feeder's ``done``: the old group is empty (the application is stopped) or gone (converted). A
    retriable error (the coordinator moving) is "not known yet", asked again; any other is raised."""
    try:
        return admin.describe_group(group_id).is_empty
    except GroupNotFound:
        return True
    except Kip848Error as exc:
        if not exc.retriable:
            raise
        return False


class Feeder(threading.Thread):
    """Input at a steady pace through a migration: one record every ``every_s`` (keys ``first``, first+1, ...;
    ``value`` makes the value from the key), until ``done()`` has been true for ``tail`` more records (checked
    every 10 records), ``stop()``, or ``limit`` records. The pace is a rate, not a wait: the end is a condition.

    Stop it once the application is down (the old group empty): what it wrote while the application was down
    is processed at the restart, so the output's gap closes with the backlog; and it has ended before the DAG
    reads the output range after the move, so no record is in flight then (a later id in the range while an
    earlier one is still unprocessed would read as a lost record)."""

    def __init__(self, bootstrap: str, topic: str, done: Callable[[], bool], *, first: int = 0,
                 value: Callable[[int], str] = lambda i: f"v{i}", every_s: float = 0.05, tail: int = 0,
                 limit: int = 4000) -> None:
        super().__init__(daemon=True, name="feeder")
        self.bootstrap, self.topic, self.done, self.first = bootstrap, topic, done, first
        self.value, self.every_s, self.tail, self.limit = value, every_s, tail, limit
        self.stopping = threading.Event()
        self.written = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0, "enable.idempotence": True})
        left: int | None = None
        try:
            for i in range(self.first, self.first + self.limit):
                producer.produce(self.topic, key=str(i), value=self.value(i))
                producer.poll(0)
                self.written += 1
                if left is None and self.written % 10 == 0 and self.done():
                    left = self.tail
                if left is not None:
                    left -= 1
                    if left < 0:
                        break
                if self.stopping.wait(self.every_s):
                    break
        except BaseException as exc:  # noqa: BLE001 - reported by finish()
            self.error = exc
        finally:
            assert producer.flush(30) == 0, "the feeder's records were not all delivered"

    def stop(self) -> int:
        """End now (when started) and say how many records were written."""
        self.stopping.set()
        return self.finish()

    def finish(self, timeout: float = 300) -> int:
        """How many records were written (0 when the feeder never started: the run ended before it)."""
        if self.ident is None:
            return 0
        self.join(timeout)
        assert not self.is_alive(), "the feeder did not end"
        assert self.error is None, self.error
        return self.written


@dataclass(frozen=True)
class Gap:
    partition: str
    seconds: float
    started_at: float
    ended_at: float


def longest_gaps(records: Iterable[Record]) -> dict[str, Gap]:
    """Each partition's longest interval between two consecutive records by timestamp (the test's own reading
    of an output topic, to check the report's against)."""
    times: dict[str, list[float]] = {}
    for r in records:
        assert r.timestamp is not None
        times.setdefault(f"{r.topic}:{r.partition}", []).append(r.timestamp)
    out = {}
    for partition, ts in times.items():
        ts.sort()
        # the longest to the millisecond, the earliest of equal ones
        best = max(((round(b - a, 3), -a, b) for a, b in zip(ts, ts[1:], strict=False)), default=None)
        if best is not None:
            out[partition] = Gap(partition, best[2] + best[1], -best[1], best[2])
    return out


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def report_folder(dag_id: str, run) -> Path:
    """The run's own report folder under the deployment's artifact location (``$KIP848_ARTIFACTS_URL``: the test's
    ``run_files`` or the session's), as the DAGs compute it: a run never names it."""
    return Path(run_location(os.environ[ARTIFACTS_ENV], dag_id, run.run_id, "report"))


def check_downtime_against_output(downtime: dict, records: list[Record], report_dir: Path, *,
                                  offline: bool = True) -> Gap:
    """The report's downtime section read back and held against the output topic read by the test (``report_dir``:
    the run's own report folder, :func:`report_folder`): the same
    longest gap (partition, length and ends, to the millisecond); for an offline move, spanning it (it starts
    before the old group was left empty and ends after the new group formed); the settle time, the final state
    and the timeline chart."""
    # the longest to the millisecond; a tie goes to the first partition by name (as the report ranks them)
    own = min(longest_gaps(records).values(), key=lambda g: (-round(g.seconds, 3), g.partition))
    gap = downtime["processing_gap"]
    assert downtime["gap_source"] == "output records", downtime
    assert (gap["partition"], gap["seconds"]) == (own.partition, round(own.seconds, 3)), (gap, own)
    assert abs(gap["started_at"] - own.started_at) < 0.0015 and abs(gap["ended_at"] - own.ended_at) < 0.0015
    if offline:
        marks = downtime["chart"]["states"]  # [epoch, "type State"] as the records left the group
        left = epoch(downtime["first_member_left"])
        emptied = min(at for at, label in marks if at >= left and label and label.endswith(("Empty", "Dead")))
        formed = min(at for at, label in marks if label and label.startswith(downtime["target_type"]))
        assert own.started_at <= emptied + 0.001 and own.ended_at >= formed - 0.001, (own, emptied, formed)
    assert downtime["settle_s"] is not None and downtime["settle_s"] > 0
    assert downtime["states"][-1]["type"] == downtime["target_type"] and downtime["states"][-1]["state"] == "Stable"
    charts = list(report_dir.rglob("downtime.svg"))
    assert len(charts) == 1 and "output records/s" in charts[0].read_text()
    return own


def read_since(bootstrap: str, topic: str, since: dict[int, int], ends: dict[int, int]) -> list[Record]:
    """The records of ``topic`` from ``since`` (partition -> offset) up to ``ends`` (partition -> end offset)."""
    def complete(records: list[Record]) -> bool:
        top: dict[int, int] = {}
        for r in records:
            top[r.partition] = max(top.get(r.partition, -1), r.offset)
        return all(end <= since.get(p, 0) or top.get(p, -1) + 1 >= end for p, end in ends.items())

    records = read_topic(bootstrap, topic, timeout=60, until=complete)
    assert complete(records), "the topic was not read to its end"
    return [r for r in records if r.offset >= since.get(r.partition, 0)]
