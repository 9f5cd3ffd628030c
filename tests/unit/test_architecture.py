"""The package's layout rules, checked on its source: dependencies point down, the core stands alone.

Layers, lowest first (docs/index.md draws them):

0. ``kafka/`` the core: imports no Airflow and nothing of the package outside ``kafka/``; inside it,
   ``errors``/``arguments``/``documents``/``patterns``/``cache`` < ``settings``/``model``/``metrics`` < ``rules``/``translate``/``inventory``
   < ``api`` < ``native``/``cli``/``lock``.
1. ``changecontrol/``, ``spark/``, ``controllers/``, ``fleet/``: import the core only (not each other).
2. ``hooks/``  3. ``triggers/`` and ``engine/`` (the migration engine; not each other)
4. ``operators/`` and ``sensors/`` (not each other)
5. ``get_provider_info.py`` and ``plugins/`` (the UI's fleet view; not each other).

The test harness (``harness/kip848_harness``: the embedded broker, demo apps, DAG-run helpers; a distribution
of its own, not in the provider's wheel) may import anything; nothing in the package imports it, under that name
or the names it had (``airflow_provider_kip848.testing``) or could have (``kip848_testing``). An import inside a function of the package needs a comment naming the real
cycle or the optional dependency it avoids.

Each check names the decision record (docs/adr/) that a failure breaks: read it before changing
the check.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "airflow_provider_kip848"
REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / PACKAGE
#: the test harness, by every name it has had or will have: inside the package, or a package of its own
HARNESS_PACKAGES = (f"{PACKAGE}.testing", "kip848_harness", "kip848_testing")

#: the decision records the checks hold (docs/adr/)
ADR_CORE = "docs/adr/0001-core-imports-no-airflow.md"
ADR_DAGS = "docs/adr/0002-dag-files-only-wire.md"
ADR_HARNESS = "docs/adr/0003-product-never-imports-the-harness.md"
ADR_NO_CODE_FROM_RUNS = "docs/adr/0004-a-run-never-chooses-code.md"
ADR_LAYERS = "docs/adr/0006-dependencies-point-down.md"
ADR_REAL_PARTS = "docs/adr/0008-real-parts-in-tests.md"


def breaks(adr: str, what: str) -> str:
    """A failure's message, naming the decision record it breaks."""
    return f"breaks {adr}: {what}"

#: top-level part of the package -> layer
LAYERS = {
    "kafka": 0,
    "changecontrol": 1, "spark": 1, "controllers": 1, "fleet": 1,
    "hooks": 2,
    "engine": 3,
    "triggers": 3,
    "operators": 4, "sensors": 4,
    "get_provider_info": 5, "plugins": 5,
}
#: inside the core: module (or sub-package) -> layer
KAFKA_LAYERS = {
    "errors": 0, "arguments": 0, "code_points": 0, "cache": 0, "files": 0, "documents": 0, "patterns": 0, "inert": 0,
    "readback": 0,
    "settings": 1, "model": 1, "metrics": 1,
    "rules": 2, "translate": 2, "inventory": 2, "group_records": 1,
    "api": 3,
    "native": 4, "cli": 4, "lock": 4,
}
#: the reasons that justify an import inside a function
JUSTIFIED = ("cycle", "optional dependency", "deferred load")


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name of the importing file
    target: str  # dotted module name imported
    line: int
    in_function: bool
    comment: str  # the comments on the import's lines and the line above


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(path: Path, root: Path) -> list[Import]:
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    name = module_name(path, root)
    found: list[Import] = []

    def comment_at(node: ast.stmt) -> str:
        first, last = node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno
        text = lines[first - 2] if first >= 2 and lines[first - 2].strip().startswith("#") else ""
        for ln in range(first, last + 1):
            if "#" in lines[ln - 1]:
                text += " " + lines[ln - 1].split("#", 1)[1]
        return text

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking_block(child):
                continue  # type-only imports are not runtime dependencies
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(Import(name, alias.name, child.lineno, in_function, comment_at(child)))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:  # relative: resolve against this module's package
                    package = name.split(".")
                    if path.name != "__init__.py":
                        package = package[:-1]
                    package = package[: len(package) - (child.level - 1)]
                    base = ".".join([*package, base] if base else package)
                for alias in child.names:
                    target = f"{base}.{alias.name}"
                    # ``from pkg import module`` imports the module; ``from module import name`` the module
                    target = target if (root.parent / Path(*target.split("."))).with_suffix(".py").exists() or \
                        (root.parent / Path(*target.split("."))).is_dir() else base
                    found.append(Import(name, target, child.lineno, in_function, comment_at(child)))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def _part(module: str) -> str | None:
    """The top-level part of the package a module belongs to (None: the package's own ``__init__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _kafka_part(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "kafka" else None


def violations(root: Path = ROOT) -> list[str]:
    """Every broken layout rule in the package at ``root``, one line each."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for imp in imports_of(path, root):
            out += _check(imp)
    return out


