"""Count ``Any`` in the public signatures of the package, per part, and say which carry a reason.

    python scripts/count_public_any.py [package directory, default airflow_provider_kip848] [--list]

The house rule (docs/adr/0009-house-rules-for-reading.md): an ``Any`` in a public signature carries, on one of the
signature's lines, a comment starting ``# Any: `` saying why. Public: a function, method or class whose name and
module name do not start with ``_`` (``__init__`` included; other dunders are not), in a class that is itself
public, not nested in a function. A signature's lines run from the ``def`` (or ``class``) line to the line before
the body's first statement; a one-line definition's signature is its line. Class-level annotated attributes of a
public dataclass or TypedDict are signatures too (their own lines). The test harness (``testing/``) is left out.

``tests/unit/test_house_rules.py`` loads this file by path and uses :func:`public_any` for its rule, so the count
printed here and the test's failures are the same list.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "airflow_provider_kip848"
#: the prefix of the comment that says why a signature takes or gives ``Any``
REASON = "Any: "
#: parts of the package the rule does not cover (the test harness)
EXCLUDED = ("testing",)


@dataclass(frozen=True)
class AnyUse:
    """One annotation of a public signature that mentions ``Any``."""

    line: int  # where the annotation is
    owner: str  # the qualified name: Class.method, function, Class (attribute or base)
    what: str  # "parameter x", "the return", "attribute x", "a base"
    reasoned: bool  # a ``# Any: `` comment is on one of the signature's lines
    signature: int  # the line the signature starts on (the ``def``, the ``class``, the attribute)


def mentions_any(annotation: ast.expr | None) -> bool:
    """``Any``, ``typing.Any``, or either inside a subscript, a union or a string annotation."""
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == "Any":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Any":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                if mentions_any(ast.parse(node.value, mode="eval").body):
                    return True
            except SyntaxError:
                continue
    return False


def reasoned_lines(source: str) -> set[int]:
    """The lines whose comment has a ``# Any: <why>`` part (after a ``# noqa`` too), the why not empty."""
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            parts = [part.strip() for part in token.string.split("#")]
            if any(part.startswith(REASON) and part[len(REASON):].strip() for part in parts):
                lines.add(token.start[0])
    return lines


def _signature_lines(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> range:
    first_statement = node.body[0].lineno
    return range(node.lineno, max(node.lineno, first_statement - 1) + 1)


def _is_record_class(node: ast.ClassDef) -> bool:
    """A dataclass (``@dataclass``, ``@dataclass(...)``, ``@dataclasses.dataclass``) or a TypedDict."""
    def name(expr: ast.expr) -> str:
        expr = expr.func if isinstance(expr, ast.Call) else expr
        return expr.attr if isinstance(expr, ast.Attribute) else expr.id if isinstance(expr, ast.Name) else ""
    return any(name(d) == "dataclass" for d in node.decorator_list) or any(name(b) == "TypedDict" for b in node.bases)


def _public(name: str) -> bool:
    return name == "__init__" or not name.startswith("_")


def public_any(source: str, module_public: bool = True) -> list[AnyUse]:
    """Every ``Any`` in a public signature of one module's source (none when the module itself is private)."""
    if not module_public:
        return []
    reasons = reasoned_lines(source)
    found: list[AnyUse] = []

    def walk(body: list[ast.stmt], prefix: str) -> Iterator[AnyUse]:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _public(node.name):
                lines = _signature_lines(node)
                reasoned = any(line in reasons for line in lines)
                args = node.args
                for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs,
                            *([args.vararg] if args.vararg else []), *([args.kwarg] if args.kwarg else [])]:
                    if mentions_any(arg.annotation):
                        yield AnyUse(arg.lineno, prefix + node.name, f"parameter {arg.arg}", reasoned, node.lineno)
                if mentions_any(node.returns):
                    yield AnyUse(node.lineno, prefix + node.name, "the return", reasoned, node.lineno)
            elif isinstance(node, ast.ClassDef) and _public(node.name) and node.name != "__init__":
                lines = _signature_lines(node)
                if any(mentions_any(base) for base in [*node.bases, *(k.value for k in node.keywords)]):
                    yield AnyUse(node.lineno, prefix + node.name, "a base", any(line in reasons for line in lines),
                                 node.lineno)
                if _is_record_class(node):
                    for item in node.body:
                        if isinstance(item, ast.AnnAssign) and mentions_any(item.annotation):
                            target = ast.unparse(item.target)
                            own = range(item.lineno, (item.end_lineno or item.lineno) + 1)
                            yield AnyUse(item.lineno, prefix + node.name, f"attribute {target}",
                                         any(line in reasons for line in own), item.lineno)
                yield from walk(node.body, f"{prefix}{node.name}.")

    found.extend(walk(ast.parse(source).body, ""))
    return found


def module_is_public(path: Path, package_dir: Path) -> bool:
    """No part of the module's dotted name starts with ``_`` (an ``__init__.py`` is its package)."""
    parts = path.relative_to(package_dir).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return not any(part.startswith("_") for part in parts)


def modules(package_dir: Path = PACKAGE_DIR) -> Iterator[Path]:
    """The package's modules the house rules cover, in a stable order (the harness left out)."""
    for path in sorted(package_dir.rglob("*.py")):
        if path.relative_to(package_dir).parts[0] not in EXCLUDED:
            yield path


def uses_by_module(package_dir: Path = PACKAGE_DIR) -> dict[Path, list[AnyUse]]:
    return {path: public_any(path.read_text(), module_is_public(path, package_dir)) for path in modules(package_dir)}


def main(argv: list[str]) -> int:
    listing = "--list" in argv
    args = [a for a in argv if a != "--list"]
    package_dir = Path(args[0]).resolve() if args else PACKAGE_DIR
    total: Counter[str] = Counter()
    reasoned: Counter[str] = Counter()
    signatures: Counter[str] = Counter()
    bare_signatures: Counter[str] = Counter()
    for path, uses in uses_by_module(package_dir).items():
        rel = path.relative_to(package_dir)
        part = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        signatures[part] += len({use.signature for use in uses})
        bare_signatures[part] += len({use.signature for use in uses if not use.reasoned})
        for use in uses:
            total[part] += 1
            reasoned[part] += use.reasoned
            if listing and not use.reasoned:
                print(f"{package_dir.name}/{rel.as_posix()}:{use.line}: {use.owner}: {use.what}")
    print("Any in public signatures: the annotations (parameters, returns, attributes, bases), and the signatures "
          "holding them")
    print(f"{'part':<16}{'annotations':>12}{'with reason':>13}{'without':>9}{'signatures':>12}{'without':>9}")

    def row(name: str, n: int, r: int, sig: int, bare: int) -> str:
        return f"{name:<16}{n:>12}{r:>13}{n - r:>9}{sig:>12}{bare:>9}"
    for part in sorted(total):
        print(row(part, total[part], reasoned[part], signatures[part], bare_signatures[part]))
    print(row("total", sum(total.values()), sum(reasoned.values()), sum(signatures.values()),
              sum(bare_signatures.values())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
