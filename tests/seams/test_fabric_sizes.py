"""The cluster file's wafer sizes come from the simulator's architecture table (one source)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import ValidationError

from sam_server.config import WaferConfig
from wse_sim.arch import get_arch


@pytest.mark.parametrize("arch", ["wse2", "wse3"])
def test_a_wafer_without_a_size_gets_the_whole_fabric_of_its_arch(arch: str) -> None:
    wafer = WaferConfig(id="w0", arch=arch)
    full = get_arch(arch)
    assert (wafer.rows, wafer.cols) == (full.rows, full.cols)
    assert (WaferConfig(id="w1").rows, WaferConfig(id="w1").cols) == (750, 994)  # wse2 default


def test_a_wafer_larger_than_its_fabric_is_refused_with_both_sizes() -> None:
    with pytest.raises(ValidationError, match=r"wafer big: 751x994 exceeds the wse2 fabric"):
        WaferConfig(id="big", rows=751, cols=994)
    assert WaferConfig(id="ok", arch="wse3", rows=755, cols=1170).cols == 1170


def _fabric_numbers() -> set[int]:
    """Every size in the arch table: usable rectangles and whole fabrics, of each generation."""
    from wse_sim.arch import WSE2, WSE3

    return {n for a in (WSE2, WSE3) for n in (a.rows, a.cols, a.fabric_rows, a.fabric_cols)}


def test_no_code_outside_the_arch_table_retypes_a_fabric_size() -> None:
    """750x994 and the other fabric sizes are numbers only in wse_sim/arch.py; the policy, the
    replay, the compiler, the workers and the benchmarks take them from there (or from the cluster
    file). Prose in docstrings may quote them; code may not."""
    root = Path(__file__).resolve().parents[2]
    home = root / "wse_sim" / "arch.py"
    sizes = _fabric_numbers()
    found = []
    for part in ("sam_server", "sam_worker", "compiler", "wse_sim", "client", "benchmarks"):
        for path in sorted((root / part).rglob("*.py")):
            if path == home:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Constant) and type(node.value) is int:
                    if node.value in sizes:
                        found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value}")
    assert not found, "fabric sizes retyped outside wse_sim/arch.py:\n" + "\n".join(found)
