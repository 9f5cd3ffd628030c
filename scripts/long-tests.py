"""Print tests/long_tests.txt from a run's build/test-durations.json: the integration tests that took longer than the
threshold (default 10 s). ``make test-fast`` leaves them out; ``make test`` runs them.

    python scripts/long-tests.py build/test-durations.json 10 "the clean-clone run of <commit>" > tests/long_tests.txt
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    path = Path(argv[0] if argv else "build/test-durations.json")
    threshold = float(argv[1]) if len(argv) > 1 else 10.0
    times = json.loads(path.read_text())
    run = argv[2] if len(argv) > 2 else "one run"
    long = sorted(k for k, v in times.items() if v["tier"] == "integration" and v["seconds"] > threshold)
    total = sum(times[k]["seconds"] for k in long) / 60
    print(f"# Integration tests that took more than {threshold:g} s (setup + call + teardown) in one `make test` run")
    print(f"# on the 2-core machine ({len(long)} tests, {total:.1f} worker-minutes; {run}, by scripts/long-tests.py).")
    print("# `make test-fast` leaves them out (mark `long`), `make test` runs them. One node id per line.")
    for nodeid in long:
        print(nodeid)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
