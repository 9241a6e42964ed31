"""What a compile depends on (one `CompileKey`) and what it gives back (`CompiledArtifact`, whose
`CompileSummary` is the JSON SAM stores with the job and returns as the report's `compile`).

The server hashes a `CompileKey` to know which queued jobs can share one artifact
(`Job.compile_hash`); the compiler's cache keys its request index on the same spec sections
(`COMPILE_SECTIONS`). Run options, data loading, names, priorities and time limits are not
compile inputs: jobs that differ only in them share one compiled program."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, NotRequired, TypedDict

from sam_domain.ir import IrInput, IrOutput, ManifestKernel
from sam_domain.json_value import JsonValue

COMPILE_SECTIONS = ("model", "data", "train", "compile_options")
"""The job spec's sections that change the compiled step."""


def compile_sections(spec: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """The compile sections of a spec (as JSON: the API's dump or the stored spec). A runner
    job's (docs/runner.md) also holds its entry (script and args: the script builds the model)
    and its epochs, which its compiled learning-rate schedule spans."""
    sections = {name: spec.get(name) for name in COMPILE_SECTIONS}
    if spec.get("entry"):
        run = spec.get("run_options")
        run = run if isinstance(run, dict) else {}  # the schema makes it an object or null
        sections["entry"] = spec.get("entry")
        sections["epochs"] = [run.get("num_epochs"), run.get("steps_per_epoch")]
    return sections


def compile_inputs(spec: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """Every part of a spec a compile reads: its sections, the mode and the project's digest
    (the region's shape, computed from `resources`, is the key's own field)."""
    return {**compile_sections(spec), "mode": spec.get("mode"), "project": spec.get("project")}


@dataclass(frozen=True)
class CompileKey:
    """One compile's identity: equal keys compile to the same program, so a queued job can take
    an artifact compiled for another. The tenant is part of it: another tenant's identical job
    compiles afresh, so reuse reveals nothing across tenants."""

    inputs: Mapping[str, JsonValue]  # compile_inputs(spec)
    shape: tuple[int, int]  # the region's rows and cols
    files: Mapping[str, str]  # the uploaded sources by name
    tenant: int | None = None

    @classmethod
    def of(
        cls,
        spec: Mapping[str, JsonValue],
        shape: tuple[int, int],
        files: Mapping[str, str],
        tenant: int | None = None,
    ) -> CompileKey:
        return cls(compile_inputs(spec), (int(shape[0]), int(shape[1])), files, tenant)

    def digest(self) -> str:
        """The key as 64 hex digits (the `compile_hash` column)."""
        body = {
            "inputs": dict(self.inputs),
            "shape": list(self.shape),
            "files": dict(self.files),
            "tenant": self.tenant,
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class TraceInfo(TypedDict):
    """What the trace reports about where the user's code ran (`compiler.sandbox.run_trace`):
    always in a sandbox, cut off from the network. Its keys sit at the top of the summary."""

    sandboxed: bool
    network_isolation: str


class SummaryRegion(TypedDict):
    rows: int
    cols: int


class KernelSummary(TypedDict):
    """One kernel of the plan: its rect on the region (null for validate_only), FLOPs, how many
    graph nodes it fuses, its bytes per PE by category and its estimated cycles."""

    id: str
    op: str
    rect: list[int] | None
    flops: int
    nodes: int
    memory_per_pe: dict[str, int]
    est_cycles: int


class MemorySummary(TypedDict):
    """The peak kernel's bytes per PE against the limit (the SRAM less the reserve)."""

    peak_bytes_per_pe: int
    limit_bytes_per_pe: int
    sram_bytes_per_pe: int
    reserve_bytes_per_pe: int
    peak_kernel: str
    by_category: dict[str, int]


class StreamingSummary(TypedDict):
    enabled: bool
    streamed_bytes_per_step: int
    host_cycles_per_step: int


class OffloadSummary(TypedDict):
    host_bytes_per_step: int
    host_cycles_per_step: int


class RecomputeSummary(TypedDict):
    """`activation_recomputation`: what the recompute pass did (compiler.passes.recompute)."""

    recomputed_values: int
    stashed_bytes_freed: int
    copied_nodes: int


class BudgetSummary(TypedDict):
    """`activation_budget`: how the batch was cut to fit the budget (compiler.micro_batching)."""

    budget_bytes: int
    strategy: Literal["micro_batching", "none"]
    micro_batches: int
    micro_batch_size: int
    activation_bytes: int
    full_batch_activation_bytes: int
    cycles_per_micro_batch: NotRequired[int]  # added by the driver once the plan is known


class CompileSummary(TraceInfo):
    """The compiler's summary of one compile (`compiler.manifest.build_summary`), as SAM stores
    it with the job (`Job.compile_summary`, capped by `services.bounds.cap_json`) and the API
    returns it (`GET /jobs/{id}/report`'s `compile`). The trace's `TraceInfo` is its own part,
    spread at the top level as it always was; the optional keys are added on the way: the
    activation sections by options that asked for them, `seconds` by a finished compile or a
    cache hit, `artifact_sha256` once published, `artifact_path` by the compile worker."""

    cache_key: str
    arch: str
    region: SummaryRegion
    execution_mode: Literal["weight_streaming", "pipelined"]
    kernels: list[KernelSummary]
    num_kernels: int
    num_nodes: int
    num_params: int
    memory: MemorySummary
    estimated_cycles_per_step: int
    estimated_seconds_per_step: float
    flops_per_step: int
    weight_streaming: StreamingSummary
    wirelength_hops: int
    optimizer_offload: OffloadSummary
    compile_seconds: float
    cache_hit: bool
    activation_recomputation: NotRequired[RecomputeSummary]
    activation_budget: NotRequired[BudgetSummary]
    seconds: NotRequired[float]
    artifact_sha256: NotRequired[str]
    artifact_path: NotRequired[str | None]


class MemoryMapEntry(TypedDict):
    """Where one symbol lives in each PE of its kernel's rect (after the reserve)."""

    symbol: str
    category: str
    offset: int
    bytes_per_pe: int


class Manifest(TypedDict):
    """An artifact's manifest.json as the compiler writes it (`compiler.manifest.build_manifest`;
    `compiler.artifact` adds `files`, every other file's SHA-256, when it writes it)."""

    format: str
    compiler_version: str
    torch_version: str
    cache_key: str
    arch: str
    region: SummaryRegion
    execution_mode: Literal["weight_streaming", "pipelined"]
    fp16: bool
    optimizer_state_offload: bool
    micro_batches: int
    loss_scaling: bool
    batch_size: int
    kernels: list[ManifestKernel]
    memory: MemorySummary
    memory_map: dict[str, list[MemoryMapEntry]]
    estimated_cycles_per_step: int
    flops_per_step: int
    weight_streaming: StreamingSummary
    inputs: list[IrInput]
    outputs: list[IrOutput]
    model: JsonValue
    data: JsonValue
    train: JsonValue
    run_options: JsonValue
    summary: CompileSummary
    files: NotRequired[dict[str, str]]


@dataclass(frozen=True)
class CompiledArtifact:
    """A finished compile as the compile worker reports it to the services (or as a reused
    artifact is recorded): the artifact's path under the store (or the cache key of a
    validate-only compile), whether the compiler's cache had it, the seconds it took, and the
    compiler's summary (memory plan, op counts, `artifact_sha256`, `artifact_path`)."""

    cache_key: str
    cache_hit: bool
    seconds: float
    summary: CompileSummary | None = field(default=None)
