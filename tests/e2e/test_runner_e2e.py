"""The seed's programming model on the wafer (issue 31's "done means"): examples/seed_runner's
train.py (two weighted losses, clip_grad_norm_, Adam with a StepLR stepped per epoch, a
DataLoader over data_utils.py's Dataset class) trains on the embedded cluster (server,
scheduler, compile and wafer worker processes) with the losses of `Runner(local=True)` (fp32,
rtol 1e-3), through `python train.py` (which gets the losses and the trained weights back) and
through `sam run --wait train.py`."""

from __future__ import annotations

import json
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch

from tests.e2e.local_cluster import TINY, running_cluster

pytestmark = pytest.mark.slow
ADMIN = {"Authorization": "Bearer sam-admin-runner"}
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "seed_runner"
# Runs train.py as `python train.py` would and writes what runner.train returned.
RESULT_DUMP = (
    "import json, runpy, sys, torch\n"
    "g = runpy.run_path('train.py', run_name='__main__')\n"
    "json.dump({'losses': g['result'].losses, 'job_id': g['result'].job_id}, open(sys.argv[1], 'w'))\n"
    "torch.save({'returned': g['result'].weights, 'model': g['model'].state_dict()}, sys.argv[2])\n"
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("runner-cluster")
    with running_cluster(root, TINY, admin_token="sam-admin-runner") as c:
        yield c


@pytest.fixture(scope="module")
def token(cluster) -> str:  # type: ignore[no-untyped-def]
    httpx.post(
        f"{cluster.url}/api/v1/tenants", json={"name": "seed"}, headers=ADMIN
    ).raise_for_status()
    made = httpx.post(f"{cluster.url}/api/v1/tenants/seed/users", json={"name": "u"}, headers=ADMIN)
    return str(made.json()["token"])


def _local(folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[float], dict[str, Any]]:
    """train.py with SAM_RUNNER=local, in this process: its losses and final weights."""
    monkeypatch.setenv("SAM_RUNNER", "local")
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    for name in ("model", "data_utils"):
        sys.modules.pop(name, None)
    found = runpy.run_path(str(folder / "train.py"), run_name="__main__")
    for name in ("model", "data_utils"):
        sys.modules.pop(name, None)
    return list(found["result"].losses), dict(found["result"].weights)


def _env(tmp_path: Path, url: str, token: str) -> dict[str, str]:
    env = dict(os.environ, SAM_URL=url, SAM_TOKEN=token, XDG_CACHE_HOME=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("SAM_RUNNER", None)
    return env


def _python_train_py(folder: Path, env: dict[str, str], tmp_path: Path) -> tuple[str, Any]:
    """`python train.py` in folder, as a user runs it: its stdout, and the losses and job id
    runner.train returned (RESULT_DUMP also saves the weights to tmp_path/w.pt)."""
    done = subprocess.run(
        [sys.executable, "-c", RESULT_DUMP, str(tmp_path / "r.json"), str(tmp_path / "w.pt")],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout, json.loads((tmp_path / "r.json").read_text())


def _losses(url: str, token: str, job_id: str) -> list[float]:
    steps = httpx.get(
        f"{url}/api/v1/jobs/{job_id}/metrics", headers={"Authorization": f"Bearer {token}"}
    ).json()["steps"]
    return [float(s["loss"]) for s in steps]


def test_the_seed_train_py_trains_on_the_wafer_with_local_losses(
    cluster,
    token: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    folder = tmp_path / "seed_runner"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    env = _env(tmp_path, cluster.url, token)
    local_losses, local_weights = _local(folder, monkeypatch)
    assert len(local_losses) == 2 * 16

    # python train.py: submits, prints the job's epochs, returns losses and weights
    stdout, returned = _python_train_py(folder, env, tmp_path)
    assert "Submitted job " in stdout and "sam logs -f" in stdout
    assert "epoch 1/2: mean loss" in stdout and "epoch 2/2: mean loss" in stdout
    assert "accuracy" in stdout
    np.testing.assert_allclose(returned["losses"], local_losses, rtol=1e-3)
    np.testing.assert_allclose(
        _losses(cluster.url, token, returned["job_id"]), local_losses, rtol=1e-3
    )
    weights = torch.load(tmp_path / "w.pt", weights_only=True)
    assert set(weights["returned"]) == set(local_weights)
    for name, tensor in local_weights.items():
        torch.testing.assert_close(weights["model"][name], weights["returned"][name])
        torch.testing.assert_close(weights["returned"][name], tensor, rtol=1e-3, atol=1e-4)

    # sam run --wait train.py: the same training again
    ran = subprocess.run(
        [
            sys.executable,
            "-c",
            "from client.entry import main; main()",
            "run",
            "--wait",
            "train.py",
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    job_id = ran.stdout.split("Submitted job ")[1].split()[0]
    assert "epoch 2/2: mean loss" in ran.stdout
    np.testing.assert_allclose(_losses(cluster.url, token, job_id), local_losses, rtol=1e-3)


def test_a_runner_script_reads_its_data_set_on_the_cluster_as_on_the_login_node(
    cluster,
    token: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    """`sam data put points` then `python train.py` whose Runner(datasets=["points"]) reads
    dataset_path("points"): $SAM_DATASETS/points here, /datasets/points in the compile and data
    sandboxes; the losses are local=True's."""
    from tests.compiler.test_runner_datasets import _local, _project

    project, data = _project(tmp_path)
    env = _env(tmp_path, cluster.url, token)
    put = subprocess.run(
        [sys.executable, "-c", "from client.entry import main; main()", "data", "put"]
        + ["points", str(data)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert put.returncode == 0, put.stderr
    local_losses = _local(project, monkeypatch)
    env["SAM_DATASETS"] = str(data.parent)  # the login node's copy, for the script's top
    _, returned = _python_train_py(project, env, tmp_path)
    np.testing.assert_allclose(returned["losses"], local_losses, rtol=1e-3)
    job = httpx.get(
        f"{cluster.url}/api/v1/jobs/{returned['job_id']}",
        headers={"Authorization": f"Bearer {token}"},
    ).json()
    assert job["entry"]["script"] == "train.py"  # its args: RESULT_DUMP's own
