"""The house rules for reading the package (docs/adr/0009-house-rules-for-reading.md), checked by AST.

Over ``airflow_provider_kip848/`` without the test harness (``testing/``):

(a) no module over 500 lines unless its module docstring has a paragraph starting ``Why over 500 lines:``;
(b) no single-letter import alias (``import x as R``, ``from m import x as R``);
(c) no ``Any`` in a public signature without a ``# Any: `` comment on one of the signature's lines (the rule and
    its count live in scripts/count_public_any.py, loaded here by path, so the script's count is this list).

Each failure is ``file:line`` and what to do. Each rule is first fed small synthetic sources that must pass and
sources that must fail, so a rule that cannot fail is caught here, not in review.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE_DIR = REPO / "airflow_provider_kip848"
ADR = "docs/adr/0009-house-rules-for-reading.md"
MAX_LINES = 500
REASON_PARAGRAPH = "Why over 500 lines:"
#: the rules other parts of issue 33 make pass; the lead removes the marks after merging them


def _load_counter():
    """scripts/count_public_any.py, by path (scripts/ is no package, and the product must not hold test logic)."""
    spec = importlib.util.spec_from_file_location("count_public_any", REPO / "scripts" / "count_public_any.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


counter = _load_counter()


# -- the rules, on one module's source -------------------------------------------------------------


def long_module_problem(source: str, where: str) -> list[str]:
    """(a): over MAX_LINES lines without a ``Why over 500 lines:`` paragraph in the module docstring."""
    lines = len(source.splitlines())
    if lines <= MAX_LINES:
        return []
    doc = ast.get_docstring(ast.parse(source)) or ""
    paragraphs = [p.strip() for p in inspect.cleandoc(doc).split("\n\n")]
    if any(p.startswith(REASON_PARAGRAPH) for p in paragraphs):
        return []
    return [f"{where}:1: {lines} lines (over {MAX_LINES}): split it by concept (one module per concept, names that "
            f"say what they do), or give the reason in a module-docstring paragraph starting '{REASON_PARAGRAPH}' "
            f"({ADR})"]


def short_alias_problems(source: str, where: str) -> list[str]:
    """(b): ``import x as Y`` / ``from m import x as Y`` with a one-character ``Y``."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.asname is not None and len(alias.asname) == 1:
                    problems.append(f"{where}:{node.lineno}: '{alias.name} as {alias.asname}': import the names you "
                                    f"use, or give the module a descriptive alias ({ADR})")
    return problems


def bare_any_problems(source: str, where: str, module_public: bool = True) -> list[str]:
    """(c): an ``Any`` in a public signature whose lines carry no ``# Any: `` reason."""
    return [f"{where}:{use.line}: {use.owner}: {use.what} is Any without a reason: give it a real type (a TypedDict, "
            f"a Protocol, Mapping[str, object], a dataclass), or put '# Any: <why>' on one of the signature's lines "
            f"({ADR})"
            for use in counter.public_any(source, module_public) if not use.reasoned]


def _over_package(rule) -> list[str]:
    problems = []
    for path in counter.modules(PACKAGE_DIR):
        where = path.relative_to(REPO).as_posix()
        if rule is bare_any_problems:
            problems += rule(path.read_text(), where, counter.module_is_public(path, PACKAGE_DIR))
        else:
            problems += rule(path.read_text(), where)
    return problems


# -- the package keeps them --------------------------------------------------------------------------



def test_no_module_is_over_500_lines_without_its_reason():
    found = _over_package(long_module_problem)
    for part in ("harness", "dags"):  # the harness and the runbooks too
        for path in sorted((REPO / part).rglob("*.py")):
            found += long_module_problem(path.read_text(), path.relative_to(REPO).as_posix())
    assert found == [], f"{len(found)} module(s):\n" + "\n".join(found)



def test_no_single_letter_import_alias():
    found = _over_package(short_alias_problems)
    # and where a newcomer reads next: the harness, the DAGs, the tests, the benchmarks, the scripts
    for part in ("harness", "dags", "tests", "bench", "scripts"):
        for path in sorted((REPO / part).rglob("*.py")):
            found += short_alias_problems(path.read_text(), path.relative_to(REPO).as_posix())
    assert found == [], f"{len(found)} alias(es):\n" + "\n".join(found)



def test_no_any_in_a_public_signature_without_its_reason():
    found = _over_package(bare_any_problems)
    assert found == [], f"{len(found)} annotation(s):\n" + "\n".join(found)


def test_the_rules_cover_the_package_without_the_harness():
    covered = {p.relative_to(PACKAGE_DIR).parts[0] for p in counter.modules(PACKAGE_DIR)}
    assert {"kafka", "operators", "plugins", "get_provider_info.py"} <= covered
    assert "testing" not in covered


# -- each rule, on synthetic sources -----------------------------------------------------------------


def _module(lines: int, doc: str = "One concept.") -> str:
    body = "\n".join(f"X{i} = {i}" for i in range(lines))
    return f'"""{doc}"""\n\n{body}\n'


def test_a_long_module_needs_its_reason_paragraph():
    assert long_module_problem(_module(490), "m.py") == []
    found = long_module_problem(_module(520), "m.py")
    assert len(found) == 1 and found[0].startswith("m.py:1: 522 lines (over 500)"), found
    reason = "One concept.\n\nWhy over 500 lines: the table of every error code is one lookup."
    assert long_module_problem(_module(520, reason), "m.py") == []
    # the words inside a paragraph, or in a comment, are not the paragraph
    assert long_module_problem(_module(520, "One concept; Why over 500 lines: no."), "m.py")
    assert long_module_problem("# Why over 500 lines: a comment\n" + _module(520, "Doc."), "m.py")


