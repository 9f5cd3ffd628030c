"""docs/controllers.md's supervisord roll script and the one the harness installs are the same text.

The tests run the harness's copy on a real supervisord (tests/integration/test_way_back_states.py, the
command-controller and rolling tests); a deployment copies the page's. Issue 46 found them able to drift: the
page's roll read a stopped process as a failure. The harness renders the script from its values
(:func:`kip848_harness.supervised.roll_script`); rendered with the page's values it must be the page's text,
byte for byte, so neither changes without the other.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from kip848_harness.supervised import ROLL_RUNNING_WAIT_SECONDS, roll_script
from tests.conftest import REPO

DOC = (REPO / "docs" / "controllers.md").read_text()


def doc_roll_script() -> str:
    blocks = [b for b in re.findall(r"```sh\n(.*?)```", DOC, re.S) if b.startswith("#!/bin/sh\n# /opt/orders/roll.sh")]
    assert len(blocks) == 1, f"docs/controllers.md holds {len(blocks)} roll.sh blocks, expected one"
    return blocks[0]


def test_the_harness_installs_the_pages_roll_script():
    rendered = roll_script(ctl="supervisorctl", roll_path="/opt/orders/roll.sh", protocol_path="/opt/orders/protocol",
                           processes=["orders:orders_0", "orders:orders_1"], protocols=("classic", "consumer"),
                           wait_seconds=ROLL_RUNNING_WAIT_SECONDS)
    page = doc_roll_script()
    assert rendered == page, "\n".join(
        f"line {n}: page {a!r} != harness {b!r}"
        for n, (a, b) in enumerate(zip(page.splitlines(), rendered.splitlines(), strict=False), 1) if a != b
    ) or f"lengths differ: page {len(page)}, harness {len(rendered)}"


def test_the_pages_roll_script_never_restarts_with_supervisorctl_restart():
    """``supervisorctl restart`` of a STOPPED, EXITED or FATAL process prints ``ERROR (not running)`` before
    ``started`` (exit 0): a script that treats an ERROR line as a failure stops a way back on the very instance it
    must bring back (issue 46). The script stops and starts each process itself."""
    script = doc_roll_script()
    assert "supervisorctl restart" not in script and " restart \"$proc\"" not in script, script
    assert 'supervisorctl stop "$proc"' in script and 'supervisorctl start "$proc"' in script


def doc_systemd_ctl() -> str:
    blocks = [b for b in re.findall(r"```sh\n(.*?)```", DOC, re.S)
              if b.startswith("#!/bin/sh\n# /usr/local/sbin/payments-ctl")]
    assert len(blocks) == 1, f"docs/controllers.md holds {len(blocks)} payments-ctl blocks, expected one"
    return blocks[0]


@pytest.mark.parametrize("script", [doc_roll_script, doc_systemd_ctl], ids=["supervisord", "systemd"])
def test_the_pages_roll_recipes_are_shell_that_parses(script):
    """The page's scripts are parsed by the machine's ``sh`` (a recipe that does not parse fails on the host)."""
    parsed = subprocess.run(["sh", "-n"], input=script(), text=True, capture_output=True, check=False)
    assert parsed.returncode == 0, parsed.stderr


def test_the_systemd_roll_works_from_every_unit_state():
    """The same property as roll.sh's (issue 46): a failed unit (its start limit hit) refuses ``systemctl restart``
    until ``reset-failed``; the first failure must not end the roll silently (no ``set -e``); a unit that was not
    active and does not come back is named while the others are rolled; one that was active stops the roll."""
    script = doc_systemd_ctl()
    assert "set -e" not in script and "set -u" in script
    roll = script[script.index("  roll)"):]
    assert roll.index('systemctl reset-failed "$unit"') < roll.index('systemctl restart "$unit"')
    assert 'if [ "$was" = active ]; then' in roll and "the roll stops here" in roll
    assert 'not_back="$not_back $unit' in roll and "not active on" in roll
