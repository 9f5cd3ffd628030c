"""The embedded demo's application controller: Kafka's WordCountDemo on the local broker.

It implements :class:`airflow_provider_kip848.controllers.ApplicationController`
(stop every instance, start with a ``group.protocol``) with processes on this
machine; the example DAG's default, the demo and the end-to-end tests use it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from airflow_provider_kip848.testing.apps import StreamsApp, wordcount_properties
from airflow_provider_kip848.testing.broker import LocalKafka


class LocalWordCountController:
    """Stops and starts ``WordCountDemo`` instances of one application id on a local broker.

    ``stop`` finds running instances by their pid files (written at start) and
    checks each process's command line before signalling it. ``stop_mode``
    ``graceful`` sends SIGTERM: a classic Streams app closes without leaving
    its group (Kafka Streams' default), so its members stay until the session
    times out, exactly as in production, and the DAG empties the group.
    ``kill`` sends SIGKILL (a crash).
    """

    def __init__(self, kafka_workdir: str, application_id: str, stop_mode: str = "graceful",
                 properties: dict[str, str] | None = None) -> None:
        self.kafka = LocalKafka.existing(kafka_workdir)
        self.application_id = application_id
        self.stop_mode = stop_mode
        self.properties = dict(properties or {})

    @property
    def apps_dir(self) -> Path:
        return self.kafka.workdir / "apps"

    def _pid_files(self) -> list[Path]:
        return sorted(self.apps_dir.glob(f"{self.application_id}*.pid"))

    def running_pids(self) -> list[int]:
        pids = []
        for pid_file in self._pid_files():
            try:
                pid = int(pid_file.read_text())
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except (OSError, ValueError):
                continue
            if f"-Dkip848.app={self.apps_dir / pid_file.stem}".encode() in cmdline:
                pids.append(pid)
        return pids

    def stop(self) -> dict[str, Any]:
        pids = self.running_pids()
        sig = signal.SIGKILL if self.stop_mode == "kill" else signal.SIGTERM
        for pid in pids:
            os.kill(pid, sig)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.running_pids():
            time.sleep(0.2)
        left = self.running_pids()
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        return {"application_id": self.application_id, "stopped_pids": pids, "signal": sig.name,
                "forced": left}

    def start(self, group_protocol: str) -> dict[str, Any]:
        running = self.running_pids()
        if running:  # idempotent: a rerun after a failure must not start a second copy
            return {"application_id": self.application_id, "already_running": running,
                    "group_protocol": group_protocol}
        name = f"{self.application_id}-{group_protocol}-{int(time.time())}"
        props = wordcount_properties(self.kafka.bootstrap_servers, self.application_id,
                                     group_protocol=group_protocol,
                                     state_dir=self.apps_dir / f"{self.application_id}-state",
                                     extra=self.properties)
        app = StreamsApp.start(self.kafka.distribution, props, workdir=self.apps_dir, name=name)
        return {"application_id": self.application_id, "pid": app.process.pid, "group_protocol": group_protocol,
                "log": str(app.log_path)}
