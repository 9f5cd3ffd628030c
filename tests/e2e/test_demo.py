"""``make demo``'s job on a clean cache dir: prints the features, exits 0, leaves nothing running."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from airflow_provider_kip848.local import KafkaDistribution

from tests.conftest import REPO


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if text.encode() in (proc / "cmdline").read_bytes():
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


def test_demo_prints_features_and_groups_and_cleans_up(tmp_path, kafka_version, airflow_db):
    # A new cache dir that reuses the already-fetched jars (the demo's first-run fetch is
    # the same code the session broker went through).
    dist = KafkaDistribution(kafka_version)
    dist.ensure()
    (tmp_path / dist.home.name).symlink_to(dist.home, target_is_directory=True)
    env = dict(os.environ, KIP848_CACHE_DIR=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_provider_kip848.local.demo", "--dags-folder", str(REPO / "dags")],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert f"Kafka {kafka_version} (KRaft, broker+controller) ready at" in out
    assert re.search(r"^group\.version\s+1\s", out, re.M), out
    assert re.search(r"^streams\.version\s+1\s", out, re.M), out
    assert re.search(r"^orders-classic\s+classic\s", out, re.M), out
    assert re.search(r"^orders-kip848\s+consumer\s", out, re.M), out
    assert re.search(r"^wordcount-kip1071\s+streams\s+Stable", out, re.M), out
    assert "local Kafka stopped" in out
    assert _processes_mentioning(f"-Dkip848.instance={tmp_path}") == []
    assert _processes_mentioning(f"-Dkip848.app={tmp_path}") == []
