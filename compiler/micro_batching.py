"""Fitting a per-job activation budget (`compile_options.max_activation_memory`) by splitting the
batch into micro-batches with gradient accumulation.

The traced step is specialised to one micro-batch: the runtime runs it once per micro-batch,
accumulating gradients, and applies the update (clipping, loss scaling, schedule) on the last,
so the loss and the update equal the full-batch step. Activations shrink with the micro-batch;
the price is one pass of the step's fixed costs (launches, collectives, the masked update) per
micro-batch, which the compile summary and the report show as cycles.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

from compiler.errors import CompileOOM
from compiler.plan_options import PlanOptions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sam_domain.compile import BudgetSummary
    from sam_domain.ir import IrGraph


@dataclass
class MicroBatchDecision:
    """What the compiler chose for the budget, for the compile summary."""

    budget_bytes: int
    full_batch_activation_bytes: int
    activation_bytes: int
    micro_batches: int
    batch_size: int

    def to_summary(self) -> BudgetSummary:
        """The summary's `activation_budget` section."""
        return {
            "budget_bytes": self.budget_bytes,
            "strategy": "micro_batching" if self.micro_batches > 1 else "none",
            "micro_batches": self.micro_batches,
            "micro_batch_size": self.batch_size // self.micro_batches,
            "activation_bytes": self.activation_bytes,
            "full_batch_activation_bytes": self.full_batch_activation_bytes,
        }


def activation_bytes(graph: IrGraph, options: PlanOptions, area: int) -> int:
    """Bytes of activations the step keeps on the wafer (all kernels, whole batch of the graph)."""
    from compiler.passes.memory import plan_memory
    from compiler.planner import build_kernels

    kernels = build_kernels(graph, area)
    return sum(m.activations for m in plan_memory(graph, kernels, options))


def fit_budget(
    spec: dict[str, Any],
    graph: IrGraph,
    options: PlanOptions,
    area: int,
    retrace: Any,
) -> tuple[dict[str, Any], IrGraph, MicroBatchDecision]:
    """(spec, graph) whose activations fit options' per-job budget, and the decision.

    retrace(spec) -> graph traces a spec again (with compile_options._micro_batches set).
    Tries the smallest micro-batch count that divides the batch and the linear estimate says
    fits, then larger ones; raises CompileOOM when even one sample per micro-batch is over.
    """
    budget = options["activation_budget_bytes"]
    if budget is None:
        raise ValueError(
            "fit_budget needs compile_options.max_activation_memory as a per-job budget"
        )
    batch = int(spec["data"]["batch_size"])
    full = activation_bytes(graph, options, area)
    decision = MicroBatchDecision(budget, full, full, 1, batch)
    if full <= budget:
        return spec, graph, decision
    divisors = [d for d in range(2, batch + 1) if batch % d == 0]
    start = math.ceil(full / budget)
    candidates = [d for d in divisors if d >= start][:3] or divisors[-1:]
    if divisors and candidates[-1] != divisors[-1]:
        candidates.append(divisors[-1])  # one sample per micro-batch: the last resort
    for count in candidates:
        trial = copy.deepcopy(spec)
        trial.setdefault("compile_options", {})["_micro_batches"] = count
        traced = retrace(trial)
        used = activation_bytes(traced, {**options, "micro_batches": count}, area)
        decision = MicroBatchDecision(budget, full, used, count, batch)
        if used <= budget:
            return trial, traced, decision
    raise CompileOOM(
        f"max_activation_memory allows {budget} bytes of activations per job, but the step needs "
        f"{full} with the whole batch of {batch} and {decision.activation_bytes} even with "
        f"{decision.micro_batches} micro-batches of {batch // decision.micro_batches}; "
        "raise max_activation_memory or lower batch_size",
        {
            "activation_budget_bytes": budget,
            "full_batch_activation_bytes": full,
            "smallest_activation_bytes": decision.activation_bytes,
            "micro_batches_tried": candidates,
        },
    )
