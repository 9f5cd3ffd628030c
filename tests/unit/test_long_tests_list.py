"""tests/long_tests.txt (what ``make test-fast`` leaves out) names tests that exist: a renamed or removed test would
otherwise stay listed and its successor run in the quick set unnoticed, or a typo leave a long test in it."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_listed_long_test_exists_as_an_integration_test():
    lines = [line.strip() for line in (REPO / "tests" / "long_tests.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines, "the list is empty: make test-fast would run every integration test"
    assert len(lines) == len(set(lines)), "a test is listed twice"
    functions: dict[str, set[str]] = {}
    for nodeid in lines:
        path, name = nodeid.split("::", 1)
        assert path.startswith("tests/integration/"), f"{nodeid}: only integration tests are listed"
        if path not in functions:
            file = REPO / path
            assert file.is_file(), f"{nodeid}: no such file"
            functions[path] = {node.name for node in ast.walk(ast.parse(file.read_text()))
                               if isinstance(node, ast.FunctionDef)}
        assert name.split("[", 1)[0] in functions[path], f"{nodeid}: no such test in {path}"
