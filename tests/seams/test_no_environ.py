"""Settings have one home: only the settings modules read the environment.

The server, the workers, the compiler and the simulator get their settings from
`sam_server.config.Settings` (read once when a process starts, then passed in); the client from
`client.config`. Any other `os.environ` / `os.getenv` is a setting hiding from `sam config show`
and from the operator guide's table, unless it sits on a process boundary listed below."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sam_server", "sam_worker", "sam_domain", "compiler", "wse_sim", "client")
SETTINGS_MODULES = {
    "sam_server/config.py": "the settings tree (SAM_* and SAM_SETTINGS_FILE)",
    "client/config.py": "the client's settings: SAM_URL, SAM_TOKEN, SAM_CONTEXT, SAM_TIMEOUT",
}
# Process boundaries, where the environment is how a value reaches another process.
BOUNDARIES = {
    "sam_server/cli.py": "`sam server --workers N` sets PROMETHEUS_MULTIPROC_DIR for the uvicorn "
    "worker processes it starts (prometheus_client reads that variable itself)",
    "sam_server/api/prom.py": "a uvicorn worker process learns it is one of several from "
    "PROMETHEUS_MULTIPROC_DIR, the variable prometheus_client itself reads",
    "sam_worker/supervisor.py": "`sam up` builds the environment of the processes it starts",
    "client/sam/runner.py": "`from sam import Runner` runs inside the user's own training script, "
    "a process SAM does not start: SAM_RUNNER=local is the switch it reads there, and "
    "SAM_DATASETS the login node's folder of data set copies (docs/runner.md)",
    "client/sam/remote.py": "the script `sam run` starts learns its options there from "
    "SAM_RUN_WAIT and SAM_RUN_SPEC (docs/runner.md)",
    "client/commands/run.py": "`sam run` builds the environment of the training script it starts "
    "(SAM_URL, SAM_TOKEN, SAM_RUNNER, SAM_RUN_WAIT, SAM_RUN_SPEC)",
    "compiler/sandbox/child.py": "the sandbox child sets SAM_ARRAY_* for the tenant code it runs "
    "(its make_batch may read them); it reads nothing",
}


def _environment_uses(tree: ast.AST) -> list[int]:
    """Lines that touch os.environ / os.getenv / os.putenv, or import them from os."""
    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in {"environ", "environb", "getenv", "putenv", "unsetenv"}
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            if any(a.name in {"environ", "environb", "getenv", "putenv"} for a in node.names):
                lines.append(node.lineno)
    return lines


def _uses() -> dict[str, list[int]]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            lines = _environment_uses(ast.parse(path.read_text(), str(path)))
            if lines:
                found[path.relative_to(ROOT).as_posix()] = lines
    return found


def test_only_the_settings_modules_read_the_environment() -> None:
    allowed = SETTINGS_MODULES | BOUNDARIES
    stray = {path: lines for path, lines in _uses().items() if path not in allowed}
    assert not stray, (
        f"os.environ / os.getenv outside the settings modules: {stray}. Add the setting to "
        "sam_server/config.py's tree (a section's field; SAM_<NAME> keeps working) and pass it in"
    )


def test_the_allow_list_names_only_modules_that_still_need_it() -> None:
    uses = _uses()
    assert set(SETTINGS_MODULES) | set(BOUNDARIES) == set(uses), (
        "an allowed module no longer touches the environment: drop it from the list"
    )


def test_the_check_sees_every_spelling() -> None:
    source = (
        "import os\nfrom os import getenv\n"
        "a = os.environ.get('X')\nb = os.getenv('Y')\nc = os.environ['Z']\n"
    )
    assert sorted(_environment_uses(ast.parse(source))) == [2, 3, 4, 5]
