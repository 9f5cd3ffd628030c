"""docs/checklist.md stays true to the code: every reference in it names something that exists, and
every covered or partial row names the real-broker tests that exercise it.

The checklist maps each item of the source guides to what automates or checks it, with
references of five kinds (see the head of docs/checklist.md):

* ``preflight:<name>``: a ``Check("<name>", ...)`` built in kafka/rules/preflight*.py;
* ``lint:<key>``: a key that kafka/rules/lint.py can report: a literal first argument of
  ``LintFinding``, a key drawn from a loop over a literal tuple or dict, or one that
  ``lint_client_config`` actually emits when probed;
* ``py:<module>:<attribute>``: importable, the (dotted) attribute resolves;
* ``dag:<dag_id>:<task_id>``: a DAG file in dags/ declares that task (``task_id=`` or a
  ``@task``-decorated function);
* ``spark:<name>``: a ``Verdict("<name>", ...)`` built in spark/checks.py.

Its ``tested by`` column names pytest node ids, ``tests/<tier>/<file>.py::<test_function>`` (a
parametrized case as ``::<test_function>[<id>]``, checked without the ``[...]``). The rules:

* a ``covered`` or ``partial`` row names at least one test, and nothing else in that cell; any other row
  has ``—`` there;
* each test is in a tier that runs a real broker (tests/integration, tests/e2e, tests/deploy; tests/unit
  runs none), its file exists and defines that function as a top-level ``def test_...``;
* each ``preflight:<name>`` of a covered or partial row is exercised by one of the row's test files: a
  file that both runs the preflight (it calls ``KafkaMigrationPreflightOperator`` or ``run_preflight``, or
  ``run_dag`` on a DAG that has a ``preflight`` task) and names the check in a string literal
  (``"group_empty"``, ``"group_size: 2 member(s)"``; docstrings do not count), as a whole word;
* likewise each ``lint:<key>``: a file that both runs the lint (``KafkaClientConfigLintOperator``,
  ``lint_client_config``, or ``run_dag`` on a DAG with a ``lint_client_config`` task) and names the
  key in a string literal (``session.timeout.ms`` inside ``consumer.session.timeout.ms`` does not count).

A file that runs the preflight but never names the check (it only sees "passed"), or names a key
without running the lint, does not back the row: the rule is about the test asserting on that check.

The source is read with ``ast``, never executed, except for ``py:`` (imported) and the lint probe.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "airflow_provider_kip848"
CHECKLIST = REPO / "docs" / "checklist.md"
#: the preflight and the modules of its checks (kafka/rules/preflight.py, preflight_*_checks.py, ...; client_release.py:
#: the client release each instance runs)
PREFLIGHT = sorted([*(REPO / PACKAGE / "kafka" / "rules").glob("preflight*.py"),
                    REPO / PACKAGE / "kafka" / "rules" / "client_release.py"])
LINT = REPO / PACKAGE / "kafka" / "rules" / "lint.py"
SPARK_CHECKS = REPO / PACKAGE / "spark" / "checks.py"
DAGS = REPO / "dags"

GUIDES = ("G000", "G001", "G002", "G003", "G004")
STATUSES = ("covered", "partial", "missing", "out of scope")
KINDS = ("preflight", "lint", "py", "dag", "spark")
COLUMNS = ("id", "guide item", "what it asks", "covered by", "tested by", "status")
SUMMARY_COLUMNS = ("guide", *STATUSES, "total")
ID_RE = re.compile(r"^(G\d{3})-\d{2}$")
SECTION_RE = re.compile(r"^##\s+(\S+)")
SPAN_RE = re.compile(r"`([^`]*)`")
REFERENCE_RE = re.compile(r"^(?P<kind>[a-z]+):(?P<target>\S+)$")
#: a note must say something: at least this many letters once the references are taken out
MIN_NOTE_LETTERS = 12
#: the test tiers that start a real Kafka (tests/unit starts none)
TEST_TIERS = ("integration", "e2e", "deploy")
TEST_RE = re.compile(r"^tests/(?P<tier>[^/\s]+)/(?P<path>[^:\s]+\.py)::(?P<function>[A-Za-z_]\w*)(?:\[[^\]]+\])?$")
#: the ``tested by`` cell of a row that has no test
NO_TEST = "—"
#: reference kind -> (the calls that run that check, the DAG task through which a DAG run runs it)
RUNNERS = {"preflight": (frozenset({"KafkaMigrationPreflightOperator", "run_preflight"}), "preflight"),
           "lint": (frozenset({"KafkaClientConfigLintOperator", "lint_client_config"}), "lint_client_config")}


# -- parsing the checklist ---------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    id: str
    section: str | None
    item: str
    asks: str
    covered_by: str
    status: str
    line: int
    tested_by: str = NO_TEST

    @property
    def spans(self) -> list[str]:
        """Every backticked span of the ``covered by`` cell (each must be a reference)."""
        return SPAN_RE.findall(self.covered_by)

    @property
    def note(self) -> str:
        """The ``covered by`` cell without its references: the reason, or what is lacking."""
        return SPAN_RE.sub("", self.covered_by).strip(" ;,.:-—()")

    @property
    def tests(self) -> list[str]:
        """Every backticked span of the ``tested by`` cell (each must be a test node id)."""
        return SPAN_RE.findall(self.tested_by)

    @property
    def guide(self) -> str | None:
        m = ID_RE.match(self.id)
        return m.group(1) if m else None


@dataclass(frozen=True)
class Checklist:
    rows: list[Row]
    summary: dict[str, dict[str, int]]  # guide (or "all") -> column -> count
    problems: list[str]  # lines the parser could not place


def _cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") else inner
    return [c.strip() for c in inner.split("|")]


def parse_checklist(text: str) -> Checklist:
    rows: list[Row] = []
    summary: dict[str, dict[str, int]] = {}
    problems: list[str] = []
    section: str | None = None
    header: tuple[str, ...] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if m := SECTION_RE.match(line):
            section, header = m.group(1), None
            continue
        if not line.lstrip().startswith("|"):
            header = None  # a table ends at the first line that is not a table row
            continue
        cells = _cells(line)
        if header is None:
            header = tuple(c.lower() for c in cells)
            if header not in (COLUMNS, SUMMARY_COLUMNS):
                problems.append(f"line {number}: unknown table header {cells}")
            continue
        if all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
            continue
        if len(cells) != len(header):
            problems.append(f"line {number}: {len(cells)} cells, the table has {len(header)} columns")
            continue
        if header == COLUMNS:
            rows.append(Row(id=cells[0], section=section, item=cells[1], asks=cells[2], covered_by=cells[3],
                            tested_by=cells[4], status=cells[5], line=number))
        elif header == SUMMARY_COLUMNS:
            try:
                summary[cells[0]] = {col: int(v) for col, v in zip(SUMMARY_COLUMNS[1:], cells[1:], strict=True)}
            except ValueError:
                problems.append(f"line {number}: summary counts must be integers: {cells}")
    return Checklist(rows, summary, problems)


@cache
def checklist() -> Checklist:
    assert CHECKLIST.is_file(), f"{CHECKLIST} is missing"
    return parse_checklist(CHECKLIST.read_text(encoding="utf-8"))


# -- what exists in the code (pure functions over source text, cached on the real files) ------


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _first_str_arg(call: ast.Call, keyword: str) -> ast.expr | None:
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _str_const(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def names_built(source: str, constructor: str, keyword: str) -> frozenset[str]:
    """The literal first arguments (or ``keyword=``) of every ``constructor(...)`` call in ``source``."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _call_name(node.func) == constructor:
            if (value := _str_const(_first_str_arg(node, keyword))) is not None:
                found.add(value)
    return frozenset(found)


