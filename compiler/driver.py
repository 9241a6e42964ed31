"""`compile_job`: the entry point compile workers call, and `min_region_for`.

spec (a JobSpec dump) + uploaded files -> trace (always in a sandbox: user files and built-ins
alike, since a built-in's size comes from the tenant's kwargs) -> op check -> plan (fusion,
sizing, memory, placement) -> artifact in the cache. A cache hit never starts a sandbox.
"""

from __future__ import annotations

import copy
import math
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compiler import COMPILER_VERSION
from compiler import cache as compile_cache
from compiler.arch import get_arch_info, normalize_arch
from compiler.errors import (
    ArtifactCorrupt,
    CompileError,
    CompileOOM,
    InternalCompileError,
    InvalidSpec,
    UnsupportedOperator,
    error_from_dict,
)
from compiler.integrity import artifact_digest, quarantine, verify_artifact
from compiler.manifest import build_manifest, build_summary
from compiler.plan_options import PlanOptions
from compiler.sandbox.limits import SandboxLimits

TYPE_CHECKING = False
if TYPE_CHECKING:
    from compiler.cache import IndexEntry
    from compiler.passes.recompute import RecomputeReport
    from sam_domain.compile import CompileSummary, TraceInfo
    from sam_domain.ir import IrGraph


@dataclass(frozen=True)
class CompileResult:
    """What a compile produced, as `compile_job` returns it: the artifact (None for
    validate_only), its content key, whether the cache had it, the seconds it took and its
    typed summary (the compile worker hands it on as a `sam_domain.compile.CompiledArtifact`)."""

    artifact_dir: Path | None
    cache_key: str
    cache_hit: bool
    seconds: float
    summary: CompileSummary


def compile_job(
    spec: dict[str, Any],
    files: dict[str, str],
    *,
    region: tuple[int, int],
    cache_dir: Path,
    arch: str | None = None,
    mode: str | None = None,
    limits: SandboxLimits | None = None,
    namespace: str | None = None,
    project: Path | None = None,
    datasets: dict[str, Path] | None = None,
) -> CompileResult:
    """Compile spec's training step for a rows x cols region; raises CompileError subclasses.

    mode: "train" / "compile_only" (full compile) or "validate_only" (front end, op check and
    memory check, no placement, no artifact); default spec["mode"].
    namespace: whose cache this is (SAM passes the tenant): entries and artifacts of another
    namespace are never reused, so `cache_hit` says nothing about what other tenants compiled.
    project: the job's project folder (read-only at /job/src in the sandbox; the spec's
    `project` digest names it, so it is part of the cache key).
    datasets: {name: host folder} bound read-only at /datasets/NAME in the trace's sandbox: a
    runner job's script reads its first batch there (docs/runner.md); their resolved folders are
    part of the cache key.
    A cached artifact is checked against its hashes first; a corrupt one is set aside and
    recompiled.
    """
    start = time.perf_counter()
    mode = mode or spec.get("mode") or "train"
    validate = mode == "validate_only"
    region = (int(region[0]), int(region[1]))
    arch_name = _arch_name(spec, arch)
    _check_spec(spec, files, region)
    where = compile_cache.dataset_fingerprint(datasets)
    req_key = compile_cache.request_key(
        spec, files, region, arch_name, "validate" if validate else "compile", namespace, where
    )
    entry = compile_cache.read_index(cache_dir, req_key)
    if entry is not None and _intact(entry, cache_dir):
        return _hit(entry, cache_dir, start)
    try:
        return _compile(
            spec,
            files,
            region,
            Path(cache_dir),
            arch_name,
            validate,
            limits,
            (req_key, namespace),
            start,
            project,
            datasets,
        )
    except (UnsupportedOperator, CompileOOM) as exc:
        # Deterministic verdicts are cached too, so a resubmitted job fails in milliseconds.
        compile_cache.write_index(cache_dir, req_key, {"error": exc.to_dict()})
        raise
    except CompileError:
        raise
    except Exception as exc:  # a compiler bug must still fail the job cleanly
        raise InternalCompileError(
            f"internal compiler error: {type(exc).__name__}: {exc}; "
            "please report it with your job spec"
        ) from exc


def _arch_name(spec: dict[str, Any], arch: str | None) -> str:
    try:
        return normalize_arch(arch or (spec.get("compile_options") or {}).get("target_device"))
    except ValueError as exc:
        raise InvalidSpec(str(exc)) from exc


