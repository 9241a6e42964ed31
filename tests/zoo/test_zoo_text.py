"""The transformer zoo (examples/zoo: transformers and timm models) trains like PyTorch eager.

Each folder is compiled by the real compiler (the sandboxed front end, op check, planner), run
for STEPS steps on a simulated wafer region and compared, loss by loss, with plain PyTorch eager
on the same synthetic batches (tests/runtime/conftest.py's reference). A model that cannot run
must fail at compile with `unsupported_op` naming the op; BLOCKED lists those (none today).
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import yaml

if not os.getenv("CI"):  # in CI the zoo extra is installed, and a missing library must fail
    pytest.importorskip("transformers", reason="the model zoo needs the `zoo` extra")
    pytest.importorskip("timm", reason="the model zoo needs the `zoo` extra")
import torch  # noqa: E402

from compiler.data import synthetic_batch  # noqa: E402
from compiler.sandbox import SandboxLimits  # noqa: E402
from sam_server.schemas.job_spec import JobSpec  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ZOO = ROOT / "examples" / "zoo"
STEPS = 5
RTOL = 1e-3
TEXT_MODELS = [
    "gpt2",
    "bert_mlm",
    "t5",
    "bart",
    "llama",
    "mistral",
    "qwen2",
    "gpt_neo",
    "opt",
    "distilbert",
    "vit_tiny",
    "deit_tiny",
    "mlp_mixer",
]
BLOCKED: dict[str, str] = {}  # model -> the op that stops it (it must fail with unsupported_op)
# The CUDA build of torch maps about 3.3 GB of address space at import (timm about 3.6 GB), so
# the sandbox's default 4 GB RLIMIT_AS leaves no room to trace; the zoo compiles with 8 GB.
ZOO_LIMITS = SandboxLimits(cpu_seconds=900, memory_bytes=8 * 1024**3, wall_seconds=1200.0)
_CACHE = Path(tempfile.mkdtemp(prefix="sam-zoo-text-"))


def _module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The eager reference of the runtime tests (per-step losses of plain PyTorch on the CPU).
_REFERENCE = _module(ROOT / "tests" / "runtime" / "conftest.py", "sam_runtime_reference")


def zoo_job(name: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(validated spec, uploaded files) of examples/zoo/<name>, as `sam submit` would send them."""
    folder = ZOO / name
    raw = yaml.safe_load((folder / "job.yaml").read_text())
    spec = JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)
    files = {p.name: p.read_text() for p in folder.glob("*.py")}
    return spec, files


def wafer_losses(spec: dict[str, Any], files: dict[str, str], steps: int) -> np.ndarray:
    """Compile with the real compiler and run `steps` steps on a simulated WSE-2 region."""
    import wse_sim.runtime as rt
    from compiler import compile_job
    from compiler.artifact import load_artifact
    from wse_sim import Wafer

    region = spec["resources"]["region"]
    shape = (int(region["rows"]), int(region["cols"]))
    result = compile_job(spec, files, region=shape, cache_dir=_CACHE, limits=ZOO_LIMITS)
    wafer = Wafer("wse2", rows=shape[0], cols=shape[1])
    job = rt.load(load_artifact(result.artifact_dir), wafer, (0, 0, *shape), "zoo")
    return np.array([job.step(*synthetic_batch(spec, k)).loss for k in range(steps)])


@pytest.mark.parametrize("name", TEXT_MODELS)
def test_zoo_model_trains_with_pytorch_losses(name: str) -> None:
    spec, files = zoo_job(name)
    assert (
        spec["train"]["optimizer"]["name"] == "sgd" and spec["run_options"]["steps_per_epoch"] >= 5
    )
    if name in BLOCKED:
        from compiler import compile_job
        from compiler.errors import UnsupportedOperator

        with pytest.raises(UnsupportedOperator, match=BLOCKED[name]):
            compile_job(spec, files, region=(16, 16), cache_dir=_CACHE, limits=ZOO_LIMITS)
        return
    torch.set_num_threads(1)
    ours = wafer_losses(spec, files, STEPS)
    net = _module(ZOO / name / "model.py", f"zoo_{name}").Net
    reference, _ = _REFERENCE.torch_reference(spec, STEPS, net)
    assert np.all(np.isfinite(ours))
    assert _REFERENCE.rel_error(ours, reference) < RTOL, (ours, reference)
    assert len(set(np.round(ours, 6))) > 1, "the weights must change between steps"
