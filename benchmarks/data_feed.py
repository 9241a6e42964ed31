"""Moving data to a job: a project's upload, an unchanged resubmit, a data set's upload, and the
host feed of a memory-mapped data set (issue 28, docs/projects.md).

Starts `sam server` (SQLite, its own data directory) on loopback, a tenant and a user, then:

- upload_mb_per_s: `sam submit` of a fresh 1 GB project (eight 128 MiB files of random bytes and
  a model file), from the command's start to its end (hashing, chunk uploads, the server's
  checks and file assembly, the submit), as MB of project per second (target >= 100);
- resubmit_unchanged_s: the same command again on the unchanged project (target < 2 s; no file
  bytes are sent, the hashes come from the client's cache);
- dataset_put_1gb_s: `sam data put` of another 1 GB folder;
- feed_mb_per_s: benchmarks/feed_bench.py's make_batch over a memmapped .npy data set through
  the data sandbox and the prefetching host loader (target >= 500).

    python benchmarks/data_feed.py [--mb 1024] [--feed-mb 256]

Ends with one JSON line: {"upload_mb_per_s", "resubmit_unchanged_s", "feed_mb_per_s",
"dataset_put_1gb_s"}.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SAM = str(Path(sys.executable).parent / "sam")
FILE_MB = 128
CPU_FIELDS = ("ru_utime", "ru_stime")
JOB = """name: upload-bench
model: {file: model.py, class: Net}
data: {source: synthetic, task: classification, input_shape: [64], num_classes: 10, batch_size: 8}
resources: {region: {rows: 4, cols: 4}, time_limit: 5m}
"""
MODEL = """import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(x)
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fill(folder: Path, megabytes: int) -> None:
    """`megabytes` of random bytes in files of FILE_MB MiB."""
    folder.mkdir(parents=True, exist_ok=True)
    left = megabytes
    index = 0
    while left > 0:
        size = min(FILE_MB, left)
        with open(folder / f"part-{index:03d}.bin", "wb") as out:
            for _ in range(size):
                out.write(secrets.token_bytes(1 << 20))
        left -= size
        index += 1


def _start(data_dir: Path, admin: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAM_")}
    env.update(SAM_DATA_DIR=str(data_dir), SAM_ADMIN_TOKEN=admin, SAM_LOG_LEVEL="WARNING")
    proc = subprocess.Popen(
        [SAM, "server", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("sam server did not start")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed(args: list[str], env: dict[str, str], server: int, megabytes: int) -> float:
    """Wall seconds of `sam ARGS`; prints them with the client's and the server's CPU seconds
    per GiB of project (CPU time holds on a loaded machine, where wall time does not)."""
    server_before = _cpu_s(server)
    client_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run([SAM, *args], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    client_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise RuntimeError(f"sam {' '.join(args)} failed: {out.stderr}")
    client = sum(getattr(client_after, f) - getattr(client_before, f) for f in CPU_FIELDS)
    per_gib = 1024 / megabytes
    print(
        f"sam {args[0]} {args[1]}: {elapsed:.2f} s, CPU per GiB client {client * per_gib:.2f} s "
        f"server {(_cpu_s(server) - server_before) * per_gib:.2f} s (load "
        f"{os.getloadavg()[0]:.1f}); {out.stderr.strip()}",
        file=sys.stderr,
    )
    return elapsed


def measure(megabytes: int) -> dict[str, float]:
    admin = "sam_admin_" + secrets.token_hex(8)
    with tempfile.TemporaryDirectory(prefix="sam-data-feed-") as tmp:
        base = Path(tmp)
        proc, url = _start(base / "server", admin)
        try:
            headers = {"Authorization": f"Bearer {admin}"}
            httpx.post(f"{url}/api/v1/tenants", json={"name": "bench"}, headers=headers)
            made = httpx.post(
                f"{url}/api/v1/tenants/bench/users", json={"name": "u"}, headers=headers
            ).json()
            env = {k: v for k, v in os.environ.items() if not k.startswith("SAM_")}
            env.update(SAM_URL=url, SAM_TOKEN=made["token"], XDG_CACHE_HOME=str(base / "cache"))
            project = base / "project"
            _fill(project / "data", megabytes)
            (project / "job.yaml").write_text(JOB)
            (project / "model.py").write_text(MODEL)
            upload_s = _timed(
                ["submit", str(project / "job.yaml"), "--parsable"], env, proc.pid, megabytes
            )
            again_s = _timed(
                ["submit", str(project / "job.yaml"), "--parsable"], env, proc.pid, megabytes
            )
            _fill(base / "dataset", megabytes)
            put_s = _timed(
                ["data", "put", "bench", str(base / "dataset")], env, proc.pid, megabytes
            )
        finally:
            proc.terminate()
            proc.wait(30)
    return {
        "upload_mb_per_s": round(megabytes * 1.048576 / upload_s, 1),
        "resubmit_unchanged_s": round(again_s, 3),
        "dataset_put_1gb_s": round(put_s * 1024 / megabytes, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=1024, help="project and data set size (MiB)")
    parser.add_argument("--feed-mb", type=int, default=256, help="the fed data set's size (MB)")
    args = parser.parse_args()
    from benchmarks.feed_bench import measure_feed_mb_per_s

    figures = measure(args.mb)
    feed = round(measure_feed_mb_per_s(args.feed_mb), 1)
    print(
        json.dumps(
            {
                "upload_mb_per_s": figures["upload_mb_per_s"],
                "resubmit_unchanged_s": figures["resubmit_unchanged_s"],
                "feed_mb_per_s": feed,
                "dataset_put_1gb_s": figures["dataset_put_1gb_s"],
            }
        )
    )


if __name__ == "__main__":
    main()
