"""The middle of the compiler: fuse, cost, plan memory, size and place kernels for a region.

`plan_compile(graph, options, arch, region)` returns a `CompilePlan` (kernels with rects, per-PE
memory, cycle estimate) or raises `CompileOOM` with the breakdown, the smallest region that fits
and whether `execution_mode: weight_streaming` would fit instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from compiler.activation_budget import parse_activation_budget
from compiler.arch import ArchInfo
from compiler.errors import CompileOOM
from compiler.ir import node_inputs
from compiler.oom import oom_error, streaming_oom
from compiler.passes.cost import node_flops, shape_table
from compiler.passes.fusion import Kernel, fuse, merge_to_count
from compiler.passes.memory import KernelMemory, plan_memory
from compiler.passes.placement import PlacementFailed, size_and_place
from compiler.plan_options import PlanOptions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sam_domain.ir import IrGraph

EFFICIENCY = 0.8  # sustained fraction of peak FLOP rate (25-pt stencil on WSE-2, anchors a.4)


@dataclass
class PlannedKernel:
    """A kernel with its rectangle, FLOPs, per-PE memory and cycle estimate."""

    kernel: Kernel
    memory: KernelMemory
    rect: tuple[int, int, int, int] | None = None
    per_pe: dict[str, int] = field(default_factory=dict)
    cycles: int = 0


@dataclass
class CompilePlan:
    """Everything the artifact's manifest says about kernels, memory and time."""

    kernels: list[PlannedKernel]
    streaming: bool
    limit_bytes_per_pe: int
    cycles_per_step: int
    flops_per_step: int
    streamed_bytes_per_step: int = 0
    host_cycles_per_step: int = 0
    wirelength_hops: int = 0  # sum over kernel-to-kernel edges of centre-to-centre L1 distance
    offload_bytes_per_step: int = 0  # optimizer state host -> wafer -> host (offload)
    offload_cycles_per_step: int = 0


def compile_options(spec: dict[str, Any]) -> PlanOptions:
    """The options that change a plan, from spec.compile_options."""
    opts = spec.get("compile_options") or {}
    budget = parse_activation_budget(opts.get("max_activation_memory"))
    return {
        "fp16": bool(opts.get("fp16_enabled", False)),
        "optimizer_offload": bool(opts.get("optimizer_state_offload", False)),
        # the older per-PE cap ("2KiB/PE"); a per-job budget micro-batches instead (driver)
        "max_activation_memory": budget.per_pe_bytes if budget else None,
        "activation_budget_bytes": budget.per_job_bytes if budget else None,
        "micro_batches": int(opts.get("_micro_batches") or 1),
        # recompute in the backward the activations kept only for it (passes.recompute)
        "recompute": bool(opts.get("activation_recomputation", False)),
        "streaming": opts.get("execution_mode", "pipelined") == "weight_streaming",
    }


def build_kernels(graph: IrGraph, area: int) -> list[Kernel]:
    """Fused kernels with FLOPs, merged so that no more kernels than PEs remain."""
    shapes = shape_table(graph)
    flops = {n["name"]: node_flops(n, shapes) for n in graph["nodes"]}
    kernels = fuse(graph)
    for kernel in kernels:
        kernel.flops = sum(flops[n] for n in kernel.nodes)
    return merge_to_count(kernels, area)


def plan_compile(
    graph: IrGraph,
    options: PlanOptions,
    arch: ArchInfo,
    region: tuple[int, int],
    *,
    do_placement: bool = True,
    explain: bool = True,
) -> CompilePlan:
    """Size and place (unless validating) every kernel in a rows x cols region.

    Raises CompileOOM; with explain=False its message skips the (costly) smallest-region search.
    """
    rows, cols = region
    # Streaming kernels take turns on the whole region, so they need not be merged to fit it.
    limit = 1 << 30 if options.get("streaming") else rows * cols
    kernels = build_kernels(graph, limit)
    memories = plan_memory(graph, kernels, options)
    planned = [PlannedKernel(k, m) for k, m in zip(kernels, memories, strict=False)]
    if options.get("streaming"):
        return _plan_streaming(planned, options, arch, region, explain)
    return _plan_pipelined(graph, planned, options, arch, region, do_placement, explain)


