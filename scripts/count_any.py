"""Count `Any` in the public signatures of the package (issue 33's convention).

A public signature is a function, method or class not starting with `_` (`__init__` counts) defined at module
level or in a public class, in a module whose name does not start with `_` (a package's `__init__.py` counts: it
is the package's public face). Each `Any` in a parameter or return annotation is counted once; a signature whose
lines carry a comment starting `# Any: ` (the reason) is counted as explained.

Why a script and not grep: `Any` also appears in bodies, private helpers and comments, which the convention does
not cover; only the syntax tree says which annotations belong to a public signature.

    python scripts/count_any.py [--list] [paths...]    (default: airflow_provider_kip848)
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REASON_PREFIX = "# Any: "


@dataclass(frozen=True)
class AnyUse:
    path: Path
    line: int
    name: str
    count: int
    explained: bool


def _any_count(annotation: ast.expr | None) -> int:
    if annotation is None:
        return 0
    return sum(
        1
        for node in ast.walk(annotation)
        if (isinstance(node, ast.Name) and node.id == "Any")
        or (isinstance(node, ast.Attribute) and node.attr == "Any")
        or (isinstance(node, ast.Constant) and isinstance(node.value, str) and "Any" in _names_in(node.value))
    )


def _names_in(text: str) -> set[str]:
    """Names in a string annotation ("dict[str, Any]")."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return set()
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def _signature_annotations(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr | None]:
    args = func.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    if args.vararg:
        every.append(args.vararg)
    if args.kwarg:
        every.append(args.kwarg)
    return [arg.annotation for arg in every] + [func.returns]


def _comments_by_line(source: str) -> dict[int, str]:
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string
    return comments


def _public_functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef) and (
                    member.name == "__init__" or not member.name.startswith("_")
                ):
                    yield f"{node.name}.{member.name}", member


def uses_in(path: Path) -> list[AnyUse]:
    if path.stem.startswith("_") and path.name != "__init__.py":
        return []
    source = path.read_text()
    tree = ast.parse(source)
    comments = _comments_by_line(source)
    found = []
    for name, func in _public_functions(tree):
        count = sum(_any_count(annotation) for annotation in _signature_annotations(func))
        if not count:
            continue
        body_start = func.body[0].lineno
        explained = any(
            comments.get(line, "").startswith(REASON_PREFIX) for line in range(func.lineno, body_start + 1)
        )
        found.append(AnyUse(path, func.lineno, name, count, explained))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=["airflow_provider_kip848"])
    parser.add_argument("--list", action="store_true", help="one line per signature")
    args = parser.parse_args(argv)
    uses: list[AnyUse] = []
    for root in map(Path, args.paths):
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for path in files:
            uses.extend(uses_in(path))
    if args.list:
        for use in uses:
            mark = "explained" if use.explained else "UNEXPLAINED"
            print(f"{use.path}:{use.line}: {use.name}: {use.count} Any, {mark}")
    total = sum(use.count for use in uses)
    unexplained = [use for use in uses if not use.explained]
    print(
        f"{total} Any in {len(uses)} public signatures; "
        f"{sum(use.count for use in unexplained)} in {len(unexplained)} signatures without a '{REASON_PREFIX}' reason"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