def _intact(entry: IndexEntry, cache_dir: Path) -> bool:
    """Whether a cache entry's artifact (if any) still matches its hashes; a corrupt one is
    set aside so that it is rebuilt."""
    artifact = entry.get("artifact")
    if not artifact:
        return True
    target = Path(cache_dir) / artifact
    try:
        verify_artifact(target, entry.get("digest"))
    except ArtifactCorrupt:
        quarantine(target)
        return False
    return True


def _hit(entry: IndexEntry, cache_dir: Path, start: float) -> CompileResult:
    if entry.get("error"):
        raise error_from_dict(entry["error"])
    seconds = time.perf_counter() - start
    summary: CompileSummary = entry["summary"].copy()  # every entry but an error's keeps one
    summary["cache_hit"], summary["seconds"] = True, seconds
    artifact = entry.get("artifact")
    target = Path(cache_dir) / artifact if artifact else None
    return CompileResult(target, entry["cache_key"], True, seconds, summary)


def _compile(
    spec: dict[str, Any],
    files: dict[str, str],
    region: tuple[int, int],
    cache_dir: Path,
    arch_name: str,
    validate: bool,
    limits: SandboxLimits | None,
    keys: tuple[str, str | None],
    start: float,
    project: Path | None = None,
    datasets: dict[str, Path] | None = None,
) -> CompileResult:
    from compiler.planner import compile_options, plan_compile

    req_key, namespace = keys
    graph, tensors, trace_info = trace_job(spec, files, limits, namespace, project, datasets)
    options = compile_options(spec)
    graph, recomputed = _recomputed(graph, options)
    budget = None
    if options.get("activation_budget_bytes") and not options.get("streaming"):
        from compiler.micro_batching import fit_budget

        def retrace(trial: dict[str, Any]) -> IrGraph:
            return _recomputed(
                trace_job(trial, files, limits, namespace, project, datasets)[0], options
            )[0]

        spec, graph, budget = fit_budget(spec, graph, options, region[0] * region[1], retrace)
        if budget.micro_batches > 1:
            graph, tensors, trace_info = trace_job(
                spec, files, limits, namespace, project, datasets
            )
            options = compile_options(spec)
            graph, recomputed = _recomputed(graph, options)
    key = compile_cache.content_key(graph, tensors, options, arch_name, region, namespace)
    arch = get_arch_info(arch_name)
    target = compile_cache.artifact_dir(cache_dir, key)
    if not validate and (target / "manifest.json").exists():
        if _intact({"artifact": f"artifacts/{key}"}, cache_dir):
            existing = _published(target, key)
            compile_cache.write_index(cache_dir, req_key, existing)
            return _hit(existing, cache_dir, start)
    plan = plan_compile(graph, options, arch, region, do_placement=not validate)
    seconds = time.perf_counter() - start
    summary = build_summary(plan, graph, arch, region, key, seconds, trace_info)
    if recomputed is not None:
        summary["activation_recomputation"] = recomputed.to_summary()
    if budget is not None:
        section = budget.to_summary()
        section["cycles_per_micro_batch"] = plan.cycles_per_step // budget.micro_batches
        summary["activation_budget"] = section
    if validate:
        compile_cache.write_index(
            cache_dir, req_key, {"cache_key": key, "artifact": None, "summary": summary}
        )
        return CompileResult(None, key, False, seconds, summary.copy())
    _assign_kernels(graph, plan)
    manifest = build_manifest(spec, plan, graph, arch, region, key, summary)
    from compiler.artifact import write_artifact

    write_artifact(target, manifest, graph, tensors)
    published = _published(target, key)
    compile_cache.write_index(cache_dir, req_key, published)
    seconds = time.perf_counter() - start
    summary = published["summary"].copy()
    summary["cache_hit"], summary["seconds"] = False, seconds
    return CompileResult(target, key, False, seconds, summary)


def _recomputed(graph: IrGraph, options: PlanOptions) -> tuple[IrGraph, RecomputeReport | None]:
    """(graph, RecomputeReport or None): with compile_options.activation_recomputation, the
    backward recomputes the activations kept only for it (`compiler.passes.recompute`)."""
    if not options.get("recompute"):
        return graph, None
    from compiler.passes.recompute import recompute_activations

    return recompute_activations(graph)