def check_names(source: str) -> frozenset[str]:
    return names_built(source, "Check", "name")


def verdict_names(source: str) -> frozenset[str]:
    return names_built(source, "Verdict", "check")


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _assigned_literal(name: str, scopes: Iterable[ast.AST]) -> ast.expr | None:
    """The literal last assigned to ``name`` in the innermost of ``scopes`` that assigns it."""
    for scope in scopes:
        value = None
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                value = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
                value = node.value
        if value is not None:
            return value
    return None


def _iterated(node: ast.expr, scopes: list[ast.AST]) -> list[ast.expr] | None:
    """The elements a ``for`` loop over ``node`` yields, when they are written out in the source."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return list(node.elts)
    if isinstance(node, ast.Dict):
        return [k for k in node.keys if k is not None]
    if isinstance(node, ast.Name):
        value = _assigned_literal(node.id, scopes)
        return _iterated(value, scopes) if value is not None else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args:
        owner = node.func.value
        if isinstance(owner, ast.Name):
            owner = _assigned_literal(owner.id, scopes) or owner
        if isinstance(owner, ast.Dict):
            if node.func.attr == "keys":
                return [k for k in owner.keys if k is not None]
            if node.func.attr == "values":
                return list(owner.values)
            if node.func.attr == "items":
                return [ast.Tuple(elts=[k, v]) for k, v in zip(owner.keys, owner.values, strict=True)
                        if k is not None]
    return None


def _loop_values(name: str, start: ast.AST, parents: dict[ast.AST, ast.AST]) -> set[str] | None:
    """The string values ``name`` takes in the innermost enclosing ``for`` loop that binds it."""
    scopes: list[ast.AST] = []
    node: ast.AST | None = start
    loop: ast.For | None = None
    while node is not None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            scopes.append(node)
        if loop is None and isinstance(node, ast.For):
            loop = node if _binding_index(node.target, name) != -2 else None
        node = parents.get(node)
    if loop is None:
        return None
    elements = _iterated(loop.iter, scopes)
    if elements is None:
        return None
    index = _binding_index(loop.target, name)
    values = set()
    for element in elements:
        if index >= 0:
            if not isinstance(element, (ast.Tuple, ast.List)) or index >= len(element.elts):
                return None
            element = element.elts[index]
        if (value := _str_const(element)) is None:
            return None
        values.add(value)
    return values


def _binding_index(target: ast.expr, name: str) -> int:
    """-1: the loop target is ``name`` itself; i: ``name`` is element i of a tuple target; -2: not bound."""
    if isinstance(target, ast.Name):
        return -1 if target.id == name else -2
    if isinstance(target, (ast.Tuple, ast.List)):
        for i, elt in enumerate(target.elts):
            if isinstance(elt, ast.Name) and elt.id == name:
                return i
    return -2


def lint_keys_in_source(source: str) -> tuple[frozenset[str], list[str]]:
    """Keys of every ``LintFinding(key, ...)``: literal, or drawn from a loop over a written-out tuple,
    list or dict; also the keys that could not be worked out (as source text)."""
    tree = ast.parse(source)
    parents = _parents(tree)
    keys: set[str] = set()
    unresolved: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _call_name(node.func) == "LintFinding"):
            continue
        arg = _first_str_arg(node, "key")
        if (value := _str_const(arg)) is not None:
            keys.add(value)
            continue
        values = _loop_values(arg.id, node, parents) if isinstance(arg, ast.Name) else None
        if values is None:
            unresolved.append(ast.unparse(arg) if arg is not None else "<no key>")
        else:
            keys |= values
    return frozenset(keys), unresolved


def probed_lint_keys(source: str) -> frozenset[str]:
    """What ``lint_client_config`` reports when each config-like string of lint.py is set alone (and
    when nothing is set), for every target and client, a subscription pattern given: keys the static
    reader cannot work out (built in some other way) show up here."""
    from airflow_provider_kip848.kafka.rules import lint

    candidates = {node.value for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)+", node.value)}
    found: set[str] = set()
    for target in lint.TARGETS:
        for client in getattr(lint, "CLIENTS", ("java", "librdkafka")):
            for props in [{}, *({key: "1"} for key in sorted(candidates))]:
                try:
                    findings = lint.lint_client_config(props, target, client=client, subscription_pattern="topic*")
                except (ValueError, TypeError):  # a probe the lint refuses tells nothing
                    continue
                found |= {f.key for f in findings}
    return frozenset(found)


def _decorator_root(node: ast.expr) -> str | None:
    """``task`` for ``@task``, ``@task.branch``, ``@task(trigger_rule=...)``, ``@task.short_circuit(...)``."""
    if isinstance(node, ast.Call):
        node = node.func
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _constants(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and (value := _str_const(node.value)) is not None:
            out.update({t.id: value for t in node.targets if isinstance(t, ast.Name)})
    return out


def _string(node: ast.AST | None, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return _str_const(node)


def _task_ids(scope: ast.AST, constants: dict[str, str]) -> set[str]:
    ids = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "task_id" and (value := _string(kw.value, constants)) is not None:
                    ids.add(value)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not scope:
            for deco in node.decorator_list:
                if _decorator_root(deco) == "task":
                    explicit = None
                    if isinstance(deco, ast.Call):
                        explicit = next((_string(k.value, constants) for k in deco.keywords if k.arg == "task_id"),
                                        None)
                    ids.add(explicit or node.name)
    return ids


def dag_task_ids(source: str) -> dict[str, frozenset[str]]:
    """dag_id -> task ids, for ``@dag``-decorated functions and ``with DAG(...)`` blocks in ``source``."""
    tree = ast.parse(source)
    constants = _constants(tree)
    dags: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for deco in node.decorator_list:
                if _decorator_root(deco) != "dag":
                    continue
                dag_id = node.name
                if isinstance(deco, ast.Call):
                    dag_id = next((_string(k.value, constants) for k in deco.keywords if k.arg == "dag_id"),
                                  None) or dag_id
                dags.setdefault(dag_id, set()).update(_task_ids(node, constants))
        elif isinstance(node, ast.With):
            for item in node.items:
                call = item.context_expr
                if isinstance(call, ast.Call) and _call_name(call.func) == "DAG":
                    dag_id = _string(_first_str_arg(call, "dag_id"), constants)
                    if dag_id:
                        dags.setdefault(dag_id, set()).update(_task_ids(node, constants))
    return {k: frozenset(v) for k, v in dags.items()}


@cache
def known_checks() -> frozenset[str]:
    return frozenset().union(*(check_names(path.read_text(encoding="utf-8")) for path in PREFLIGHT))


@cache
def known_lint_keys() -> frozenset[str]:
    source = LINT.read_text(encoding="utf-8")
    static, _ = lint_keys_in_source(source)
    return static | probed_lint_keys(source)


@cache
def known_verdicts() -> frozenset[str]:
    return verdict_names(SPARK_CHECKS.read_text(encoding="utf-8"))


@cache
def known_dags() -> dict[str, frozenset[str]]:
    dags: dict[str, set[str]] = {}
    for path in sorted(DAGS.glob("*.py")):
        for dag_id, tasks in dag_task_ids(path.read_text(encoding="utf-8")).items():
            dags.setdefault(dag_id, set()).update(tasks)
    return {k: frozenset(v) for k, v in dags.items()}


def _py_exists(target: str) -> bool:
    module, sep, attribute = target.partition(":")
    if not sep or not attribute or not (module == PACKAGE or module.startswith(PACKAGE + ".")):
        return False
    try:
        obj = importlib.import_module(module)
    except ImportError:
        return False
    for part in attribute.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def _dag_exists(target: str) -> bool:
    dag_id, sep, task_id = target.partition(":")
    return bool(sep) and task_id in known_dags().get(dag_id, frozenset())


def reference_problem(reference: str) -> str | None:
    """Why ``reference`` names nothing in the code, or None when it resolves."""
    m = REFERENCE_RE.match(reference)
    if not m or m.group("kind") not in KINDS:
        return f"not a reference of a known kind ({', '.join(KINDS)}): {reference!r}"
    kind, target = m.group("kind"), m.group("target")
    exists = {
        "preflight": lambda: target in known_checks(),
        "lint": lambda: target in known_lint_keys(),
        "py": lambda: _py_exists(target),
        "dag": lambda: _dag_exists(target),
        "spark": lambda: target in known_verdicts(),
    }[kind]()
    return None if exists else f"{reference!r} names nothing in the code"


def broken_references(rows: Iterable[Row]) -> Iterator[str]:
    for row in rows:
        for span in row.spans:
            if (problem := reference_problem(span)) is not None:
                yield f"{row.id} (line {row.line}): {problem}"


# -- what the tests exercise (read with ast from the test files) ---------------------------------


@dataclass(frozen=True)
class BrokerTestFile:
    """What the checklist rules need to know of a test file."""

    functions: frozenset[str]  # its top-level ``def test_...`` (and ``async def``)
    strings: tuple[str, ...]  # its string literals, f-string parts included, docstrings left out
    calls: frozenset[str]  # the names it calls (``Foo(...)``, ``x.foo(...)``)
    dags_run: frozenset[str]  # the DAG ids it passes to ``run_dag``, literally or as a module constant


def _docstrings(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and _str_const(first.value) is not None:
                ids.add(id(first.value))
    return ids


def broker_test_facts(source: str) -> BrokerTestFile:
    tree = ast.parse(source)
    constants = _constants(tree)
    docstrings = _docstrings(tree)
    functions = frozenset(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                          and n.name.startswith("test_"))
    strings = tuple(n.value for n in ast.walk(tree)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings)
    calls: set[str] = set()
    dags: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (name := _call_name(node.func)) is not None:
            calls.add(name)
            if name == "run_dag":
                first = node.args[0] if node.args else next(
                    (k.value for k in node.keywords if k.arg in ("module", "dag_id")), None)
                if (dag_id := _string(first, constants)) is not None:
                    dags.add(dag_id)
    return BrokerTestFile(functions, strings, frozenset(calls), frozenset(dags))


@cache
def broker_test_file(path: Path) -> BrokerTestFile:
    return broker_test_facts(path.read_text(encoding="utf-8"))


def _test_path(reference: str) -> Path | None:
    """The file a well-formed node id of a real-broker tier names (None: malformed or another tier)."""
    m = TEST_RE.match(reference)
    if not m or m.group("tier") not in TEST_TIERS:
        return None
    tier = (REPO / "tests" / m.group("tier")).resolve()
    path = (tier / m.group("path")).resolve()
    return path if path.is_relative_to(tier) else None


def problem_of_test_reference(reference: str) -> str | None:
    """Why ``reference`` is not a real-broker test that exists, or None when it is one."""
    m = TEST_RE.match(reference)
    if not m:
        return f"not a test node id like tests/integration/test_x.py::test_y: {reference!r}"
    if m.group("tier") not in TEST_TIERS:
        return f"{reference!r} is not in a real-broker tier ({', '.join(f'tests/{t}' for t in TEST_TIERS)})"
    path = _test_path(reference)
    if path is None:
        return f"{reference!r} leaves tests/{m.group('tier')}"
    if not path.is_file():
        return f"{reference!r}: there is no file {path.relative_to(REPO)}"
    if m.group("function") not in broker_test_file(path).functions:
        return f"{reference!r}: {path.relative_to(REPO)} defines no top-level test function {m.group('function')}"
    return None


def broken_test_references(rows: Iterable[Row]) -> Iterator[str]:
    for row in rows:
        for reference in row.tests:
            if (problem := problem_of_test_reference(reference)) is not None:
                yield f"{row.id} (line {row.line}): {problem}"


def names(strings: Iterable[str], word: str) -> bool:
    """``word`` (a check name or a config key) appears in one of ``strings`` as a whole word."""
    pattern = re.compile(rf"(?<![\w.]){re.escape(word)}(?![\w.])")
    return any(pattern.search(s) for s in strings)


def exercises(source: BrokerTestFile, kind: str, target: str, dags: Mapping[str, frozenset[str]]) -> bool:
    """The file runs the ``kind`` (``preflight`` or ``lint``) and names ``target`` in a string literal."""
    callables, task = RUNNERS[kind]
    runs = bool(source.calls & callables) or any(task in dags.get(d, frozenset()) for d in source.dags_run)
    return runs and names(source.strings, target)


def unexercised_checks(rows: Iterable[Row], dags: Mapping[str, frozenset[str]] | None = None) -> Iterator[str]:
    """Each ``preflight:``/``lint:`` reference of a covered or partial row that none of the row's tests
    exercises (see the module docstring)."""
    dags = known_dags() if dags is None else dags
    for row in rows:
        if row.status not in ("covered", "partial"):
            continue
        paths = [p for ref in row.tests if problem_of_test_reference(ref) is None and (p := _test_path(ref))]
        sources = [broker_test_file(p) for p in dict.fromkeys(paths)]
        for span in row.spans:
            m = REFERENCE_RE.match(span)
            if not m or m.group("kind") not in RUNNERS:
                continue
            kind, target = m.group("kind"), m.group("target")
            if not any(exercises(src, kind, target, dags) for src in sources):
                runner = " or ".join(sorted(RUNNERS[kind][0])) + f" (or a DAG's {RUNNERS[kind][1]} task)"
                yield (f"{row.id} (line {row.line}): none of its tests both runs {runner} and names {target!r} "
                       f"in a string literal")


# -- the checklist -----------------------------------------------------------------------------


def test_checklist_parses_into_one_section_per_guide():
    doc = checklist()
    assert not doc.problems, "\n".join(doc.problems)
    assert doc.rows, "no checklist rows found"
    sections = {row.section for row in doc.rows}
    assert sections == set(GUIDES), f"sections with rows: {sorted(s or '-' for s in sections)}"


def test_ids_are_well_formed_unique_and_in_their_guides_section():
    rows = checklist().rows
    malformed = [r.id for r in rows if not ID_RE.match(r.id)]
    assert not malformed, f"ids not like G000-07: {malformed}"
    repeated = [i for i, n in Counter(r.id for r in rows).items() if n > 1]
    assert not repeated, f"ids used more than once: {repeated}"
    misplaced = [f"{r.id} under {r.section}" for r in rows if r.guide != r.section]
    assert not misplaced, f"rows outside their guide's section: {misplaced}"


def test_every_row_has_a_valid_status_and_text():
    rows = checklist().rows
    bad = [f"{r.id}: {r.status!r}" for r in rows if r.status not in STATUSES]
    assert not bad, f"status must be one of {STATUSES}: {bad}"
    empty = [r.id for r in rows if not (r.item and r.asks and r.covered_by)]
    assert not empty, f"rows with an empty cell: {empty}"


def test_covered_and_partial_rows_name_what_covers_them():
    bare = [r.id for r in checklist().rows if r.status in ("covered", "partial") and not r.spans]
    assert not bare, f"covered/partial rows without a reference: {bare}"


def _letters(text: str) -> int:
    return sum(ch.isalpha() for ch in text)


def test_partial_rows_say_what_is_lacking():
    silent = [r.id for r in checklist().rows if r.status == "partial" and _letters(r.note) < MIN_NOTE_LETTERS]
    assert not silent, f"partial rows without a note on what is lacking: {silent}"


def test_out_of_scope_rows_give_a_reason():
    silent = [r.id for r in checklist().rows if r.status == "out of scope" and _letters(r.note) < MIN_NOTE_LETTERS]
    assert not silent, f"out-of-scope rows without a reason: {silent}"


def test_every_reference_names_something_that_exists():
    broken = list(broken_references(checklist().rows))
    assert not broken, "references that resolve to nothing:\n" + "\n".join(broken)


def test_covered_and_partial_rows_name_their_real_broker_tests():
    rows = checklist().rows
    bare = [r.id for r in rows if r.status in ("covered", "partial") and not r.tests]
    assert not bare, f"covered/partial rows without a test in 'tested by': {bare}"
    prose = [r.id for r in rows if r.status in ("covered", "partial")
             and SPAN_RE.sub("", r.tested_by).replace(";", "").strip()]
    assert not prose, f"'tested by' cells with something other than backticked tests separated by '; ': {prose}"
    others = [f"{r.id}: {r.tested_by!r}" for r in rows if r.status not in ("covered", "partial")
              and r.tested_by != NO_TEST]
    assert not others, f"rows neither covered nor partial must have {NO_TEST} in 'tested by': {others}"


def test_every_tested_by_reference_is_a_real_broker_test_that_exists():
    broken = list(broken_test_references(checklist().rows))
    assert not broken, "'tested by' references that are not real-broker tests:\n" + "\n".join(broken)


def test_each_preflight_check_and_lint_key_of_a_row_is_exercised_by_one_of_its_tests():
    """See the module docstring: a test file that runs the check and names it backs the reference."""
    missing = list(unexercised_checks(checklist().rows))
    assert not missing, "references none of the row's tests exercises:\n" + "\n".join(missing)


def test_summary_matches_the_rows():
    doc = checklist()
    expected: dict[str, dict[str, int]] = {}
    for guide in (*GUIDES, "all"):
        rows = [r for r in doc.rows if guide == "all" or r.guide == guide]
        counts = Counter(r.status for r in rows)
        expected[guide] = {**{s: counts.get(s, 0) for s in STATUSES}, "total": len(rows)}
    assert doc.summary == expected


# -- the checker itself can fail -----------------------------------------------------------------


@pytest.mark.parametrize("reference", [
    "preflight:no_such_check",
    "lint:no.such.key",
    "py:airflow_provider_kip848.sensors.group:NoSuchSensor",
    "py:airflow_provider_kip848.no_such_module:anything",
    "py:os.path:join",  # outside the package
    "dag:kip848_consumer_rolling_upgrade:no_such_task",
    "dag:no_such_dag:preflight",
    "spark:no_such_verdict",
    "sparky:lag",
    "lint",
])
def test_a_made_up_reference_is_reported(reference):
    assert reference_problem(reference) is not None


def test_a_made_up_row_is_reported_by_the_whole_check():
    text = "\n".join([
        "## G009 — made up",
        "",
        "| id | guide item | what it asks | covered by | tested by | status |",
        "|---|---|---|---|---|---|",
        "| G009-01 | an item | a thing | `preflight:definitely_not_a_check`; `lint:not.a.key` | — | covered |",
        "| G009-02 | an item | a thing | `dag:nope:nope` | — | partial |",
    ])
    doc = parse_checklist(text)
    assert [r.id for r in doc.rows] == ["G009-01", "G009-02"]
    broken = list(broken_references(doc.rows))
    assert len(broken) == 3, broken


@pytest.mark.parametrize("reference", [
    "tests/unit/test_checklist.py::test_summary_matches_the_rows",  # no broker in that tier
    "tests/integration/test_no_such_file.py::test_anything",
    "tests/integration/test_operators.py::test_no_such_function",
    "tests/integration/test_operators.py::CustomAssignorMember",  # exists, but is not a test function
    "tests/integration/test_operators.py::set_kafka_connection",  # imported there, not a test
    "tests/integration/../unit/test_checklist.py::test_summary_matches_the_rows",
    "tests/integration/test_operators.py",
    "test_operators.py::test_feature_operator_dry_run_change_and_noop",
    "tests/integration/test_operators.py::test_group_config_operator_set_rerun_delete[]",
])
def test_a_made_up_test_reference_is_reported(reference):
    assert problem_of_test_reference(reference) is not None


@pytest.mark.parametrize("reference", [
    "tests/integration/test_operators.py::test_feature_operator_dry_run_change_and_noop",
    "tests/integration/test_operators.py::test_group_config_operator_set_rerun_delete[native]",
    "tests/e2e/test_enable_streams_protocol.py::test_enable_streams_protocol_paths",
])
def test_a_real_broker_test_reference_resolves(reference):
    assert problem_of_test_reference(reference) is None


def test_a_test_that_does_not_exercise_the_rows_checks_is_reported():
    sensors = "tests/integration/test_sensors.py::test_lag_sensor_waits_for_the_backlog_to_drain"
    operators = "tests/integration/test_operators.py::test_preflight_on_a_healthy_cluster_and_on_each_blocker"
    text = "\n".join([
        "## G009 — made up",
        "",
        "| id | guide item | what it asks | covered by | tested by | status |",
        "|---|---|---|---|---|---|",
        f"| G009-01 | an item | a thing | `preflight:group_empty` | `{sensors}` | covered |",
        f"| G009-02 | an item | a thing | `preflight:group_empty`; `lint:task.assignor.class` | `{operators}` "
        "| partial |",
        f"| G009-03 | an item | a thing | `preflight:group_empty` | `{sensors}`; `{operators}` | covered |",
        "| G009-04 | an item | a thing | `preflight:group_empty` | — | covered |",
        "| G009-05 | an item | a thing | `preflight:group_empty` | "
        "`tests/unit/test_checklist.py::test_ids_are_well_formed_unique_and_in_their_guides_section` | covered |",
    ])
    doc = parse_checklist(text)
    assert not doc.problems, doc.problems
    assert [r.tests for r in doc.rows][:3] == [[sensors], [operators], [sensors, operators]]
    missing = list(unexercised_checks(doc.rows))
    # the sensor test runs no preflight; the operators test runs it and names group_empty, and runs the
    # lint, but never names task.assignor.class; a unit test is no real-broker test
    assert [m.split(" ")[0] for m in missing] == ["G009-01", "G009-02", "G009-04", "G009-05"], missing
    assert "'task.assignor.class'" in missing[1]
    assert [m.split(" ")[0] for m in broken_test_references(doc.rows)] == ["G009-05"]


def test_the_test_file_reader_on_a_written_out_source():
    facts = broker_test_facts('''
"""Module docstring naming group_size and session.timeout.ms."""
DAG = "kip848_consumer_offline_migration"


def helper():
    """A docstring naming static_membership."""
    return KafkaMigrationPreflightOperator(task_id="p", mode="classic_to_consumer")


def test_one():
    run_dag(DAG, {"client_properties": {"enable.auto.commit": "false"}})
    run_dag(module="kafka_group_config_change", conf={})
    assert f"group_empty: {1}" != "consumer.session.timeout.ms"


async def test_two():
    pass


class TestNothing:
    def test_method(self):
        pass
''')
    assert facts.functions == {"test_one", "test_two"}
    assert facts.dags_run == {"kip848_consumer_offline_migration", "kafka_group_config_change"}
    assert "KafkaMigrationPreflightOperator" in facts.calls and "run_dag" in facts.calls
    assert names(facts.strings, "group_empty") and names(facts.strings, "enable.auto.commit")
    assert not names(facts.strings, "group_size"), "docstrings do not count"
    assert not names(facts.strings, "static_membership"), "docstrings do not count"
    assert not names(facts.strings, "session.timeout.ms"), "a longer key is not this one"
    dags = {"kip848_consumer_offline_migration": frozenset({"lint_client_config", "preflight"})}
    assert exercises(facts, "lint", "enable.auto.commit", dags)  # through the DAG's lint task
    assert exercises(facts, "preflight", "group_empty", dags)
    assert not exercises(facts, "lint", "enable.auto.commit", {})  # no DAG with a lint task, no lint call
    assert not exercises(facts, "preflight", "group_size", dags)


def test_static_readers_on_written_out_sources():
    assert check_names('Check("a", PASS, "e")\nCheck(name="b", status=FAIL, evidence="")\nCheck(x)') == {"a", "b"}
    assert verdict_names('Verdict("lag", True, "s")\nVerdict(check="gaps", passed=False, summary="")') == {
        "lag", "gaps"}
    keys, unresolved = lint_keys_in_source('''
def lint(props, dynamic):
    out = [LintFinding("plain", ERROR, "m", "f")]
    ignored = {"a.key": "x", "b.key": "y"}
    for key, cfg in ignored.items():
        out.append(LintFinding(key, WARN, "m", "f"))
    for key, cfg in (("c.key", 1), ("d.key", 2)):
        out.append(LintFinding(key, WARN, "m", "f"))
    for key in ("e.key",):
        out.append(LintFinding(key=key, severity=WARN, message="m", fix="f"))
    out.append(LintFinding(dynamic, WARN, "m", "f"))
    return out
''')
    assert keys == {"plain", "a.key", "b.key", "c.key", "d.key", "e.key"}
    assert unresolved == ["dynamic"]
    dags = dag_task_ids('''
DAG_ID = "the_dag"

@dag(dag_id=DAG_ID, schedule=None)
def the_dag_function():
    op = SomeOperator(task_id="op")

    @task
    def plain(): ...

    @task.branch
    def branch(): ...

    @task(task_id="renamed", trigger_rule="all_done")
    def original(): ...

    def helper(): ...

@dag
def second(): EmptyOperator(task_id="only")

with DAG("third") as d:
    EmptyOperator(task_id="inside")
''')
    assert dags == {"the_dag": {"op", "plain", "branch", "renamed"}, "second": {"only"}, "third": {"inside"}}


def test_the_lint_readers_agree_on_the_real_lint():
    """On lint.py as it is, the static reader misses nothing the probe sees unless it also says which
    ``LintFinding`` key it could not work out (so a silent gap in the reader cannot hide)."""
    source = LINT.read_text(encoding="utf-8")
    static, unresolved = lint_keys_in_source(source)
    probed = probed_lint_keys(source)
    assert static and probed, "no lint keys found at all"
    missed = probed - static
    assert not missed or unresolved, f"the static reader silently missed {sorted(missed)}"
