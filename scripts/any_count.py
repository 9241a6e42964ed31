"""How many times the source packages say `Any` (issue 32 tracks it going down).

Counts every `Any` name in annotations and code of the source packages (not the tests, benchmarks
or scripts), and the `dict[str, Any]` among them, per package and in all:

    python scripts/any_count.py          # a table, then one JSON line
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sam_server", "sam_worker", "sam_domain", "compiler", "wse_sim", "client")


def _is_any(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (
        isinstance(node, ast.Attribute) and node.attr == "Any"
    )


def counts(source: str) -> tuple[int, int]:
    """(uses of `Any`, `dict[str, Any]` among them) in one module's source."""
    tree = ast.parse(source)
    anys = dicts = 0
    for node in ast.walk(tree):
        if _is_any(node) and not isinstance(getattr(node, "ctx", None), ast.Store):
            anys += 1
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id in {"dict", "Dict", "Mapping", "MutableMapping"}
            and isinstance(node.slice, ast.Tuple)
            and len(node.slice.elts) == 2
            and _is_any(node.slice.elts[1])
        ):
            dicts += 1
    return anys, dicts


def tally(root: Path = ROOT) -> dict[str, tuple[int, int]]:
    """Per package: (uses of Any, dict[str, Any]); import lines (`from typing import Any`) are
    not uses and are not counted."""
    found = {}
    for package in PACKAGES:
        anys = dicts = 0
        for path in sorted((root / package).rglob("*.py")):
            a, d = counts(path.read_text())
            anys, dicts = anys + a, dicts + d
        found[package] = (anys, dicts)
    return found


def main() -> int:
    found = tally()
    for package, (anys, dicts) in found.items():
        print(f"{package:<12} {anys:>6} Any  {dicts:>5} dict[str, Any]", file=sys.stderr)
    total = sum(a for a, _ in found.values())
    total_dicts = sum(d for _, d in found.values())
    print(json.dumps({"any": total, "dict_str_any": total_dicts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
