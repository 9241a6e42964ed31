"""Issue 29: the artifact that leaves the compile sandbox is untrusted input. A model.py that
patches SAM's front end inside the sandbox (or anything else that writes the artifact there)
must not get a wafer worker to run a step other than the one its graph describes.

The attack of the issue is compiled for real (the sandboxed trace); the other forgeries are
written the way the sandbox could write them, files and hashes together."""

from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from compiler import compile_job, load_artifact
from compiler.artifact_check import check_artifact, check_files
from compiler.errors import ArtifactInvalid, HostOOM
from compiler.integrity import hash_files
from compiler.ir import canonical_json
from tests.compiler.conftest import make_spec, user_model_spec
from tests.security.step_memory import traced_step_peak

GiB = 1 << 30
REGION = (8, 8)

# The issue's attack: a 2^24-row repeat declared with its input's shape, so the compile's memory
# plan sees a [1, 1] value and the wafer worker would allocate 2^24 rows (x2 for the backward).
FORGING_MODEL = """import torch
from torch import nn

import compiler.fx_to_ir as front_end

_honest = front_end._meta_shape


def _forged(node):
    if str(node.target) == "aten.repeat.default":
        return _honest(node.args[0])
    return _honest(node)


front_end._meta_shape = _forged


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 10)

    def forward(self, x):
        big = x[:1, :1].repeat(2**24, 1)
        return self.fc(x) + big.sum() * 0
"""


def _check(path: Path, bound: int = 4 * GiB, region: tuple[int, int] = REGION) -> Any:
    check_files(path, bound)
    artifact = load_artifact(path)
    return check_artifact(
        artifact, rows=region[0], cols=region[1], arch="wse2", max_host_bytes=bound
    )


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("honest")
    return Path(compile_job(make_spec("mlp"), {}, region=REGION, cache_dir=cache).artifact_dir)


