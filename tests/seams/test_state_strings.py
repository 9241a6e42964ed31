"""No bare job-state string outside sam_server/states.py in the services, the API, the database
layer, the scheduler loop and the workers (the pure policy, sam_server/scheduling, has its own
`Literal` states and is not scanned): they name states through `JobState` and the named sets, so
a state's spelling lives in one place and a typo is an AttributeError, not a silently false
comparison.

What does not count: docstrings, and the member declarations of an enum (a `StrEnum` whose value
happens to read like a state, e.g. a compile outcome `succeeded`, is a named declaration too).
"""

from __future__ import annotations

import ast
from pathlib import Path

from sam_server.states import JobState

ROOT = Path(__file__).resolve().parents[2]
SCANNED = (
    "sam_server/services",
    "sam_server/api",
    "sam_server/db",
    "sam_server/controller",
    "sam_worker",
)
STATES = {s.value for s in JobState}

# Files another change owns right now; each entry goes once that change has swept them (the test
# fails when a listed file is clean, so the list cannot go stale).
PENDING: dict[str, str] = {}


def _exempt(tree: ast.AST) -> set[int]:
    """ids of the constants that are docstrings or enum member values."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
        if isinstance(node, ast.ClassDef) and any(
            isinstance(b, ast.Name) and b.id.endswith("Enum") for b in node.bases
        ):
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
                    out.add(id(stmt.value))
    return out


def bare_states(source: str) -> list[tuple[int, str]]:
    """(line, text) of each job-state string constant in `source` that is not exempt."""
    tree = ast.parse(source)
    exempt = _exempt(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in STATES
        and id(node) not in exempt
    ]


def test_the_scan_finds_a_bare_state_and_spares_docstrings_and_enum_members() -> None:
    source = '''
"""A module about "running" jobs."""
from enum import StrEnum

class Outcome(StrEnum):
    FAILED = "failed"

def f(job):
    """Is it "queued"?"""
    return job.state == "cancelling" or job.state in ("pending",)
'''
    assert sorted(bare_states(source)) == [(10, "cancelling"), (10, "pending")]


def test_no_bare_job_state_strings_outside_states_py() -> None:
    found: dict[str, list[tuple[int, str]]] = {}
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            hits = bare_states(path.read_text())
            if hits:
                found[str(path.relative_to(ROOT))] = hits
    unexpected = {f: hits for f, hits in found.items() if f not in PENDING}
    assert not unexpected, (
        "bare job-state strings: use sam_server.states.JobState or its named sets "
        f"(WAITING, HOLDS_REGION, LEASED, ENDED): {unexpected}"
    )
    swept = sorted(set(PENDING) - set(found))
    assert not swept, f"these files are clean now: remove them from PENDING: {swept}"
