"""The artifact manifest and the compile summary (the compile part of the performance report)."""

from __future__ import annotations

from typing import Any

from compiler import COMPILER_VERSION
from compiler.arch import ArchInfo
from compiler.artifact import FORMAT
from compiler.cache import torch_version
from compiler.step_options import LossScaleConfig

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sam_domain.compile import (
        CompileSummary,
        KernelSummary,
        Manifest,
        MemoryMapEntry,
        TraceInfo,
    )
    from sam_domain.ir import IrGraph, IrInput, ManifestKernel


def build_summary(
    plan: Any,
    graph: IrGraph,
    arch: ArchInfo,
    region: tuple[int, int],
    key: str,
    seconds: float,
    trace: TraceInfo,
) -> CompileSummary:
    """JSON-able compile summary: kernels (rects, FLOPs, memory), memory, cycles, timing, and
    the trace's part (where the user's code ran)."""
    kernels: list[KernelSummary] = [
        {
            "id": p.kernel.id,
            "op": p.kernel.op,
            "rect": list(p.rect) if p.rect else None,
            "flops": int(p.kernel.flops),
            "nodes": len(p.kernel.nodes),
            "memory_per_pe": p.per_pe,
            "est_cycles": int(p.cycles),
        }
        for p in plan.kernels
    ]
    peak = max(plan.kernels, key=lambda p: sum(p.per_pe.values()))
    return {
        "cache_key": key,
        "arch": arch.key,
        "region": {"rows": region[0], "cols": region[1]},
        "execution_mode": "weight_streaming" if plan.streaming else "pipelined",
        "kernels": kernels,
        "num_kernels": len(kernels),
        "num_nodes": len(graph["nodes"]),
        "num_params": int(sum(_numel(i) for i in graph["inputs"] if i["role"] == "param")),
        "memory": {
            "peak_bytes_per_pe": int(sum(peak.per_pe.values())),
            "limit_bytes_per_pe": int(plan.limit_bytes_per_pe),
            "sram_bytes_per_pe": arch.sram_bytes,
            "reserve_bytes_per_pe": arch.sram_reserved_bytes,
            "peak_kernel": peak.kernel.id,
            "by_category": dict(peak.per_pe),
        },
        "estimated_cycles_per_step": int(plan.cycles_per_step),
        "estimated_seconds_per_step": plan.cycles_per_step / arch.clock_hz,
        "flops_per_step": int(plan.flops_per_step),
        "weight_streaming": {
            "enabled": plan.streaming,
            "streamed_bytes_per_step": int(plan.streamed_bytes_per_step),
            "host_cycles_per_step": int(plan.host_cycles_per_step),
        },
        "wirelength_hops": int(plan.wirelength_hops),
        "optimizer_offload": {
            "host_bytes_per_step": int(getattr(plan, "offload_bytes_per_step", 0)),
            "host_cycles_per_step": int(getattr(plan, "offload_cycles_per_step", 0)),
        },
        "compile_seconds": round(seconds, 4),
        "cache_hit": False,
        "sandboxed": trace["sandboxed"],
        "network_isolation": trace["network_isolation"],
    }


def _numel(inp: IrInput) -> int:
    n = 1
    for d in inp["shape"]:
        n *= d
    return n


def build_manifest(
    spec: dict[str, Any],
    plan: Any,
    graph: IrGraph,
    arch: ArchInfo,
    region: tuple[int, int],
    key: str,
    summary: CompileSummary,
) -> Manifest:
    """manifest.json of `compiler.artifact`."""
    kernels: list[ManifestKernel] = []
    memory_map: dict[str, list[MemoryMapEntry]] = {}
    for p in plan.kernels:
        kernels.append(
            {
                "id": p.kernel.id,
                "nodes": list(p.kernel.nodes),
                "op": p.kernel.op,
                "rect": list(p.rect),
                "flops": int(p.kernel.flops),
                "weights": list(p.memory.params),
                "memory_per_pe": p.per_pe,
                "est_cycles": int(p.cycles),
            }
        )
        memory_map[p.kernel.id] = _memory_map(p, plan.streaming)
    batch = next((i["shape"][0] for i in graph["inputs"] if i["role"] == "input" and i["shape"]), 1)
    opts = spec.get("compile_options") or {}
    return {
        "format": FORMAT,
        "compiler_version": COMPILER_VERSION,
        "torch_version": torch_version(),
        "cache_key": key,
        "arch": arch.key,
        "region": {"rows": region[0], "cols": region[1]},
        "execution_mode": summary["execution_mode"],
        "fp16": bool(opts.get("fp16_enabled")),
        "optimizer_state_offload": bool(opts.get("optimizer_state_offload")),
        # the graph is one micro-batch's step; the job's batch is micro_batches of them
        "micro_batches": int(opts.get("_micro_batches") or 1),
        "loss_scaling": LossScaleConfig.from_spec(spec) is not None,
        "batch_size": int(batch) * int(opts.get("_micro_batches") or 1),
        "kernels": kernels,
        "memory": summary["memory"],
        "memory_map": memory_map,
        "estimated_cycles_per_step": summary["estimated_cycles_per_step"],
        "flops_per_step": summary["flops_per_step"],
        "weight_streaming": summary["weight_streaming"],
        "inputs": graph["inputs"],
        "outputs": graph["outputs"],
        "model": spec.get("model"),
        "data": spec.get("data"),
        "train": spec.get("train"),
        "run_options": spec.get("run_options"),
        "summary": summary,
    }


def _memory_map(planned: Any, streaming: bool) -> list[MemoryMapEntry]:
    """Symbol -> offset and bytes per PE inside the kernel's rect (after the reserve)."""
    area = planned.rect[2] * planned.rect[3]
    offset = planned.per_pe.get("reserve", 0)
    entries: list[MemoryMapEntry] = []
    for symbol, category, size in planned.memory.symbols:
        if streaming and category == "optimizer":
            continue
        per_pe = -(-size // max(1, area))
        entries.append(
            {"symbol": symbol, "category": category, "offset": offset, "bytes_per_pe": per_pe}
        )
        offset += per_pe
    return entries
