"""The compile options that change a plan (`planner.compile_options` reads them from the spec's
compile_options); every pass and the planner take them as one typed dict."""

from __future__ import annotations

from typing import TypedDict


class PlanOptions(TypedDict):
    """fp16: half-precision compute; optimizer_offload: optimizer state stays on the host;
    max_activation_memory: the older per-PE activation cap in bytes (None: none);
    activation_budget_bytes: a per-job activation budget (the driver micro-batches to meet it);
    micro_batches: how many micro-batches the step is split into (the graph is one of them);
    recompute: recompute in the backward the activations kept only for it; streaming: weight
    streaming instead of pipelined execution."""

    fp16: bool
    optimizer_offload: bool
    max_activation_memory: int | None
    activation_budget_bytes: int | None
    micro_batches: int
    recompute: bool
    streaming: bool