def _is_harness(target: str) -> bool:
    return any(target == name or target.startswith(name + ".") for name in HARNESS_PACKAGES)


def _check(imp: Import) -> list[str]:
    where = f"{imp.importer}:{imp.line} imports {imp.target}"
    problems = []
    src, dst = _part(imp.importer), _part(imp.target)
    internal = imp.target == PACKAGE or imp.target.startswith(PACKAGE + ".")
    if internal and imp.in_function and not any(reason in imp.comment for reason in JUSTIFIED):
        problems.append(breaks(ADR_LAYERS, f"{where} inside a function without a comment naming the cycle, the "
                                           "optional dependency or the deferred load"))
    if src == "testing":
        return problems  # the harness may use anything
    if _is_harness(imp.target):
        problems.append(breaks(ADR_HARNESS, f"{where}: the product imports the test harness (only tests, benchmarks "
                                            "and the demo may)"))
        return problems
    if src == "kafka":
        if imp.target == "airflow" or imp.target.startswith("airflow."):
            problems.append(breaks(ADR_CORE, f"{where}: the core imports Airflow"))
        if internal and dst != "kafka":
            problems.append(breaks(ADR_CORE, f"{where}: the core imports something outside kafka/"))
        if internal and dst == "kafka":
            a, b = _kafka_part(imp.importer), _kafka_part(imp.target)
            if a is not None and b is not None and a != b and KAFKA_LAYERS.get(b, 99) > KAFKA_LAYERS.get(a, -1):
                problems.append(breaks(ADR_LAYERS, f"{where}: kafka/{a} (core layer {KAFKA_LAYERS.get(a)}) imports a "
                                                   f"higher part, kafka/{b} (core layer {KAFKA_LAYERS.get(b)})"))
    if not internal:
        return problems
    if src is not None and dst is not None and src != dst:
        ls, ld = LAYERS.get(src), LAYERS.get(dst)
        if ls is None or ld is None:
            problems.append(breaks(ADR_LAYERS, f"{where}: {src if ls is None else dst} has no layer (add it to LAYERS "
                                               "and docs/index.md)"))
        elif ld > ls:
            problems.append(breaks(ADR_LAYERS, f"{where}: {src} (layer {ls}) imports a higher layer, {dst} "
                                               f"(layer {ld})"))
        elif ld == ls:
            problems.append(breaks(ADR_LAYERS, f"{where}: {src} and {dst} are side by side (layer {ls}); move the "
                                               "shared part down"))
    return problems


# -- the tests ------------------------------------------------------------------------------


def test_the_package_keeps_its_layout_rules():
    found = violations()
    assert found == [], "\n".join(found)


