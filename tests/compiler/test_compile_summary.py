"""The compile summary SAM stores with a job and returns as the report's `compile`
(docs/contract.md): typed as `sam_domain.compile.CompileSummary`, with the trace's `TraceInfo`
as its own part, its JSON keeps the keys and shape it had as a string-keyed dict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler import compile_job, load_artifact
from sam_domain.compile import CompileSummary, Manifest, TraceInfo
from sam_server.services.bounds import cap_json
from tests.compiler.conftest import make_spec
from tests.compiler.test_compile_job import SMALL_MLP

# A full compile's summary keys before it was typed (main at 8ca3e8b), as stored and returned.
KEYS_BEFORE = {
    "arch",
    "artifact_sha256",
    "cache_hit",
    "cache_key",
    "compile_seconds",
    "estimated_cycles_per_step",
    "estimated_seconds_per_step",
    "execution_mode",
    "flops_per_step",
    "kernels",
    "memory",
    "network_isolation",
    "num_kernels",
    "num_nodes",
    "num_params",
    "optimizer_offload",
    "region",
    "sandboxed",
    "seconds",
    "weight_streaming",
    "wirelength_hops",
}
KERNEL_KEYS = {"id", "op", "rect", "flops", "nodes", "memory_per_pe", "est_cycles"}
MEMORY_KEYS = {
    "peak_bytes_per_pe",
    "limit_bytes_per_pe",
    "sram_bytes_per_pe",
    "reserve_bytes_per_pe",
    "peak_kernel",
    "by_category",
}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("summary-cache")


@pytest.fixture(scope="module")
def summary(cache_dir: Path) -> CompileSummary:
    return compile_job(
        make_spec("mlp", **SMALL_MLP), {}, region=(6, 5), cache_dir=cache_dir
    ).summary


def test_summary_keeps_its_keys_and_round_trips_through_json(summary: CompileSummary) -> None:
    assert set(summary) == KEYS_BEFORE
    assert set(summary["kernels"][0]) == KERNEL_KEYS
    assert set(summary["memory"]) == MEMORY_KEYS
    assert summary["region"] == {"rows": 6, "cols": 5}
    assert json.loads(json.dumps(summary)) == summary
    assert cap_json(summary) == summary  # what the database stores and the API returns
    assert set(summary) <= set(CompileSummary.__annotations__)  # every key it has is typed


def test_trace_info_is_its_own_part_at_the_top_level(summary: CompileSummary) -> None:
    assert set(TraceInfo.__annotations__) == {"sandboxed", "network_isolation"}
    trace = {k: summary[k] for k in TraceInfo.__annotations__}
    assert trace == {"sandboxed": True, "network_isolation": "netns+seccomp"}


def test_cache_hit_and_manifest_carry_the_same_summary(
    summary: CompileSummary, cache_dir: Path
) -> None:
    hit = compile_job(make_spec("mlp", **SMALL_MLP), {}, region=(6, 5), cache_dir=cache_dir)
    assert hit.cache_hit and hit.summary["cache_hit"] is True
    assert hit.summary["seconds"] == hit.seconds
    timings = ("cache_hit", "seconds")
    assert {k: v for k, v in hit.summary.items() if k not in timings} == {
        k: v for k, v in summary.items() if k not in timings
    }
    manifest = load_artifact(hit.artifact_dir).manifest
    assert set(manifest) == set(Manifest.__annotations__)  # what is written is what is typed
    stored = dict(manifest["summary"], artifact_sha256=summary["artifact_sha256"])
    assert stored == {k: v for k, v in summary.items() if k != "seconds"}