def _cap(arch: ArchInfo) -> int:
    return arch.sram_bytes - arch.sram_reserved_bytes


def _min_area(memory: KernelMemory, options: PlanOptions, arch: ArchInfo) -> int:
    need = math.ceil(memory.total() / _cap(arch))
    act_cap = options.get("max_activation_memory")
    if act_cap:
        need = max(need, math.ceil(memory.activations / int(act_cap)))
    return max(1, need)


def _plan_pipelined(
    graph: IrGraph,
    planned: list[PlannedKernel],
    options: PlanOptions,
    arch: ArchInfo,
    region: tuple[int, int],
    do_placement: bool,
    explain: bool,
) -> CompilePlan:
    rows, cols = region
    mins = [_min_area(p.memory, options, arch) for p in planned]
    try:
        areas, rects = size_and_place(
            [p.kernel.flops for p in planned], mins, rows, cols, do_placement
        )
    except PlacementFailed:
        raise _oom(explain, graph, planned, options, arch, region) from None
    for i, p in enumerate(planned):
        p.rect = rects[i] if rects else None
        area = rects[i][2] * rects[i][3] if rects else areas[i]
        p.per_pe = p.memory.per_pe(area, arch.sram_reserved_bytes)
        if not _fits(p.per_pe, options, arch):
            raise _oom(explain, graph, planned, options, arch, region, culprit=i, area=area)
        p.cycles = _kernel_cycles(p.kernel.flops, area, p.rect, arch, options)
    batch = _batch_size(graph)
    slowest = max(p.cycles for p in planned)
    fill = sum(p.cycles for p in planned) / batch
    micro = int(options.get("micro_batches") or 1)  # the graph is one micro-batch's step
    total = micro * int(math.ceil(fill + (batch - 1) * slowest / batch))
    flops = micro * sum(p.kernel.flops for p in planned)
    plan = CompilePlan(planned, False, arch.sram_bytes, total, flops)
    plan.wirelength_hops = wirelength(graph, planned) if do_placement else 0
    _add_offload(plan, micro, arch, region)
    return plan


def _add_offload(plan: CompilePlan, micro: int, arch: ArchInfo, region: tuple[int, int]) -> None:
    """Host-resident optimizer state streams in and back out every (micro-)step over the host
    channels of each kernel's rectangle (wse_sim's host link model), in series with the step."""
    cycles = 0.0
    for p in plan.kernels:
        height = p.rect[2] if p.rect else region[0]
        cycles += 2 * p.memory.offloaded / (arch.host_bytes_per_cycle * arch.host_channels(height))
    plan.offload_bytes_per_step = 2 * micro * sum(p.memory.offloaded for p in plan.kernels)
    plan.offload_cycles_per_step = int(math.ceil(micro * cycles))
    plan.cycles_per_step += plan.offload_cycles_per_step


def wirelength(graph: IrGraph, planned: list[PlannedKernel]) -> int:
    """Placement quality: L1 distance between the centres of every producer/consumer kernel
    pair (the ISPD-2020 wire term); the chain-keeping floorplan keeps it small."""
    kernel_of = {n: i for i, p in enumerate(planned) for n in p.kernel.nodes}
    edges = {
        (kernel_of[ref], kernel_of[node["name"]])
        for node in graph["nodes"]
        for ref in node_inputs(node)
        if ref in kernel_of and kernel_of[ref] != kernel_of[node["name"]]
    }

    def centre(i: int) -> tuple[float, float]:
        r, c, h, w = planned[i].rect or (0, 0, 0, 0)
        return r + h / 2, c + w / 2

    return int(
        sum(abs(centre(a)[0] - centre(b)[0]) + abs(centre(a)[1] - centre(b)[1]) for a, b in edges)
    )


