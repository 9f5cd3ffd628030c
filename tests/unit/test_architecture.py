"""The package's layout rules, checked on its source: dependencies point down, the core stands alone.

Layers, lowest first (docs/index.md draws them):

0. ``kafka/`` the core: imports no Airflow and nothing of the package outside ``kafka/``; inside it,
   ``errors``/``arguments``/``cache`` < ``settings``/``model``/``metrics`` < ``rules``/``translate``/``inventory``
   < ``api`` < ``native``/``cli``/``lock``.
1. ``changecontrol/``, ``spark/``, ``controllers/``, ``fleet/``: import the core only (not each other).
2. ``hooks/``  3. ``triggers/`` and ``engine/`` (the migration engine; not each other)
4. ``operators/`` and ``sensors/`` (not each other)
5. ``get_provider_info.py`` and ``plugins/`` (the UI's fleet view; not each other).

``testing/`` (the embedded broker, demo apps, DAG-run helpers) may import anything; nothing in the
package imports it. An import inside a function of the package needs a comment naming the real
cycle or the optional dependency it avoids.
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
#: the test harness's package (harness/, a distribution of its own): nothing in the product imports it
HARNESS = "kip848_harness"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE

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
    "errors": 0, "arguments": 0, "cache": 0, "files": 0,
    "settings": 1, "model": 1, "metrics": 1,
    "rules": 2, "translate": 2, "inventory": 2, "group_records": 1,
    "api": 3,
    "native": 4, "cli": 4, "lock": 4,
}
#: the reasons that justify an import inside a function
JUSTIFIED = ("cycle", "optional dependency")


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


def _check(imp: Import) -> list[str]:
    where = f"{imp.importer}:{imp.line} imports {imp.target}"
    problems = []
    src, dst = _part(imp.importer), _part(imp.target)
    internal = imp.target == PACKAGE or imp.target.startswith(PACKAGE + ".")
    if internal and imp.in_function and not any(reason in imp.comment for reason in JUSTIFIED):
        problems.append(f"{where} inside a function without a comment naming the cycle or the optional dependency")
    if src == "testing":
        return problems  # the harness may use anything
    if src == "kafka":
        if imp.target == "airflow" or imp.target.startswith("airflow."):
            problems.append(f"{where}: the core imports Airflow")
        if internal and dst != "kafka":
            problems.append(f"{where}: the core imports something outside kafka/")
        if internal and dst == "kafka":
            a, b = _kafka_part(imp.importer), _kafka_part(imp.target)
            if a is not None and b is not None and a != b and KAFKA_LAYERS.get(b, 99) > KAFKA_LAYERS.get(a, -1):
                problems.append(f"{where}: kafka/{a} (core layer {KAFKA_LAYERS.get(a)}) imports a higher part, "
                                f"kafka/{b} (core layer {KAFKA_LAYERS.get(b)})")
    if imp.target == HARNESS or imp.target.startswith(HARNESS + "."):
        problems.append(f"{where}: the product imports the test harness {HARNESS} (only tests, benchmarks and the demo may)")
    if not internal:
        return problems
    if dst == "testing":
        problems.append(f"{where}: the product imports testing/ (only tests, benchmarks and the demo may)")
    elif src is not None and dst is not None and src != dst:
        ls, ld = LAYERS.get(src), LAYERS.get(dst)
        if ls is None or ld is None:
            problems.append(f"{where}: {src if ls is None else dst} has no layer (add it to LAYERS and docs/index.md)")
        elif ld > ls:
            problems.append(f"{where}: {src} (layer {ls}) imports a higher layer, {dst} (layer {ld})")
        elif ld == ls:
            problems.append(f"{where}: {src} and {dst} are side by side (layer {ls}); move the shared part down")
    return problems


# -- the tests ------------------------------------------------------------------------------


def test_the_package_keeps_its_layout_rules():
    assert violations() == []


def test_every_part_of_the_package_has_a_layer():
    parts = {p.stem if p.is_file() else p.name for p in ROOT.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())}
    assert parts - set(LAYERS) == set()
    kafka_parts = {p.stem if p.is_file() else p.name for p in (ROOT / "kafka").iterdir()
                   if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())}
    assert kafka_parts == set(KAFKA_LAYERS)


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
        from airflow_provider_kip848.kafka.cli import KafkaCli, KafkaTools
        from airflow_provider_kip848.kafka.settings import ClientSettings
        KafkaCli(ClientSettings("127.0.0.1:9092"), KafkaTools())
        loaded = sorted(m for m in sys.modules
                        if m.startswith("kip848_harness") or m == "airflow" or m.startswith("airflow."))
        print(loaded)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_core_loads_no_airflow():
    code = textwrap.dedent("""
        import sys
        import airflow_provider_kip848.kafka.native, airflow_provider_kip848.kafka.lock
        import airflow_provider_kip848.kafka.api, airflow_provider_kip848.kafka.rules.preflight
        print(sorted(m for m in sys.modules if m == "airflow" or m.startswith("airflow.")))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout
