"""The client installs light on a login node: it never imports the server side or torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import client

FORBIDDEN = {
    "sam_server",
    "sam_worker",
    "compiler",
    "wse_sim",
    "sqlalchemy",
    "celery",
    "fastapi",
    "torch",
}
CLIENT_DIR = Path(client.__file__).parent


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Call) and getattr(
            node.func, "attr", getattr(node.func, "id", "")
        ) in (
            "import_module",
            "__import__",
        ):
            names.update(
                a.value
                for a in node.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str)
            )
    return names


def test_no_client_module_imports_the_server_side() -> None:
    files = sorted(CLIENT_DIR.rglob("*.py"))
    assert len(files) >= 10
    offenders = {
        f"{path.relative_to(CLIENT_DIR)}: {name}"
        for path in files
        for name in imported_modules(path)
        if name.split(".")[0] in FORBIDDEN
    }
    assert offenders == set()


def test_boundary_check_sees_an_offending_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os\nfrom sam_server.app import create_app\nimport importlib\nimportlib.import_module('torch')\n"
    )
    assert {"sam_server.app", "torch"} <= imported_modules(bad)


def test_running_the_cli_loads_no_heavy_module() -> None:
    code = (
        "import sys; from client.cli import main\n"
        "try: main(['queue', '--help'])\n"
        "except SystemExit: pass\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {sorted(FORBIDDEN)!r}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "[]"
