"""No import circles between the modules of SAM's packages.

grimp (import-linter's graph) counts every import, the ones inside functions too: a lazy import
hides a circle from Python's start-up, not from a reader. A circle is a strongly connected set of
two or more modules; each is reported with the import lines that close it.
"""

from __future__ import annotations

import grimp

PACKAGES = ("sam_server", "sam_worker", "compiler", "wse_sim", "client")

# Circles in code another change owns right now; each entry must go once that code is untangled
# (the test fails when a listed circle no longer exists, so the list cannot go stale).
KNOWN: dict[frozenset[str], str] = {}


def circles(graph: grimp.ImportGraph) -> list[frozenset[str]]:
    """The strongly connected sets of two or more modules (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                members = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.add(member)
                    if member == node:
                        break
                if len(members) > 1:
                    found.append(frozenset(members))
    return found


def _describe(graph: grimp.ImportGraph, members: frozenset[str]) -> str:
    lines = []
    for importer in sorted(members):
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            details = graph.get_import_details(importer=importer, imported=imported)
            where = ", ".join(str(d["line_number"]) for d in details)
            lines.append(f"  {importer} -> {imported} (line {where})")
    return "\n".join(lines)


def test_the_finder_reports_a_planted_circle_and_nothing_else() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in [("a.x", "a.y"), ("a.y", "a.z"), ("a.z", "a.x"), ("a.z", "a.w")]:
        graph.add_import(importer=importer, imported=imported)
    assert circles(graph) == [frozenset({"a.x", "a.y", "a.z"})]


def test_no_import_circle_between_sam_modules() -> None:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    found = circles(graph)
    new = [c for c in found if c not in KNOWN]
    assert not new, "import circles (move the shared piece down or pass it in):\n" + "\n".join(
        _describe(graph, c) for c in new
    )
    gone = [sorted(c) for c in KNOWN if c not in found]
    assert not gone, f"these circles are gone: remove them from KNOWN: {gone}"