def _published(target: Path, key: str) -> IndexEntry:
    """The index entry of a published artifact: its summary and its digest (also kept in the
    summary, which SAM stores with the job, so a wafer worker can check what it loads)."""
    import json

    digest = artifact_digest(target)
    summary: CompileSummary = json.loads((target / "manifest.json").read_text()).get("summary", {})
    summary["artifact_sha256"] = digest
    return {"cache_key": key, "artifact": f"artifacts/{key}", "summary": summary, "digest": digest}


def _assign_kernels(graph: IrGraph, plan: Any) -> None:
    kernel_of = {n: p.kernel.id for p in plan.kernels for n in p.kernel.nodes}
    for node in graph["nodes"]:
        node["kernel"] = kernel_of.get(node["name"])


_TRACES: OrderedDict[str, tuple[IrGraph, dict[str, np.ndarray], TraceInfo]] = OrderedDict()


def trace_job(
    spec: dict[str, Any],
    files: dict[str, str],
    limits: SandboxLimits | None = None,
    namespace: str | None = None,
    project: Path | None = None,
    datasets: dict[str, Path] | None = None,
) -> tuple[IrGraph, dict[str, np.ndarray], TraceInfo]:
    """(graph, initial tensors, info), traced in a sandbox (`compiler.sandbox.run_trace`).

    The last few traces are remembered by a hash of the traced spec sections and files, so
    compiling one model for several regions or options traces it once per process.
    """
    where = compile_cache.dataset_fingerprint(datasets)
    key = compile_cache.trace_key(spec, files, namespace, where)
    if (spec.get("model") or {}).get("factory"):  # what the factory may name is part of it
        key += ":" + ",".join((limits or SandboxLimits()).factory_packages)
    if key in _TRACES:
        _TRACES.move_to_end(key)
        graph, tensors, info = _TRACES[key]
        return copy.deepcopy(graph), tensors, info.copy()
    graph, tensors, info = _trace_uncached(spec, files, limits, project, datasets)
    _TRACES[key] = (copy.deepcopy(graph), tensors, info.copy())
    while len(_TRACES) > 8:
        _TRACES.popitem(last=False)
    return graph, tensors, info


def _trace_uncached(
    spec: dict[str, Any],
    files: dict[str, str],
    limits: SandboxLimits | None,
    project: Path | None = None,
    datasets: dict[str, Path] | None = None,
) -> tuple[IrGraph, dict[str, np.ndarray], TraceInfo]:
    from compiler.sandbox import run_trace

    traced: tuple[IrGraph, dict[str, np.ndarray], TraceInfo] = run_trace(
        spec, files, limits, project=project, datasets=datasets
    )
    return traced


def _check_spec(spec: dict[str, Any], files: dict[str, str], region: tuple[int, int]) -> None:
    """invalid_spec for what can be told without running anything."""
    if region[0] < 1 or region[1] < 1:
        raise InvalidSpec(f"region {region} must have at least one row and one column")
    model = spec.get("model") or {}
    needed = [model.get("file")] if not model.get("builtin") else []
    data = spec.get("data") or {}
    if data.get("source") == "file":
        needed.append(data.get("file") or model.get("file"))
        if not needed[-1]:
            raise InvalidSpec("data.source 'file' needs data.file or a model.file with make_batch")
    missing = [n for n in needed if n and n not in files]
    if missing:
        raise InvalidSpec(
            f"the spec names {missing} but they were not uploaded; "
            "list them next to job.yaml so `sam submit` uploads them"
        )


def min_region_for(
    spec: dict[str, Any],
    files: dict[str, str],
    arch: str | None = None,
    limits: SandboxLimits | None = None,
) -> tuple[int, int]:
    """The smallest near-square region whose memory fits the model (traces the model once)."""
    from compiler.planner import compile_options, smallest_region

    arch_info = get_arch_info(_arch_name(spec, arch))
    graph, _, _ = trace_job(spec, files, limits)
    options = compile_options(spec)
    side = max(1, math.isqrt(max(1, _total_bytes_estimate(graph) // arch_info.sram_bytes)))
    found = smallest_region(graph, options, arch_info, (side, side))
    if found is None:
        raise InvalidSpec(
            "the model does not fit on a whole wafer in this execution mode; "
            "use execution_mode: weight_streaming"
        )
    return found


def _total_bytes_estimate(graph: IrGraph) -> int:
    from compiler.ir import tensor_bytes

    return sum(tensor_bytes(i["shape"], i["dtype"]) for i in graph["inputs"])


__all__ = ["CompileResult", "compile_job", "min_region_for", "trace_job", "COMPILER_VERSION"]
