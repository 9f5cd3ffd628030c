"""``make demo``'s job on a clean cache dir: both migrations succeed, the report is printed, nothing is left running."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from airflow_provider_kip848.kafka.cli.distribution import KafkaDistribution
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


def test_demo_runs_the_headline_migration_and_cleans_up(tmp_path, kafka_version):
    # A new cache dir reusing the fetched jars and the Spark connector (the first-run fetch is the
    # same code the session broker and the Spark tests went through).
    dist = KafkaDistribution(kafka_version)
    dist.ensure()
    (tmp_path / dist.home.name).symlink_to(dist.home, target_is_directory=True)
    if (dist.cache_dir / "ivy").is_dir():
        (tmp_path / "ivy").symlink_to(dist.cache_dir / "ivy", target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env["KIP848_CACHE_DIR"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "kip848_harness.demo", "--dags-folder", str(REPO / "dags")],
        capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path,
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-4000:]
    assert f"Kafka {kafka_version} (KRaft, broker+controller) ready at" in out
    assert "KIP-848 rolling upgrade: DAG run success" in out
    assert "KIP-1071 offline migration: DAG run success" in out
    assert out.count("outcome: migrated") == 2 and out.count("approval: Approve by") == 2
    assert "PASS offsets_preserved" in out and "PASS record_continuity" in out
    assert re.search(r"count\(kafka\) = 3 \(continued from the commits", out)
    assert re.search(r"group orders-app\s+consumer", out) and re.search(r"group wordcount\s+streams", out)
    assert "local Kafka stopped" in out
    assert _processes_mentioning(f"-Dkip848.instance={tmp_path}") == []
    assert _processes_mentioning(f"-Dkip848.app={tmp_path}") == []
    # this demo's consumer apps (named by its broker's address: other runs on the machine have their own)
    bootstrap = re.search(r"ready at (\S+) in", out).group(1)
    assert [p for p in _processes_mentioning("kip848_harness.consumer_app")
            if p in _processes_mentioning(f"--bootstrap-servers\0{bootstrap}\0")] == []