@pytest.mark.parametrize("source, bad", [
    ("import airflow_provider_kip848.changecontrol.report as R\n", True),
    ("from airflow_provider_kip848.changecontrol import report as R\n", True),
    ("from os import path as p\n", True),
    ("import numpy as np\n", False),
    ("from airflow_provider_kip848.changecontrol import report as run_report\n", False),
    ("from airflow_provider_kip848.changecontrol import report\n", False),
    ("def f():\n    import json as j\n    return j\n", True),
])
def test_single_letter_aliases_are_found_and_descriptive_ones_pass(source, bad):
    found = short_alias_problems(source, "m.py")
    assert (found != []) is bad, found
    if bad:
        assert found[0].startswith("m.py:") and "descriptive alias" in found[0]


ANY_CASES = {
    # name: (source, module public, the (line, owner, what) that lack a reason)
    "a bare Any parameter and return": ("""
        from typing import Any
        def execute(self, context: Any) -> Any:
            return None
        """, True, [(3, "execute", "parameter context"), (3, "execute", "the return")]),
    "a reason on the def line": ("""
        from typing import Any
        def execute(context: Any) -> dict[str, Any]:  # Any: XCom values are JSON of several shapes
            return {}
        """, True, []),
    "a reason on a continuation line of the signature": ("""
        import typing
        def run(a: int,
                b: typing.Any,  # Any: whatever the caller's hook returns
                ) -> None:
            '''Docstring.'''
        """, True, []),
    "a reason after a noqa": ("""
        from typing import Any
        def run(b: Any) -> None:  # noqa: ARG001  # Any: passed through untouched
            pass
        """, True, []),
    "a reason only in the body is not on the signature": ("""
        from typing import Any
        def run(b: Any) -> None:
            x = 1  # Any: too late
        """, True, [(3, "run", "parameter b")]),
    "an empty reason is no reason": ("""
        from typing import Any
        def run(b: Any) -> None:  # Any:
            pass
        """, True, [(3, "run", "parameter b")]),
    "kwargs, a string annotation and a nested Any": ("""
        from typing import Any
        class Op:
            def __init__(self, *, spec: "Mapping[str, Any]", **kwargs: Any) -> None:
                pass
            def _helper(self, x: Any) -> Any:
                return x
            def __eq__(self, other: Any) -> bool:
                return True
        """, True, [(4, "Op.__init__", "parameter spec"), (4, "Op.__init__", "parameter kwargs")]),
    "private functions, classes and local functions are not public": ("""
        from typing import Any
        def _private(x: Any) -> Any:
            def local(y: Any) -> Any:
                return y
            return local(x)
        class _Private:
            def run(self, x: Any) -> None:
                pass
        def public(x: int) -> int:
            def local(y: Any) -> Any:
                return y
            return x
        """, True, []),
    "a private module": ("""
        from typing import Any
        def run(x: Any) -> Any:
            return x
        """, False, []),
    "dataclass and TypedDict attributes, a plain class's are not signatures": ("""
        from dataclasses import dataclass, field
        from typing import Any, TypedDict
        @dataclass(frozen=True)
        class Result:
            facts: dict[str, Any]
            detail: Any = None  # Any: a client's own object, shown as text
            count: int = 0
        class Event(TypedDict):
            status: str
            payload: Any
        class Plain:
            cache: Any = None
        """, True, [(6, "Result", "attribute facts"), (11, "Event", "attribute payload")]),
    "a one-line definition's signature is its line": ("""
        from typing import Any
        def ident(x: Any) -> Any: return x  # Any: identity over any value
        def bare(x: Any) -> None: pass
        """, True, [(4, "bare", "parameter x")]),
    "a generic base": ("""
        from typing import Any
        class Bag(dict[str, Any]):
            pass
        """, True, [(3, "Bag", "a base")]),
}


@pytest.mark.parametrize("case", list(ANY_CASES))
def test_any_in_public_signatures_needs_a_reason(case):
    source, public, expected = ANY_CASES[case]
    uses = counter.public_any(textwrap.dedent(source), public)
    assert [(u.line, u.owner, u.what) for u in uses if not u.reasoned] == expected
    found = bare_any_problems(textwrap.dedent(source), "m.py", public)
    assert len(found) == len(expected)
    assert all(p.startswith("m.py:") and "# Any: <why>" in p for p in found)


def test_the_counter_prints_the_count_per_part(tmp_path, capsys):
    package = tmp_path / "pkg"
    (package / "core").mkdir(parents=True)
    (package / "testing").mkdir()
    (package / "core" / "a.py").write_text("from typing import Any\ndef f(x: Any) -> Any:  # Any: why\n    return x\n")
    (package / "core" / "_b.py").write_text("from typing import Any\ndef f(x: Any) -> None:\n    pass\n")
    (package / "top.py").write_text("from typing import Any\ndef g(x: Any) -> None:\n    pass\n")
    (package / "testing" / "h.py").write_text("from typing import Any\ndef h(x: Any) -> None:\n    pass\n")
    assert counter.main([str(package)]) == 0
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()[2:]}
    assert rows == {"core": ["2", "2", "0", "1", "0"], "top": ["1", "0", "1", "1", "1"],
                    "total": ["3", "2", "1", "2", "1"]}
