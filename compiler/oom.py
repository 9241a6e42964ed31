"""Building `compile_oom` errors: the kernel, its bytes per PE by category, the limit, and the
smallest region that fits (or the weight_streaming alternative). The planner searches for those
alternatives (it re-plans) and hands the answers in; this module does not import the planner."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from compiler.arch import ArchInfo
from compiler.errors import CompileOOM
from compiler.plan_options import PlanOptions

if TYPE_CHECKING:  # the planner imports this module to build its errors
    from compiler.planner import PlannedKernel
    from sam_domain.ir import IrGraph


def _kernel_label(graph: IrGraph, planned: PlannedKernel) -> str:
    nodes = {n["name"]: n for n in graph["nodes"]} if graph else {}
    sources = [nodes[n].get("source") for n in planned.kernel.nodes if n in nodes]
    source = next((s for s in sources if s), None)
    return f"{planned.kernel.id} ({planned.kernel.op}{', ' + source if source else ''})"


def oom_error(
    graph: IrGraph,
    planned: list[PlannedKernel],
    options: PlanOptions,
    arch: ArchInfo,
    region: tuple[int, int],
    smallest: tuple[int, int] | None,
    streaming_fits: bool,
    culprit: int | None = None,
    area: int | None = None,
) -> CompileOOM:
    """The pipelined plan does not fit: name the worst kernel and the smallest region that fits.

    `smallest` and `streaming_fits` are the planner's answers (`planner.smallest_region`, and
    whether the region fits with weight streaming): the search re-plans, so it stays there."""
    rows, cols = region
    totals = [p.memory.total() for p in planned]
    if culprit is None:
        culprit = max(range(len(planned)), key=lambda i: totals[i])
        area = max(1, (rows * cols * totals[culprit]) // max(1, sum(totals)))
    worst = planned[culprit]
    per_pe = worst.memory.per_pe(area or 1, arch.sram_reserved_bytes)
    needed = sum(per_pe.values())
    parts = " + ".join(f"{k} {v}" for k, v in per_pe.items())
    fix = (
        f"Smallest region that fits: {smallest[0]}x{smallest[1]} ({smallest[0] * smallest[1]} PEs)"
        if smallest
        else "The model does not fit even on a whole wafer in pipelined mode"
    )
    if streaming_fits:
        fix += "; or set compile_options.execution_mode: weight_streaming (fits this region)"
    activations = sum(p.memory.activations for p in planned)
    if activations > sum(totals) // 3 and not options.get("micro_batches", 1) > 1:
        # Mostly activations: a per-job budget below them makes the compiler micro-batch.
        fix += (
            f"; or set compile_options.max_activation_memory below the step's {activations} "
            f"bytes of activations (e.g. '{max(1, activations // 4096)}KB') to micro-batch"
        )
        if not options.get("recompute"):
            fix += (
                "; or set compile_options.activation_recomputation: true to recompute in the "
                "backward the activations only it reads"
            )
    fix += "; or reduce batch_size / model size."
    message = (
        f"kernel {_kernel_label(graph, worst)} needs {needed} bytes/PE ({parts}) > "
        f"{arch.sram_bytes} bytes/PE on a {rows}x{cols} region. {fix}"
    )
    return CompileOOM(
        message,
        {
            "kernel": worst.kernel.id,
            "op": worst.kernel.op,
            "bytes_per_pe": per_pe,
            "needed_bytes_per_pe": needed,
            "limit_bytes_per_pe": arch.sram_bytes,
            "region": {"rows": rows, "cols": cols},
            "smallest_region": {"rows": smallest[0], "cols": smallest[1]} if smallest else None,
            "weight_streaming_fits": streaming_fits,
            "total_bytes": sum(totals),
        },
    )


def streaming_oom(
    planned: list[PlannedKernel],
    worst: PlannedKernel,
    options: PlanOptions,
    arch: ArchInfo,
    region: tuple[int, int],
) -> CompileOOM:
    """Weight streaming does not fit: activations or one kernel's weights are too big."""
    rows, cols = region
    parts = " + ".join(f"{k} {v}" for k, v in worst.per_pe.items())
    needed = sum(worst.per_pe.values())
    factor = needed / max(1, arch.sram_bytes - 0)
    side = math.ceil(math.sqrt(factor) * max(rows, cols)) + 1
    return CompileOOM(
        f"kernel {worst.kernel.id} ({worst.kernel.op}) needs {needed} bytes/PE ({parts}) > "
        f"{arch.sram_bytes} bytes/PE on a {rows}x{cols} region even with weight streaming; "
        f"use a larger region (about {side}x{side}) or a smaller batch_size.",
        {
            "kernel": worst.kernel.id,
            "op": worst.kernel.op,
            "bytes_per_pe": worst.per_pe,
            "needed_bytes_per_pe": needed,
            "limit_bytes_per_pe": arch.sram_bytes,
            "region": {"rows": rows, "cols": cols},
            "weight_streaming_fits": False,
        },
    )
