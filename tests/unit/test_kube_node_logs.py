"""The node agent's kubelet log API (harness/kip848_harness/kube_node_logs.py), its pure parts: which span of a
container's log file is its current and its previous container, and the kubelet's order of ``tailLines`` and
``limitBytes``. The HTTPS server itself is exercised through the real API server's ``pods/log`` in
tests/integration/test_kubernetes_controller.py."""

from __future__ import annotations

from pathlib import Path

from kip848_harness.kube_node_logs import LogSpans, select


def test_current_and_previous_follow_the_incarnations_as_the_kubelet_answers(tmp_path: Path) -> None:
    path = tmp_path / "consumer.log"
    spans = LogSpans(path)
    assert spans.read(previous=False) is None and spans.read(previous=True) is None  # never started
    spans.started()
    path.write_bytes(b"one\ntwo\n")
    assert spans.read(previous=False) == b"one\ntwo\n"
    assert spans.read(previous=True) is None  # running, never restarted: no previous container
    spans.ended()
    # waiting to restart (CrashLoopBackOff): both reads are the exited container's log
    assert spans.read(previous=False) == spans.read(previous=True) == b"one\ntwo\n"
    spans.started()
    with open(path, "ab") as f:
        f.write(b"three\n")
    assert spans.read(previous=False) == b"three\n"
    assert spans.read(previous=True) == b"one\ntwo\n"


def test_tail_lines_then_limit_bytes() -> None:
    data = b"a1\nb22\nc333\n"
    assert select(data, tail_lines=2, limit_bytes=None) == b"b22\nc333\n"
    assert select(data, tail_lines=2, limit_bytes=5) == b"b22\nc"  # the first bytes of the tail
    assert select(data, tail_lines=0, limit_bytes=None) == b""
    assert select(data, tail_lines=None, limit_bytes=4) == b"a1\nb"
    assert select(data, tail_lines=10, limit_bytes=None) == data