def _oom(
    explain: bool,
    graph: IrGraph,
    planned: list[PlannedKernel],
    options: PlanOptions,
    arch: ArchInfo,
    region: tuple[int, int],
    **where: Any,
) -> CompileOOM:
    if not explain:
        return CompileOOM("does not fit")
    smallest = smallest_region(graph, options, arch, region)
    streaming = not options.get("streaming") and plan_fits(
        graph, {**options, "streaming": True}, arch, region
    )
    return oom_error(graph, planned, options, arch, region, smallest, streaming, **where)


def plan_fits(
    graph: IrGraph, options: PlanOptions, arch: ArchInfo, region: tuple[int, int]
) -> bool:
    """Whether the step plans on `region` without running out of memory."""
    try:
        plan_compile(graph, options, arch, region, do_placement=True, explain=False)
    except CompileOOM:
        return False
    return True


def smallest_region(
    graph: IrGraph, options: PlanOptions, arch: ArchInfo, region: tuple[int, int]
) -> tuple[int, int] | None:
    """The smallest region with the requested aspect ratio (capped by the wafer) that fits."""
    rows, cols = region

    def shape(scale: float) -> tuple[int, int]:
        return (
            min(arch.rows, max(1, math.ceil(rows * scale))),
            min(arch.cols, max(1, math.ceil(cols * scale))),
        )

    if not plan_fits(graph, options, arch, (arch.rows, arch.cols)):
        return None
    lo, hi = 1.0, max(arch.rows / rows, arch.cols / cols)
    for _ in range(14):
        mid = (lo + hi) / 2
        if plan_fits(graph, options, arch, shape(mid)):
            hi = mid
        else:
            lo = mid
    return shape(hi)


def _fits(per_pe: dict[str, int], options: PlanOptions, arch: ArchInfo) -> bool:
    act_cap = options.get("max_activation_memory")
    if act_cap and per_pe["activations"] > int(act_cap):
        return False
    return sum(per_pe.values()) <= arch.sram_bytes


def _plan_streaming(
    planned: list[PlannedKernel],
    options: PlanOptions,
    arch: ArchInfo,
    region: tuple[int, int],
    explain: bool,
) -> CompilePlan:
    """Weights stream in kernel by kernel; every kernel runs on the whole region in turn."""
    rows, cols = region
    area = rows * cols
    stashed = sum(p.memory.activations for p in planned)
    for p in planned:
        p.rect = (0, 0, rows, cols)
        p.per_pe = {
            "weights": math.ceil(p.memory.weights / area),
            "gradients": math.ceil(p.memory.gradients / area),
            "optimizer": 0,
            "activations": math.ceil(stashed / area),
            "reserve": arch.sram_reserved_bytes,
        }
        if not _fits(p.per_pe, options, arch):
            raise streaming_oom(planned, p, options, arch, region) if explain else CompileOOM("")
        p.cycles = _kernel_cycles(p.kernel.flops, area, p.rect, arch, options)
    streamed = sum(p.memory.weights + p.memory.gradients for p in planned)
    channels = 2 * max(1, rows // 16)
    host = int(math.ceil(streamed / (arch.host_bytes_per_cycle * channels)))
    compute = sum(p.cycles for p in planned)
    return CompilePlan(
        planned,
        True,
        arch.sram_bytes,
        compute + host,
        sum(p.kernel.flops for p in planned),
        streamed,
        host,
    )


def _kernel_cycles(
    flops: int,
    area: int,
    rect: tuple[int, int, int, int] | None,
    arch: ArchInfo,
    options: PlanOptions,
) -> int:
    rate = arch.fp16_flops_per_cycle if options.get("fp16") else arch.fp32_flops_per_cycle
    compute = flops / (area * rate * EFFICIENCY)
    hops = (rect[2] + rect[3]) if rect else 2 * math.isqrt(area)
    return int(math.ceil(compute + hops))


def _batch_size(graph: IrGraph) -> int:
    for inp in graph["inputs"]:
        if inp["role"] == "input" and inp["shape"]:
            return max(1, int(inp["shape"][0]))
    return 1
