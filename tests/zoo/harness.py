"""The model-zoo harness: compile each `examples/zoo/<name>/` job with the real compiler, run its
steps on the wse_sim runtime and compare the losses with PyTorch eager on the same batches.

Shared by `tests/zoo/test_zoo.py` and `benchmarks/model_zoo.py`. A zoo folder is a user-level
input: `job.yaml` (a normal SAM job spec) and `model.py` (plus any other files it imports). The
verdict of one model is `train_match` (every step's loss within RTOL of eager), `unsupported`
(the compile failed with unsupported_op / compile_oom naming the op or kernel), `mismatch` or
`error`. A match only counts when training moves eager's losses by more than RTOL (against the
same steps at learning rate 0), so that the comparison really checks the updates.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

import wse_sim.runtime as rt
from compiler import compile_job
from compiler.artifact import load_artifact
from compiler.artifact_check import check_artifact, check_files
from compiler.data import normalize_batch, synthetic_batch
from compiler.errors import CompileError, CompileOOM, UnsupportedOperator
from compiler.model_source import ModelCall, build_model, load_batch_function, user_traceback
from compiler.sandbox import SandboxLimits
from compiler.training import OptimizerConfig, compute_loss
from sam_server.config import WorkerSettings
from sam_server.schemas.job_spec import JobSpec
from wse_sim import Wafer

ROOT = Path(__file__).resolve().parents[2]
ZOO_DIR = ROOT / "examples" / "zoo"
EXPECTED_FILE = Path(__file__).with_name("expected.yaml")
# Architectures not in the zoo, each a job spec built by model.factory (benchmarks/model_zoo.py
# --unseen; tests/zoo/test_unseen.py runs a few).
UNSEEN_FILE = Path(__file__).with_name("unseen.yaml")
RTOL = 1e-3
JOB_MEMORY_BYTES: int = WorkerSettings.model_fields["wafer_job_memory_bytes"].default
MIN_STEPS = 5
# The CUDA build of torch maps about 3.3 GB of address space at import (timm about 3.6 GB), and
# tracing a transformers model on a loaded machine takes minutes: the zoo compiles with 8 GB and
# wider time limits than the sandbox's defaults (a user job's own limits are the operator's).
ZOO_LIMITS = SandboxLimits(cpu_seconds=900, memory_bytes=8 * 1024**3, wall_seconds=1200.0)


@dataclass
class ZooJob:
    """One zoo folder: its name, validated spec (the worker's form) and uploaded files."""

    name: str
    spec: dict[str, Any]
    files: dict[str, str]

    @property
    def steps(self) -> int:
        """Steps to compare: the spec's steps (at least MIN_STEPS)."""
        run = self.spec.get("run_options") or {}
        return max(
            MIN_STEPS, int(run.get("steps_per_epoch") or 0) * int(run.get("num_epochs") or 1)
        )

    @property
    def region(self) -> tuple[int, int]:
        """The (rows, cols) region the spec asks for."""
        region = self.spec["resources"]["region"]
        return int(region["rows"]), int(region["cols"])


@dataclass
class ZooResult:
    """The verdict and figures of one model (see the module docstring)."""

    name: str
    verdict: str
    blocking_op: str | None = None
    message: str = ""
    sim_losses: list[float] = field(default_factory=list)
    torch_losses: list[float] = field(default_factory=list)
    max_rel_error: float | None = None
    buffer_rel_error: float | None = None
    # PyTorch fp32 against PyTorch fp64 on the same steps: above RTOL the model's training is
    # too ill-conditioned (BatchNorm over few values, large logits) for any fp32 comparison.
    reference_fp64_rel_error: float | None = None
    # The same for the BatchNorm running statistics (buffer_error of eager fp32 against fp64):
    # above RTOL eager's own statistics are that far from the exact ones (a BatchNorm over
    # near-constant values), so a wafer as far off is no further than eager is.
    buffer_fp64_rel_error: float | None = None
    # The wafer's losses against PyTorch fp64 on the same steps: beside the line above, it says
    # whether the wafer is further from the exact losses than eager fp32 is (not a verdict).
    sim_fp64_rel_error: float | None = None
    # Eager's losses with the learning rate at 0 against the trained ones: at or below RTOL the
    # loss comparison cannot see the updates, so a match would say nothing about the backward pass.
    training_effect: float | None = None
    compile_s: float | None = None
    sim_step_s: float | None = None
    torch_step_s: float | None = None


def zoo_names() -> list[str]:
    """Every folder of examples/zoo with a job.yaml (vision and text models alike)."""
    return sorted(p.parent.name for p in ZOO_DIR.glob("*/job.yaml"))


def load_zoo_job(name: str) -> ZooJob:
    """Read and validate examples/zoo/<name>/job.yaml; the folder's .py files are its uploads."""
    folder = ZOO_DIR / name
    raw = yaml.safe_load((folder / "job.yaml").read_text())
    spec = JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)
    files = {p.name: p.read_text() for p in sorted(folder.glob("*.py"))}
    return ZooJob(name=name, spec=spec, files=files)