def test_every_part_of_the_package_has_a_layer():
    parts = {p.stem if p.is_file() else p.name for p in ROOT.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())}
    assert parts - set(LAYERS) == set(), breaks(
        ADR_LAYERS, f"{sorted(parts - set(LAYERS))} have no layer (add them to LAYERS and docs/index.md)")
    kafka_parts = {p.stem if p.is_file() else p.name for p in (ROOT / "kafka").iterdir()
                   if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())}
    assert kafka_parts == set(KAFKA_LAYERS), breaks(
        ADR_LAYERS, f"parts of kafka/ without a core layer: {sorted(kafka_parts - set(KAFKA_LAYERS))}; layers of parts "
                    f"that no longer exist: {sorted(set(KAFKA_LAYERS) - kafka_parts)} (KAFKA_LAYERS and docs/index.md)")


PLANTED = {
    "a back-import from a hook into an operator": (
        "hooks/admin.py", "from airflow_provider_kip848.operators.base import KafkaAdminBaseOperator\n",
        "hooks (layer 2) imports a higher layer, operators (layer 4)"),
    "the core importing Airflow": (
        "kafka/rules/offsets.py", "import airflow.sdk\n", "the core imports Airflow"),
    "the core importing change control": (
        "kafka/api.py", "from airflow_provider_kip848.changecontrol import plan\n",
        "the core imports something outside kafka/"),
    "the product importing the test harness": (
        "operators/lock.py", "from kip848_harness.kafka_cluster import LocalKafka\n",
        "the product imports the test harness"),
    "a sideways import between sensors and operators": (
        "sensors/group.py", "from airflow_provider_kip848.operators import base\n", "side by side"),
    "a lower core layer importing a higher one": (
        "kafka/rules/conditions.py", "from airflow_provider_kip848.kafka import api\n",
        "kafka/rules (core layer 2) imports a higher part, kafka/api"),
    "an unexplained import inside a function": (
        "operators/features.py",
        "def _late():\n    from airflow_provider_kip848.kafka import errors\n    return errors\n",
        "inside a function without a comment"),
}


def test_a_planted_violation_is_found(tmp_path):
    """The checker catches each kind of violation when one is planted in a copy of the package."""
    copy = tmp_path / PACKAGE
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert violations(copy) == []
    for label, (file, code, expected) in PLANTED.items():
        target = copy / file
        original = target.read_text()
        target.write_text(original + "\n" + code)
        found = violations(copy)
        target.write_text(original)
        assert any(expected in v for v in found), (label, found)
        assert all(v.startswith("breaks docs/adr/") for v in found), (label, found)


def test_the_harness_is_found_under_each_of_its_names():
    """The harness moves to a package of its own (issue 33): the product importing it by that name breaks 0003 too;
    the harness itself may import it (checked on single imports, without copying the package)."""
    for target in ("kip848_harness", "kip848_harness.broker", "kip848_testing.supervisor",
                   f"{PACKAGE}.testing.broker"):
        found = _check(Import(f"{PACKAGE}.hooks.admin", target, 3, False, ""))
        assert found and found[0].startswith(f"breaks {ADR_HARNESS}:"), (target, found)
        assert _check(Import(f"{PACKAGE}.testing.demo", target, 3, False, "")) == []
    assert _check(Import(f"{PACKAGE}.hooks.admin", "kip848_harnessed", 3, False, "")) == []


def test_a_justified_function_level_import_is_accepted(tmp_path):
    copy = tmp_path / PACKAGE
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "spark" / "late.py").write_text(textwrap.dedent("""
        def load():
            # optional dependency: pyspark
            from airflow_provider_kip848.spark import reader
            return reader
    """))
    assert violations(copy) == []


def test_the_cli_backend_loads_neither_the_harness_nor_airflow():
    """Creating KafkaTools and a KafkaCli in a fresh interpreter loads no module of testing/ (nor Airflow)."""
    code = textwrap.dedent("""
        import sys
        from airflow_provider_kip848.kafka.cli.backend import KafkaCli
        from airflow_provider_kip848.kafka.cli.tools import KafkaTools
        from airflow_provider_kip848.kafka.settings import ClientSettings
        KafkaCli(ClientSettings("127.0.0.1:9092"), KafkaTools())
        harness = {harness!r}
        loaded = sorted(m for m in sys.modules
                        if any(m == h or m.startswith(h + ".") for h in harness) or m == "airflow"
                        or m.startswith("airflow."))
        print(loaded)
    """).replace("{harness!r}", repr(HARNESS_PACKAGES))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", breaks(ADR_CORE, f"the CLI backend loaded {out.stdout.strip()} (also "
                                                        f"{ADR_HARNESS})")


