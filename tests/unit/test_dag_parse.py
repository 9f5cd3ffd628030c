"""Parsing a DAG file loads no heavy client library (issue 49: DAG files timed out in a busy dag-processor).

Each DAG file is parsed as the dag-processor parses it (``bench/dag_parse.py``: Airflow imported once, one forked
child per file). Its parse time is printed by ``make test`` before the suite (a figure, never asserted here); what
is asserted is what a parse loads: none of kafka-python, pyspark, the Kubernetes client or paramiko (they load at a
task's first action), and no error.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_no_dag_file_loads_a_heavy_client_library_when_parsed():
    done = subprocess.run([sys.executable, str(REPO / "bench" / "dag_parse.py"), "--rounds", "1", "--json"],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    files = json.loads(done.stdout.strip().splitlines()[-1])["files"]
    assert sorted(files) == sorted(p.name for p in (REPO / "dags").glob("*.py"))
    print({name: f["median_s"] for name, f in files.items()})
    assert {name: (f["heavy"], f["errors"]) for name, f in files.items() if f["heavy"] or f["errors"]} == {}