def _unseen_entries() -> dict[str, Any]:
    raw = yaml.safe_load(UNSEEN_FILE.read_text()) or {}
    return {k: v for k, v in raw.items() if not k.startswith("_")}


def unseen_names() -> list[str]:
    """Every entry of tests/zoo/unseen.yaml, in the file's order."""
    return list(_unseen_entries())


def load_unseen_job(name: str) -> ZooJob:
    """tests/zoo/unseen.yaml's entry `name` as a job: its model (a factory), data and train,
    MIN_STEPS steps and a 32x32 region unless it names another; no files."""
    entry = dict(_unseen_entries()[name])
    entry.pop("<<", None)
    raw = {
        "name": f"unseen-{name}",
        "run_options": {"steps_per_epoch": MIN_STEPS},
        "resources": {"region": {"rows": 32, "cols": 32}, "time_limit": "30m"},
        **entry,
    }
    spec = JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)
    return ZooJob(name=name, spec=spec, files={})


def expected_training() -> dict[str, str]:
    """tests/zoo/expected.yaml: model -> "train" (must match eager) or the op that blocks it."""
    return dict(yaml.safe_load(EXPECTED_FILE.read_text()) or {})


def batches(job: ZooJob, steps: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (inputs, targets) of steps 0..steps-1: synthetic, or the job's own make_batch."""
    if job.spec["data"].get("source", "synthetic") == "synthetic":
        return [synthetic_batch(job.spec, k) for k in range(steps)]
    make_batch = load_batch_function(job.spec, job.files)
    size = int(job.spec["data"]["batch_size"])
    return [normalize_batch(make_batch(k, size)) for k in range(steps)]


def blocking_op(exc: CompileError) -> str:
    """The op or kernel an unsupported_op / compile_oom error names."""
    if isinstance(exc, UnsupportedOperator):
        ops = [item["op"] for item in exc.details.get("ops", [])]
        return ", ".join(dict.fromkeys(ops)) or "unknown op"
    details = exc.details
    kernel = details.get("kernel") or details.get("worst_kernel") or details.get("op")
    return f"compile_oom: {kernel}" if kernel else "compile_oom"


def compile_zoo_job(job: ZooJob, cache_dir: Path) -> tuple[Any, float]:
    """(loaded artifact, compile seconds) with the real compiler (sandboxed trace)."""
    start = time.perf_counter()
    result = compile_job(
        job.spec, job.files, region=job.region, cache_dir=cache_dir, limits=ZOO_LIMITS
    )
    artifact = load_artifact(result.artifact_dir)
    # what a wafer worker checks before it runs an artifact, with the default per-job bound:
    # every real model must pass it (shapes re-derived, kernels, SRAM and host bytes planned)
    check_files(result.artifact_dir, JOB_MEMORY_BYTES)
    rows, cols = job.region
    check_artifact(artifact, rows=rows, cols=cols, arch="wse2", max_host_bytes=JOB_MEMORY_BYTES)
    return artifact, time.perf_counter() - start


def sim_losses(artifact: Any, job: ZooJob, data: list) -> tuple[list[float], dict, float]:
    """(per-step losses, final state by name, wall seconds per step) on a wse_sim wafer."""
    rows, cols = job.region
    loaded = rt.load(artifact, Wafer("wse2", rows=rows, cols=cols), (0, 0, rows, cols), job.name)
    start = time.perf_counter()
    losses = [float(loaded.step(x, y).loss) for x, y in data]
    seconds = (time.perf_counter() - start) / len(data)
    return losses, loaded.state_dict(), seconds


def torch_losses(
    job: ZooJob, data: list, dtype: torch.dtype = torch.float32
) -> tuple[list[float], dict, float]:
    """(per-step losses, final state_dict, seconds per step) of plain PyTorch eager on the CPU,
    from the same `torch.manual_seed(seed); Net(**kwargs)` the compiler builds."""
    model = build_model(job.spec, job.files).to(dtype)
    train = job.spec["train"]
    optimizer = OptimizerConfig.from_spec(train["optimizer"]).torch_optimizer(model.parameters())
    kind = train.get("loss", "cross_entropy")
    call = ModelCall.for_spec(job.spec, model)
    losses = []
    start = time.perf_counter()
    for x, y in data:
        inputs, targets = torch.from_numpy(x), torch.from_numpy(y)
        inputs = inputs.to(dtype) if inputs.is_floating_point() else inputs
        optimizer.zero_grad()
        output = call(model, inputs, targets)
        loss = compute_loss(kind, output, targets)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.item()))
    seconds = (time.perf_counter() - start) / len(data)
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    return losses, state, seconds