def test_the_core_loads_no_airflow():
    code = textwrap.dedent("""
        import sys
        import airflow_provider_kip848.kafka.native, airflow_provider_kip848.kafka.lock
        import airflow_provider_kip848.kafka.api, airflow_provider_kip848.kafka.rules.preflight
        print(sorted(m for m in sys.modules if m == "airflow" or m.startswith("airflow.")))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", breaks(ADR_CORE, f"importing the core loaded {out.stdout.strip()}")


# -- DAG files only wire (docs/adr/0002) -------------------------------------------------------

DAGS = REPO / "dags"
#: module-level functions any DAG file may define beside its ``@dag`` function: the plan the approval shows
PLAN_DECLARATIONS = {"build_plan", "replan"}
#: the other module-level helpers of today, per DAG file, and why each is wiring rather than logic; a new one
#: is logic until its file's entry here says otherwise (move it to operators/, engine/ or kafka/rules/ first)
DAG_HELPERS = {
    "kafka_cluster_inventory.py": {"render_inventory"},  # the read-only report's text layout
    "kip1071_delete_streams_group.py": {"read_group"},  # the plan's facts: one hook call per fact
    "kip1071_streams_rollback_to_classic.py": {"returned_settings"},  # the plan's facts: carry_back (kafka/rules)
    "kip848_consumer_rolling_upgrade.py": {"_source", "_title"},  # the approval's title and the way back's name
    "kip848_fleet_migration.py": {"wave"},  # one wave's task group, built once per wave
}
TASK_DECORATORS = ("task", "task_group")


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[str]:
    """``@task``, ``@task.branch(...)``, ``@dag(...)`` -> ``task``, ``task``, ``dag``."""
    names = []
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        while isinstance(target, ast.Attribute):
            target = target.value
        names.append(target.id if isinstance(target, ast.Name) else ast.unparse(target))
    return names


def dag_file_problems(source: str, file: str) -> list[str]:
    """What in one DAG file is more than wiring: classes, plain functions inside the ``@dag`` function, module-level
    functions that are neither the DAG, its plan declaration, nor a helper listed in DAG_HELPERS."""
    tree = ast.parse(source)
    problems = []
    allowed = PLAN_DECLARATIONS | DAG_HELPERS.get(file, set())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            problems.append(breaks(ADR_DAGS, f"dags/{file}:{node.lineno} defines class {node.name}: a class is logic; "
                                             "move it to operators/, engine/ or the core"))
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if "dag" in _decorator_names(node):
            for inner in ast.walk(node):
                if inner is not node and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                        and not any(name in TASK_DECORATORS for name in _decorator_names(inner)) \
                        and not _inside_task(node, inner):
                    problems.append(breaks(ADR_DAGS, f"dags/{file}:{inner.lineno} defines {inner.name} inside the DAG "
                                                     "without @task: make it a task that calls the package, or move "
                                                     "it to operators/ or engine/"))
        elif node.name not in allowed:
            problems.append(breaks(ADR_DAGS, f"dags/{file}:{node.lineno} defines {node.name} beside the DAG: move the "
                                             "logic to operators/, engine/ or kafka/rules/ (or, if it only wires, "
                                             "list it in DAG_HELPERS with the reason)"))
    return problems


def _inside_task(dag_function: ast.AST, inner: ast.AST) -> bool:
    """Whether ``inner`` is nested in a ``@task`` function of the DAG (a task's own helpers are its body)."""
    for node in ast.walk(dag_function):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not inner \
                and any(name in TASK_DECORATORS for name in _decorator_names(node)) \
                and any(child is inner for child in ast.walk(node)):
            return True
    return False


def test_dag_files_only_wire():
    found = [p for path in sorted(DAGS.glob("*.py")) for p in dag_file_problems(path.read_text(), path.name)]
    assert found == [], "\n".join(found)


WIRING = '''
from airflow.sdk import dag, task

@dag(dag_id="x")
def x():
    @task
    def read(params=None):
        def fmt(v):
            return str(v)
        return fmt(params)

    @task.branch
    def route(plan):
        return "a"
    route(read())

def build_plan(params):
    return {}

dag_object = x()
'''


def test_the_dag_check_accepts_wiring_and_finds_logic():
    assert dag_file_problems(WIRING, "x.py") == []
    logic = {
        "a class": "class Retry:\n    pass\n",
        "a plain function beside the DAG": "def parse_offsets(text):\n    return text.split(',')\n",
        "a plain function inside the DAG": WIRING.replace("    @task.branch\n    def route", "    def route"),
    }
    for label, code in logic.items():
        source = code if label.endswith("inside the DAG") else WIRING + code
        found = dag_file_problems(source, "x.py")
        assert len(found) == 1 and found[0].startswith(f"breaks {ADR_DAGS}: dags/x.py:"), (label, found)
    assert dag_file_problems(WIRING + "def read_group(params):\n    return {}\n", "kip1071_delete_streams_group.py") \
        == []


# -- a run never chooses code (docs/adr/0004) ---------------------------------------------------

#: calls that turn a string into code; the product's only loader is the controller registry
CODE_LOADERS = {"import_module", "__import__", "eval", "exec", "import_string", "locate", "entry_points"}
REGISTRY = "controllers/registry.py"


def code_loader_calls(source: str, file: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in CODE_LOADERS:
                found.append(breaks(ADR_NO_CODE_FROM_RUNS, f"{PACKAGE}/{file}:{node.lineno} calls {name}(): only "
                                                           f"{REGISTRY} loads code, and only kinds its registry names"))
    return found


def test_only_the_controller_registry_loads_code():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        file = path.relative_to(ROOT).as_posix()
        source = path.read_text()
        if file.startswith("testing/") or file == REGISTRY or not any(name in source for name in CODE_LOADERS):
            continue
        found += code_loader_calls(source, file)
    assert found == [], "\n".join(found)
    assert code_loader_calls((ROOT / REGISTRY).read_text(), REGISTRY), "the check no longer sees the registry's loader"
    planted = "import importlib\n\ndef kind(name):\n    return importlib.import_module(name)\n"
    assert len(code_loader_calls(planted, "operators/x.py")) == 1


# -- real parts in tests, no mocks (docs/adr/0008) ----------------------------------------------

MOCK_MODULES = ("unittest.mock", "mock", "pytest_mock")


def mock_uses(source: str, file: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        if any(m == mod or m.startswith(mod + ".") for m in modules for mod in MOCK_MODULES):
            found.append(breaks(ADR_REAL_PARTS, f"{file}:{node.lineno} imports a mock library: test against the real "
                                                "part (the session broker, supervisord, dag.test(), the deployment)"))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                any(arg.arg == "mocker" for arg in node.args.args + node.args.kwonlyargs):
            found.append(breaks(ADR_REAL_PARTS, f"{file}:{node.lineno} {node.name} asks for the mocker fixture"))
    return found


def test_no_test_uses_a_mock_library():
    found = []
    for folder in ("tests", "bench"):
        for path in sorted((REPO / folder).rglob("*.py")):
            source = path.read_text()
            if "mock" in source:  # every pattern below names "mock"; parsing only these keeps the check cheap
                found += mock_uses(source, path.relative_to(REPO).as_posix())
    assert found == [], "\n".join(found)
    for planted in ("from unittest import mock\n", "from unittest.mock import MagicMock\n", "import mock\n",
                    "def test_x(mocker):\n    pass\n"):
        assert len(mock_uses(planted, "tests/x.py")) == 1, planted
    assert mock_uses("import unittest\nfrom mocking_bird import x\n", "tests/x.py") == []
