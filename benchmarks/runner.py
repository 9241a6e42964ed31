"""A Runner script (examples/seed_runner's train.py, docs/runner.md) through SAM: how long from
submit to its first wafer step, how long its compile (the script's train_step captured in the
compile sandbox, planned, written) takes, and the simulator's wall time per step against the
same train_step in eager PyTorch.

Starts the local cluster (`sam up`'s processes, embedded SQLite and broker, one 64 x 64 WSE-2
wafer), runs `python train.py` (SAM_RUN_WAIT=0) and polls the job's metrics until step 0 is in:
  - submit_to_first_step_s: the job's created_at to its first step seen by the poll (compile,
    placement, the data sandbox's start and one step);
  - step_compile_s: the compile worker's seconds for the job (cold cache);
  - sim_step_over_eager: the job's artifact stepped on the simulator in this process over the
    script's own batches, per step, over the script's train_step in eager PyTorch on the same
    batches (both single-threaded, after two warm-up steps).
Ends with one JSON line: {"submit_to_first_step_s", "step_compile_s", "sim_step_over_eager"}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api_submit import bench_user  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "seed_runner"
ADMIN = "sam_admin_runner"


def _ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def submit_and_first_step(base: str, token: str, folder: Path) -> tuple[float, float, str]:
    """(submit to first step seen, compile seconds, job id) of `python train.py`."""
    env = dict(os.environ, SAM_URL=base, SAM_TOKEN=token, SAM_RUN_WAIT="0")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["XDG_CACHE_HOME"] = str(folder.parent / "cache")
    env.pop("SAM_RUNNER", None)
    done = subprocess.run(
        [sys.executable, "train.py"], cwd=folder, env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(done.stderr)
    job_id = done.stdout.split("Submitted job ")[1].split()[0]
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        steps = httpx.get(
            f"{base}/api/v1/jobs/{job_id}/metrics", params={"last": 1}, headers=headers
        ).json()["steps"]
        if steps:
            seen = time.time()
            break
        time.sleep(0.05)
    else:
        raise TimeoutError(f"job {job_id} ran no step")
    job = httpx.get(f"{base}/api/v1/jobs/{job_id}", headers=headers).json()
    return seen - _ts(job["created_at"]), float(job["compile"]["seconds"]), job_id


def step_ratio(folder: Path, steps: int) -> tuple[float, float]:
    """(simulator seconds per step, eager seconds per step) of the script's train_step."""
    import torch

    import wse_sim.runtime as rt
    from compiler import compile_job
    from compiler.artifact import load_artifact
    from compiler.script_entry import feed_script
    from sam_server.schemas.job_spec import JobSpec
    from wse_sim import Wafer

    torch.set_num_threads(1)
    raw = {
        "name": "bench",
        "entry": {"script": "train.py"},
        "data": {"batch_size": 32},
        "run_options": {"num_epochs": 1, "steps_per_epoch": steps + 2},
        "resources": {"region": {"rows": 8, "cols": 8}},
    }
    spec = JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)
    files = {"train.py": (folder / "train.py").read_text()}
    sys.path.insert(0, str(folder))
    batches: list[Any] = []
    feed_script(spec, folder, 0, lambda x, y: batches.append((x, y)))
    with tempfile.TemporaryDirectory() as cache:
        result = compile_job(spec, files, region=(8, 8), cache_dir=Path(cache), project=folder)
        assert result.artifact_dir is not None
        job = rt.load(load_artifact(result.artifact_dir), Wafer("wse2", 8, 8), (0, 0, 8, 8), "b")
        for x, y in batches[:2]:
            job.step(x, y)
        start = time.perf_counter()
        for x, y in batches[2:]:
            job.step(x, y)
        sim = (time.perf_counter() - start) / steps
    os.environ["SAM_RUNNER"] = "local"
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # its epoch lines: stdout ends with the JSON
            found = runpy.run_path(str(folder / "train.py"), run_name="__main__")
    finally:
        os.chdir(cwd)
        del os.environ["SAM_RUNNER"]
    step, model = found["train_step"], found["model"]
    criterion, optimizer = found["criterion"], found["optimizer"]
    tensors = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches]
    for x, y in tensors[:2]:
        step(model, x, y, criterion, optimizer)
    start = time.perf_counter()
    for x, y in tensors[2:]:
        step(model, x, y, criterion, optimizer)
    return sim, (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--port", type=int, default=18767)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "seed_runner"
        shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__"))
        cluster_file = Path(tmp) / "cluster.yaml"
        cluster_file.write_text(
            "wafers:\n  - {id: w0, arch: wse2, rows: 64, cols: 64}\ncompile_servers: 1\n"
        )
        os.environ.update(
            SAM_DATA_DIR=str(Path(tmp) / "data"),
            SAM_CLUSTER=str(cluster_file),
            SAM_ADMIN_TOKEN=ADMIN,
            SAM_LOG_LEVEL="WARNING",
        )
        from sam_server.config import Settings
        from sam_worker.supervisor import Cluster

        cluster = Cluster(Settings(), port=args.port)
        cluster.start()
        try:
            cluster.wait_ready(120)
            token = bench_user(cluster.url, ADMIN)
            first, compile_s, job_id = submit_and_first_step(cluster.url, token, folder)
        finally:
            cluster.stop()
        sim, eager = step_ratio(folder, args.steps)
    print(
        f"job {job_id}: submit to first step {first:.2f} s, compile {compile_s:.2f} s; "
        f"step: simulator {sim * 1000:.1f} ms, eager {eager * 1000:.2f} ms ({sim / eager:.1f}x)",
        file=sys.stderr,
    )
    print(
        json.dumps(
            {
                "submit_to_first_step_s": round(first, 3),
                "step_compile_s": round(compile_s, 3),
                "sim_step_over_eager": round(sim / eager, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
