"""wse_sim is a library with no dependency on the rest of SAM."""

from __future__ import annotations

import ast
from pathlib import Path

import wse_sim

FORBIDDEN = {"sam_server", "compiler", "sam_worker", "client"}


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_wse_sim_imports_nothing_from_the_rest_of_sam():
    package = Path(wse_sim.__file__).parent
    files = sorted(package.rglob("*.py"))
    assert len(files) > 5
    offenders = {str(f.relative_to(package)): sorted(imported_roots(f) & FORBIDDEN) for f in files}
    assert {f: m for f, m in offenders.items() if m} == {}
