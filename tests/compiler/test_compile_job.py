"""compile_job end to end: artifacts, the cache, validate_only, compile_oom, weight streaming."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from compiler import compile_job, load_artifact, min_region_for
from compiler.data import synthetic_batch
from compiler.errors import CompileOOM, InvalidSpec, UnsupportedOperator
from compiler.ir import node_inputs
from tests.compiler.conftest import make_spec, user_model_spec
from tests.compiler.reference_interpreter import run_steps
from tests.compiler.test_unsupported_ops import SORTING_MODEL

SMALL_MLP = {
    "data": {"input_shape": [16], "batch_size": 4},
    "model": {"kwargs": {"hidden": 16}},
    "train": {"optimizer": {"name": "adam", "lr": 1e-3}},
}
WIDE_MLP = {
    "data": {"input_shape": [784], "batch_size": 4},
    "model": {"kwargs": {"hidden": 256}},
    "train": {"optimizer": {"name": "adam", "lr": 1e-3}},
}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("compile-cache")


@pytest.fixture(scope="module")
def compiled(cache_dir: Path):
    return compile_job(make_spec("mlp", **SMALL_MLP), {}, region=(6, 5), cache_dir=cache_dir)


def test_artifact_is_placed_inside_the_region_and_fits(compiled) -> None:
    artifact = load_artifact(compiled.artifact_dir)
    manifest = artifact.manifest
    covered = np.zeros((6, 5), dtype=int)
    for kernel in manifest["kernels"]:
        r, c, h, w = kernel["rect"]
        assert h >= 1 and w >= 1 and r + h <= 6 and c + w <= 5
        covered[r : r + h, c : c + w] += 1
        assert sum(kernel["memory_per_pe"].values()) <= manifest["memory"]["limit_bytes_per_pe"]
    assert (covered == 1).all()  # disjoint rectangles that use every PE
    assert all(node["kernel"] for node in artifact.graph["nodes"])
    # Kernels come in execution order: no node reads a value from a later kernel.
    position = {k["id"]: i for i, k in enumerate(manifest["kernels"])}
    kernel_of = {n["name"]: position[n["kernel"]] for n in artifact.graph["nodes"]}
    for node in artifact.graph["nodes"]:
        assert all(kernel_of.get(ref, -1) <= kernel_of[node["name"]] for ref in node_inputs(node))
    stateful = {
        i["name"]
        for i in manifest["inputs"]
        if i["role"] in ("param", "buffer", "opt_state", "constant")
    }
    assert set(artifact.tensors) == stateful
    assert manifest["estimated_cycles_per_step"] > 0 and manifest["flops_per_step"] > 0
    assert compiled.summary["memory"]["by_category"]["weights"] > 0


def test_second_identical_compile_is_a_fast_cache_hit(compiled, cache_dir: Path) -> None:
    start = time.perf_counter()
    again = compile_job(make_spec("mlp", **SMALL_MLP), {}, region=(6, 5), cache_dir=cache_dir)
    elapsed = time.perf_counter() - start
    assert again.cache_hit and elapsed < 0.05
    assert again.artifact_dir == compiled.artifact_dir and again.cache_key == compiled.cache_key


def test_changed_option_or_region_is_a_miss(compiled, cache_dir: Path) -> None:
    changed = make_spec("mlp", **SMALL_MLP, compile_options={"max_activation_memory": 40000})
    result = compile_job(changed, {}, region=(6, 5), cache_dir=cache_dir)
    assert not result.cache_hit and result.cache_key != compiled.cache_key
    other_region = compile_job(
        make_spec("mlp", **SMALL_MLP), {}, region=(5, 6), cache_dir=cache_dir
    )
    assert not other_region.cache_hit and other_region.cache_key != compiled.cache_key


def test_optimizer_offload_keeps_optimizer_state_off_the_wafer(compiled, cache_dir: Path) -> None:
    spec = make_spec("mlp", **SMALL_MLP, compile_options={"optimizer_state_offload": True})
    result = compile_job(spec, {}, region=(6, 5), cache_dir=cache_dir)
    kernels = result.summary["kernels"]
    assert all(k["memory_per_pe"]["optimizer"] == 0 for k in kernels)
    assert any(k["memory_per_pe"]["optimizer"] > 0 for k in compiled.summary["kernels"])


def test_validate_only_checks_memory_without_an_artifact(tmp_path: Path) -> None:
    result = compile_job(
        make_spec("mlp", **SMALL_MLP), {}, region=(6, 5), cache_dir=tmp_path, mode="validate_only"
    )
    assert result.artifact_dir is None
    assert result.summary["memory"]["peak_bytes_per_pe"] <= 48 * 1024
    assert not (tmp_path / "artifacts").exists()


def test_model_too_large_for_region_is_compile_oom_with_a_region_that_fits(tmp_path: Path) -> None:
    spec = make_spec("mlp", **WIDE_MLP)
    with pytest.raises(CompileOOM) as info:
        compile_job(spec, {}, region=(8, 8), cache_dir=tmp_path)
    details = info.value.details
    start = time.perf_counter()
    with pytest.raises(CompileOOM) as again:  # the verdict is cached
        compile_job(spec, {}, region=(8, 8), cache_dir=tmp_path)
    assert time.perf_counter() - start < 0.05 and again.value.details == details
    assert set(details["bytes_per_pe"]) == {
        "weights",
        "gradients",
        "optimizer",
        "activations",
        "reserve",
    }
    assert details["needed_bytes_per_pe"] > details["limit_bytes_per_pe"] == 48 * 1024
    assert details["kernel"] in info.value.message and "bytes/PE" in info.value.message
    assert details["weight_streaming_fits"] and "weight_streaming" in info.value.message
    rows, cols = details["smallest_region"]["rows"], details["smallest_region"]["cols"]
    assert rows * cols > 64
    fitted = compile_job(spec, {}, region=(rows, cols), cache_dir=tmp_path, mode="validate_only")
    assert fitted.summary["memory"]["peak_bytes_per_pe"] <= 48 * 1024
    square = min_region_for(spec, {})
    assert compile_job(spec, {}, region=square, cache_dir=tmp_path, mode="validate_only").summary
    with pytest.raises(CompileOOM):  # and it is the smallest: one row and column fewer fails
        compile_job(spec, {}, region=(square[0] - 1, square[1] - 1), cache_dir=tmp_path)
    streaming = make_spec("mlp", **WIDE_MLP, compile_options={"execution_mode": "weight_streaming"})
    result = compile_job(streaming, {}, region=(8, 8), cache_dir=tmp_path)
    manifest = load_artifact(result.artifact_dir).manifest
    assert manifest["execution_mode"] == "weight_streaming"
    assert manifest["weight_streaming"]["streamed_bytes_per_step"] > 0
    assert all(k["memory_per_pe"]["optimizer"] == 0 for k in manifest["kernels"])


def test_user_model_compiles_in_the_sandbox_and_errors_cross_it(tmp_path: Path) -> None:
    from tests.compiler.test_frontend_equivalence import USER_MODEL, eager_reference

    spec = user_model_spec(model={"kwargs": {"hidden": 8}})
    files = {"model.py": USER_MODEL}
    result = compile_job(spec, files, region=(8, 8), cache_dir=tmp_path)
    artifact = load_artifact(result.artifact_dir)
    assert result.summary["sandboxed"]
    # What came back through the sandbox still trains exactly like PyTorch eager.
    batches = [synthetic_batch(spec, k) for k in range(2)]
    losses, params = run_steps(artifact.graph, artifact.tensors, batches)
    want_losses, want_params = eager_reference(spec, files, 2)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    np.testing.assert_allclose(
        params["fc2.weight"], want_params["fc2.weight"], rtol=1e-5, atol=1e-6
    )
    assert result.summary["network_isolation"] == "netns+seccomp"
    with pytest.raises(UnsupportedOperator) as info:
        compile_job(
            user_model_spec(), {"model.py": SORTING_MODEL}, region=(8, 8), cache_dir=tmp_path
        )
    assert "model.py:12" in info.value.message


def test_missing_file_is_invalid_spec(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpec, match="model.py"):
        compile_job(user_model_spec(), {}, region=(4, 4), cache_dir=tmp_path)


_WRITER = """
import sys, numpy as np
from pathlib import Path
from compiler.artifact import write_artifact
graph = {"format": "sam-ir/1", "inputs": [], "nodes": [], "outputs": []}
for _ in range(20):
    write_artifact(Path(sys.argv[1]), {"format": "sam-artifact/1", "kernels": []}, graph,
                   {"w": np.arange(1000.0)})