def _forge(
    src: Path,
    dst: Path,
    graph: Callable[[dict[str, Any]], None] | None = None,
    manifest: Callable[[dict[str, Any]], None] | None = None,
) -> Path:
    """A copy of `src` edited as code in the sandbox could, with every hash made to match."""
    shutil.copytree(src, dst)
    data = json.loads((dst / "graph.json").read_text())
    if graph:
        graph(data)
        (dst / "graph.json").write_text(canonical_json(data))
    meta = json.loads((dst / "manifest.json").read_text())
    if manifest:
        manifest(meta)
    meta["files"] = hash_files(dst)
    (dst / "manifest.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    return dst


def test_the_planned_host_bytes_bound_what_a_step_really_holds(tmp_path: Path) -> None:
    """The plan is an upper bound of the step's numpy memory (traced), and the runtime drops
    each value after its last reader: the step holds well under the sum of all its values."""
    spec = make_spec("mlp", model={"builtin": "mlp", "kwargs": {"hidden": 128}})
    spec["data"]["batch_size"] = 256
    region = (16, 16)
    path = Path(compile_job(spec, {}, region=region, cache_dir=tmp_path).artifact_dir)
    checked = _check(path, region=region)
    artifact = load_artifact(path)
    every_value = sum(
        int(np.prod(n["shape"])) * 4 for n in artifact.graph["nodes"] if n.get("shape") is not None
    )
    step_peak = traced_step_peak(artifact, spec, region)
    state = sum(t.nbytes for t in artifact.tensors.values())
    assert state + step_peak < checked.host_bytes < 4 * every_value
    assert step_peak < 0.6 * every_value, (step_peak, every_value)


def test_the_issue_s_forged_repeat_compiles_but_is_refused_naming_the_op(tmp_path: Path) -> None:
    spec = user_model_spec()
    result = compile_job(spec, {"model.py": FORGING_MODEL}, region=REGION, cache_dir=tmp_path)
    graph = load_artifact(result.artifact_dir).graph
    repeat = next(n for n in graph["nodes"] if n["target"] == "aten.repeat.default")
    assert repeat["shape"] == [1, 1]  # the sandbox did write the lie
    with pytest.raises(ArtifactInvalid) as caught:
        _check(Path(result.artifact_dir))
    error = caught.value
    assert error.kind == "artifact_invalid"
    assert "aten.repeat.default" in error.message and "model.py:" in error.message
    assert "[16777216, 1]" in error.message and "[1, 1]" in error.message


def test_a_declared_dtype_that_is_not_the_op_s_is_refused(honest: Path, tmp_path: Path) -> None:
    def widen(graph: dict[str, Any]) -> None:
        node = next(n for n in graph["nodes"] if n["target"] == "aten.addmm.default")
        node["dtype"] = "float64"

    with pytest.raises(ArtifactInvalid, match="addmm"):
        _check(_forge(honest, tmp_path / "a", graph=widen))


def test_an_op_without_a_wafer_kernel_is_refused(honest: Path, tmp_path: Path) -> None:
    def swap(graph: dict[str, Any]) -> None:
        node = next(n for n in graph["nodes"] if n["target"] == "aten.relu.default")
        node["target"] = "aten.nonzero.default"

    with pytest.raises(ArtifactInvalid, match=r"aten\.nonzero\.default.*no|kernel"):
        _check(_forge(honest, tmp_path / "a", graph=swap))


def test_an_sram_claim_below_the_plan_is_refused(honest: Path, tmp_path: Path) -> None:
    def shrink(manifest: dict[str, Any]) -> None:
        for kernel in manifest["kernels"]:
            kernel["memory_per_pe"] = dict.fromkeys(kernel["memory_per_pe"], 0)

    with pytest.raises(
        ArtifactInvalid, match=r"kernel k\d+ claims 0 bytes per PE of \w+ but its nodes need"
    ):
        _check(_forge(honest, tmp_path / "a", manifest=shrink))


def test_kernels_outside_the_region_or_overlapping_are_refused(
    honest: Path, tmp_path: Path
) -> None:
    def outside(manifest: dict[str, Any]) -> None:
        manifest["kernels"][0]["rect"] = [0, 0, 64, 64]

    with pytest.raises(ArtifactInvalid, match="outside"):
        _check(_forge(honest, tmp_path / "a", manifest=outside))

    def overlap(manifest: dict[str, Any]) -> None:
        for kernel in manifest["kernels"]:
            kernel["rect"] = [0, 0, 2, 2]

    with pytest.raises(ArtifactInvalid, match="overlap"):
        _check(_forge(honest, tmp_path / "b", manifest=overlap))


def test_another_arch_s_artifact_is_refused(honest: Path, tmp_path: Path) -> None:
    def other(manifest: dict[str, Any]) -> None:
        manifest["arch"] = "wse3"

    with pytest.raises(ArtifactInvalid, match="compiled for wse3"):
        _check(_forge(honest, tmp_path / "a", manifest=other))


def test_initial_tensors_unlike_the_declared_inputs_are_refused(
    honest: Path, tmp_path: Path
) -> None:
    dst = _forge(honest, tmp_path / "a")
    with np.load(dst / "init.npz") as npz:
        tensors = {k: npz[k] for k in npz.files}
    name = next(iter(tensors))
    tensors[name] = np.zeros((4096, 4096), np.float32)
    np.savez(dst / "init.npz", **tensors)  # type: ignore[arg-type]
    _forge(dst, tmp_path / "b")
    with pytest.raises(ArtifactInvalid, match=f"graph input {name} .*init.npz holds"):
        _check(tmp_path / "b")


def test_a_zip_bomb_init_is_refused_before_numpy_reads_it(honest: Path, tmp_path: Path) -> None:
    dst = _forge(honest, tmp_path / "a")
    with zipfile.ZipFile(dst / "init.npz", "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("p0.npy", "w", force_zip64=True) as member:
            chunk = bytes(1 << 20)
            for _ in range(64):
                member.write(chunk)
    with pytest.raises(HostOOM, match="64.0 MiB"):
        check_files(dst, 16 * 1024**2)


def test_a_step_planned_past_the_job_bound_fails_host_oom(honest: Path) -> None:
    with pytest.raises(HostOOM) as caught:
        _check(honest, bound=64 * 1024)
    assert caught.value.kind == "host_oom"
    assert "SAM_WAFER_JOB_MEMORY_BYTES" in caught.value.message