def rel_error(ours: Any, ref: Any) -> float:
    """Largest |ours - ref| / max(|ref|, 1e-3) over the elements (0 for empty)."""
    a, b = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-3))) if a.size else 0.0


def buffer_error(sim_state: dict[str, Any], torch_state: dict[str, Any]) -> float:
    """The worst relative error over the floating buffers both sides keep (BatchNorm running
    statistics): they must follow torch's update, not just the losses."""
    worst = 0.0
    for name, value in sim_state.items():
        ref = torch_state.get(name)
        if ref is None or not np.issubdtype(np.asarray(ref).dtype, np.floating):
            continue
        if name.endswith(("running_mean", "running_var")):
            scale = max(float(np.max(np.abs(ref))), 1e-3)
            worst = max(worst, float(np.max(np.abs(np.asarray(value) - ref))) / scale)
    return worst


def _frozen(job: ZooJob) -> ZooJob:
    """The same job with learning rate 0: its losses are what no training at all would give."""
    spec = copy.deepcopy(job.spec)
    spec["train"]["optimizer"]["lr"] = 0.0
    return ZooJob(name=job.name, spec=spec, files=job.files)


def run_zoo_model(name: str, cache_dir: Path, unseen: bool = False) -> ZooResult:
    """Compile, simulate and compare one zoo model (or, with `unseen`, an entry of
    tests/zoo/unseen.yaml); never raises for a model's own failure."""
    job = load_unseen_job(name) if unseen else load_zoo_job(name)
    try:
        artifact, compile_s = compile_zoo_job(job, cache_dir)
    except (UnsupportedOperator, CompileOOM) as exc:
        return ZooResult(name, "unsupported", blocking_op(exc), exc.message)
    except CompileError as exc:
        return ZooResult(name, "error", None, f"{exc.kind}: {exc.message}")
    data = batches(job, job.steps)
    try:
        ours, sim_state, sim_s = sim_losses(artifact, job, data)
    except Exception as exc:  # noqa: BLE001 - a kernel's failure is this model's verdict
        where = user_traceback(exc)[-1:] or ["?"]
        return ZooResult(
            name, "error", None, f"simulator: {type(exc).__name__}: {exc} at {where[0]}"
        )
    ref, torch_state, torch_s = torch_losses(job, data)
    err = rel_error(ours, ref)
    buffers = buffer_error(sim_state, torch_state)
    exact, exact_state, _ = torch_losses(job, data, torch.float64)
    conditioning = rel_error(ref, exact)
    effect = rel_error(ref, torch_losses(_frozen(job), data)[0])
    ok = err < RTOL and buffers < RTOL and effect > RTOL and all(np.isfinite(ours))
    return ZooResult(
        name,
        "train_match" if ok else "mismatch",
        sim_losses=ours,
        torch_losses=ref,
        max_rel_error=err,
        buffer_rel_error=buffers,
        reference_fp64_rel_error=conditioning,
        buffer_fp64_rel_error=buffer_error(torch_state, exact_state),
        sim_fp64_rel_error=rel_error(ours, exact),
        training_effect=effect,
        compile_s=compile_s,
        sim_step_s=sim_s,
        torch_step_s=torch_s,
    )
