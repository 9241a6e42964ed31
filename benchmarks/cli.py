"""The command line's speed, Slurm's way of using it: sequential `sam submit --parsable` calls.

Starts `sam server` on a fresh SQLite database in a temporary folder, makes a tenant and a user,
then measures, in one run so that ratios compare:

- `cli_submits_per_s`: N sequential `sam submit job.yaml --parsable` through the `sam` console
  script of this venv (every call a new Python process, as in a shell loop), and
  `python_floor_per_s`, N sequential `python -c pass` of the same interpreter (the ceiling);
- `client_install_mb` and `light_cli_submits_per_s`: the light client (client/pyproject.toml,
  distribution `sam-client`) installed alone in a fresh venv (pip from the configured indexes),
  the MB it added to site-packages, and the same submits through its `sam` (`--skip-install`:
  null);
- `array_tasks_per_s`: one `POST /api/v1/jobs` with the spec's `array: "0-{T-1}"` creating T tasks
  (job arrays, another branch's work): null when the server answers 404/422 (no arrays yet) or
  creates fewer than T jobs;
- `sbatch_submits_per_s`: N sequential `sbatch --hold --parsable --wrap true` when Slurm answers
  here (`sinfo` succeeds), else null. To have it on Debian: `apt-get install slurm-wlm`, write
  a one-node /etc/slurm/slurm.conf (ClusterName, SlurmctldHost=localhost, NodeName=localhost
  CPUs=2 State=UNKNOWN, PartitionName=debug Nodes=ALL Default=YES, ProctrackType=proctrack/linuxproc,
  SelectType=select/cons_tres), then start `munged`, `slurmctld` and `slurmd`.

The timed calls run without PYTHONDONTWRITEBYTECODE (a sandboxed shell may set it): a user's
`sam` has its modules' bytecode cached (pip writes it at install; an editable install's first
run writes it), and without the cache every call would compile the client from source (about
as much CPU again as the submit itself). The warm-up call before each series writes it.

Each rate also reports its calls' own CPU milliseconds per call (user + system of the child
processes, the server's excluded), which a machine loaded by other work bends less than wall time.
Ends with one JSON line: {"cli_submits_per_s", "array_tasks_per_s", "client_install_mb",
"sbatch_submits_per_s", ...}.

    python benchmarks/cli.py [--submits 40] [--array-tasks 10000] [--skip-install] [--sam PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))
from api_submit import ADMIN, SPEC, count_jobs, start_server  # noqa: E402

from tests.client.light_venv import build_light_venv  # noqa: E402

MODEL = "import torch.nn as nn\n\n\nclass Net(nn.Linear):\n    def __init__(self):\n        super().__init__(8, 2)\n"
JOB = (
    "name: sweep\nmodel: {file: model.py, class: Net}\n"
    "data: {source: synthetic, task: regression, input_shape: [8], batch_size: 4}\n"
    "resources: {region: {rows: 4, cols: 4}, time_limit: 5m}\n"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_user(base: str) -> str:
    admin = {"Authorization": f"Bearer {ADMIN}"}
    httpx.post(f"{base}/api/v1/tenants", json={"name": "bench"}, headers=admin).raise_for_status()
    made = httpx.post(
        f"{base}/api/v1/tenants/bench/users", json={"name": "ann", "role": "user"}, headers=admin
    )
    made.raise_for_status()
    return str(made.json()["token"])


CPU_MS: dict[str, float] = {}  # CPU milliseconds per call (user + system), by label


def per_second(
    argv: list[str], n: int, *, cwd: Path, env: dict[str, str], label: str = ""
) -> float:
    """Calls per second of `argv` run `n` times in a row (each must exit 0); the calls' own
    CPU time per call goes to CPU_MS[label] (a figure that a loaded machine bends less)."""
    subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True)  # warm caches
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    for _ in range(n):
        subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    CPU_MS[label] = round(1000 * cpu_s / n, 1)
    return n / elapsed


def light_client(where: Path) -> tuple[Path, float]:
    """Install client/ alone in a fresh venv: its `sam` and the MB added to site-packages."""
    bin_dir, added_mb = build_light_venv(where)
    return bin_dir / "sam", round(added_mb, 2)


def array_rate(base: str, token: str, tasks: int, database: Path) -> float | None:
    """Tasks per second of one array submit, or None when the server has no arrays."""
    before = count_jobs(f"sqlite:///{database}")
    body = {"spec": {**SPEC, "array": f"0-{tasks - 1}"}, "files": {}}
    start = time.perf_counter()
    answer = httpx.post(
        f"{base}/api/v1/jobs",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=600,
    )
    elapsed = time.perf_counter() - start
    if answer.status_code in (404, 422):
        print(f"array submit: {answer.status_code} (no job arrays on this server)", file=sys.stderr)
        return None
    answer.raise_for_status()
    created = count_jobs(f"sqlite:///{database}") - before
    if created < tasks:
        print(f"array submit created {created} jobs, not {tasks}", file=sys.stderr)
        return None
    return tasks / elapsed


def sbatch_rate(n: int, where: Path) -> float | None:
    """sbatch submits per second (held, so nothing runs), or None without a working Slurm."""
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return None
    if subprocess.run(["sinfo"], capture_output=True, timeout=10).returncode != 0:
        return None
    argv = ["sbatch", "--hold", "--parsable", "--output=/dev/null", "--wrap", "true"]
    rate = per_second(argv, n, cwd=where, env=dict(os.environ))
    subprocess.run(["scancel", "--user", os.environ.get("USER", "root")], capture_output=True)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submits", type=int, default=40)
    parser.add_argument("--array-tasks", type=int, default=10_000)
    parser.add_argument("--skip-install", action="store_true")
    parser.add_argument(
        "--sam",
        help="The `sam` to time (default: this venv's), e.g. another checkout's, to compare",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sam-cli-bench-") as tmp:
        where = Path(tmp)
        (where / "job").mkdir()
        (where / "job" / "model.py").write_text(MODEL)
        (where / "job" / "job.yaml").write_text(JOB)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = start_server(None, port, 1, str(where / "data"))
        try:
            token = make_user(base)
            env = dict(os.environ, SAM_URL=base, SAM_TOKEN=token, HOME=str(where))
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user's shell: bytecode cached
            sam = args.sam or str(Path(sys.executable).with_name("sam"))
            submit = ["job.yaml", "--parsable"]
            floor = per_second(
                [sys.executable, "-c", "pass"], args.submits, cwd=where, env=env, label="floor"
            )
            cli = per_second(
                [sam, "submit", *submit], args.submits, cwd=where / "job", env=env, label="cli"
            )
            print(f"sam submit: {cli:.1f}/s (python -c pass: {floor:.1f}/s)", file=sys.stderr)
            install_mb = light = None
            if not args.skip_install:
                light_sam, install_mb = light_client(where)
                light = per_second(
                    [str(light_sam), "submit", *submit],
                    args.submits,
                    cwd=where / "job",
                    env=env,
                    label="light",
                )
                print(f"light client: {install_mb} MB, {light:.1f} submits/s", file=sys.stderr)
            database = where / "data" / "sam.db"
            arrays = array_rate(base, token, args.array_tasks, database)
            sbatch = sbatch_rate(args.submits, where)
        finally:
            server.terminate()
            server.wait(30)
    figures = {
        "cli_submits_per_s": round(cli, 1),
        "array_tasks_per_s": None if arrays is None else round(arrays, 1),
        "client_install_mb": install_mb,
        "sbatch_submits_per_s": None if sbatch is None else round(sbatch, 1),
        "light_cli_submits_per_s": None if light is None else round(light, 1),
        "python_floor_per_s": round(floor, 1),
        "cli_cpu_ms_per_submit": CPU_MS.get("cli"),
        "light_cpu_ms_per_submit": CPU_MS.get("light"),
        "python_floor_cpu_ms": CPU_MS.get("floor"),
        "submits": args.submits,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