"""


def test_concurrent_writers_of_one_key_leave_a_complete_artifact(tmp_path: Path) -> None:
    target = tmp_path / "artifacts" / "same-key"
    root = Path(__file__).resolve().parents[2]
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(target)], cwd=root) for _ in range(2)
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    artifact = load_artifact(target)
    assert artifact.tensors["w"].shape == (1000,)
    assert [p.name for p in target.parent.iterdir()] == ["same-key"]  # no temp dirs left


def test_placement_keeps_communicating_kernels_close(compiled) -> None:
    from compiler.passes.fusion import Kernel
    from compiler.planner import PlannedKernel, wirelength

    artifact = load_artifact(compiled.artifact_dir)
    kernels = artifact.manifest["kernels"]

    def planned(rects: list) -> list:
        return [
            PlannedKernel(Kernel(k["id"], k["op"], k["nodes"]), None, tuple(r))
            for k, r in zip(kernels, rects, strict=True)
        ]

    ours = wirelength(artifact.graph, planned([k["rect"] for k in kernels]))
    assert ours == compiled.summary["wirelength_hops"] > 0
    rng = np.random.default_rng(0)
    shuffled = [
        wirelength(artifact.graph, planned(list(rng.permutation([k["rect"] for k in kernels]))))
        for _ in range(20)
    ]
    assert ours <= np.mean(shuffled)
