"""SAM beside Slurm on the same machine, in the same minutes: the commands a Slurm user types.

Needs a Slurm controller answering on this machine (`sudo scripts/slurm-local` installs Debian's
slurm-wlm and starts a single-node slurmctld + slurmd); without one it says so in one line and
exits 1. SAM runs as `sam server` (one worker) on SQLite, as benchmarks/listing.py runs it.

Each figure is the median wall time of `--runs` runs of the real command (a new process each
time, as typed), Slurm's and SAM's taken alternately so that both see the same load:

- queue_10k: a listing of 10,000 held jobs (`squeue -n NAME`: every one a line; `sam queue` of
  a tenant holding them). Slurm's jobs are submitted one by one with sbatch (timed:
  sbatch_submits_per_s); SAM's are cloned into its database as benchmarks/listing.py does.
- submit_array_10k: `sbatch --hold --array=0-9999` vs `sam submit --hold --array 0-9999`.
- array_line: the held 10,000-task array as one line (`squeue -j ID`: `ID_[0-9999]`; `sam queue`
  of the tenant whose only jobs are that array's tasks).
- cancel_array_10k: `scancel ID` vs `sam cancel ID` of such an array (one array per run).
- help: `squeue --help` and `sbatch --help` vs `sam --help`.

Ends with one JSON line of pairs: `{"<figure>_ms": {"slurm": ..., "sam": ...}, ...}` with the
load average at the start and the end. Usage:
`python benchmarks/slurm_compare.py [--jobs 10000] [--tasks 10000] [--runs 5]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from listing import REPO, SPEC, seed_held, submit, user_token  # noqa: E402

from tests.e2e.server_process import SAM, ServerProcess  # noqa: E402

TAG = "samcompare"  # the name of every Slurm job this script submits (and cancels at the end)
HOW = (
    "Slurm is not {what} on this machine: `sudo scripts/slurm-local` installs Debian's "
    "slurm-wlm and starts a single-node slurmctld + slurmd, then run this again"
)


def slurm_ready() -> str | None:
    """None when squeue, sbatch and scancel are here and a controller answers; else why not."""
    if not all(shutil.which(tool) for tool in ("squeue", "sbatch", "scancel")):
        return HOW.format(what="installed")
    done = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True)
    if done.returncode != 0:
        return HOW.format(what="running") + f" ({done.stderr.strip().splitlines()[-1][:120]})"
    return None


def run(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    """(wall ms, stdout) of one command, which must succeed."""
    began = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    ms = (time.perf_counter() - began) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-400:]}")
    return ms, done.stdout


def paired(
    runs: int,
    slurm: list[str],
    sam: list[str],
    env: dict[str, str],
    check: Any = None,
) -> dict[str, float]:
    """Median ms of both commands, alternated (one warm-up each first)."""
    times: dict[str, list[float]] = {"slurm": [], "sam": []}
    for i in range(runs + 1):
        for side, argv, side_env in (("slurm", slurm, None), ("sam", sam, env)):
            ms, out = run(argv, side_env)
            if check is not None:
                check(side, out)
            if i:
                times[side].append(ms)
    return {side: round(statistics.median(values), 1) for side, values in times.items()}


def sbatch(*args: str) -> str:
    _, out = run(["sbatch", "--parsable", "--hold", "-J", TAG, "-o", "/dev/null", *args])
    return out.strip().split(";")[0]


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    why = slurm_ready()
    if why is not None:
        print(why, file=sys.stderr)
        raise SystemExit(1)
    out: dict[str, Any] = {"load_start": load()}
    subprocess.run(["scancel", "-n", TAG], check=False)  # a previous run's leftovers
    with tempfile.TemporaryDirectory() as tmp:
        db_url = f"sqlite:///{tmp}/sam.db"
        server = ServerProcess(db_url, Path(tmp) / "data").start()
        try:
            out |= compare(args, server, db_url, Path(tmp))
        finally:
            server.kill()
            subprocess.run(["scancel", "-n", TAG], check=False)
    out |= {"load_end": load(), "jobs": args.jobs, "tasks": args.tasks, "runs": args.runs}
    out |= {"cpus": os.cpu_count(), "slurm": run(["sinfo", "--version"])[1].strip()}
    print(json.dumps(out))


def compare(
    args: argparse.Namespace, server: ServerProcess, db_url: str, tmp: Path
) -> dict[str, Any]:
    base = server.url + "/api/v1"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAM_")}
    env |= {"SAM_URL": server.url, "PYTHONPATH": str(REPO)}
    held = env | {"SAM_TOKEN": user_token(base, "held")}
    swept = env | {"SAM_TOKEN": user_token(base, "swept")}
    (tmp / "project").mkdir()  # sam submit sends the job file's folder: only the job file
    job_file = tmp / "project" / "job.yaml"
    job_file.write_text(json.dumps(SPEC))  # JSON is YAML
    out: dict[str, Any] = {}

    # 10,000 held jobs on each side.
    print(f"submitting {args.jobs} held jobs to Slurm...", file=sys.stderr)
    began = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: sbatch("--wrap=true"), range(args.jobs)))
    out["sbatch_submits_per_s"] = round(args.jobs / (time.perf_counter() - began), 1)
    seed_held(db_url, submit(base, held["SAM_TOKEN"], SPEC), args.jobs)

    def every_job(side: str, text: str) -> None:
        assert len(text.splitlines()) == args.jobs + 1, (side, "a header and a line per job")

    squeue_held = ["squeue", "-n", TAG, "-t", "PD"]
    out["queue_10k_ms"] = paired(args.runs, squeue_held, [SAM, "queue"], held, every_job)
    print(f"listing {args.jobs} jobs: {out['queue_10k_ms']}", file=sys.stderr)

    # Arrays: one submitted per run on each side, alternately; each then listed and cancelled.
    submits: dict[str, list[float]] = {"slurm": [], "sam": []}
    arrays: dict[str, list[str]] = {"slurm": [], "sam": []}
    indices = f"0-{args.tasks - 1}"
    for _ in range(args.runs):
        began = time.perf_counter()
        arrays["slurm"].append(sbatch(f"--array={indices}", "--wrap=true"))
        submits["slurm"].append((time.perf_counter() - began) * 1000)
        argv = [SAM, "submit", str(job_file), "--hold", "--array", indices, "--parsable"]
        ms, text = run(argv, swept)
        submits["sam"].append(ms)
        arrays["sam"].append(text.strip())
        if len(arrays["sam"]) == 1:  # list while one array is there, then cancel it
            out |= array_figures(args, arrays["slurm"][0], arrays["sam"][0], swept)
        cancel_last(arrays, swept, out)
    out["submit_array_10k_ms"] = {k: round(statistics.median(v), 1) for k, v in submits.items()}
    cancels = out.pop("_cancels")
    out["cancel_array_10k_ms"] = {k: round(statistics.median(v), 1) for k, v in cancels.items()}
    print(
        f"array submit {out['submit_array_10k_ms']}, cancel {out['cancel_array_10k_ms']}",
        file=sys.stderr,
    )

    out["help_ms"] = paired(args.runs, ["squeue", "--help"], [SAM, "--help"], env)
    out["sbatch_help_ms"] = paired(args.runs, ["sbatch", "--help"], [SAM, "submit", "--help"], env)
    return out


def array_figures(
    args: argparse.Namespace, slurm_id: str, sam_id: str, swept: dict[str, str]
) -> dict[str, Any]:
    """The one line of a held array on each side."""
    line = f"_[0-{args.tasks - 1}]"

    def one_line(side: str, text: str) -> None:
        lines = text.splitlines()
        assert len(lines) == 2 and line in lines[1], (side, lines[:3])

    figures = {
        "array_line_ms": paired(
            args.runs, ["squeue", "-j", slurm_id], [SAM, "queue"], swept, one_line
        )
    }
    print(f"array line: {figures['array_line_ms']}", file=sys.stderr)
    return figures


def cancel_last(arrays: dict[str, list[str]], swept: dict[str, str], out: dict[str, Any]) -> None:
    """Cancel the newest array on each side, timed, and check that nothing of it waits."""
    cancels = out.setdefault("_cancels", {"slurm": [], "sam": []})
    slurm_id, sam_id = arrays["slurm"][-1], arrays["sam"][-1]
    ms, _ = run(["scancel", slurm_id])
    cancels["slurm"].append(ms)
    ms, _ = run([SAM, "cancel", sam_id], swept)
    cancels["sam"].append(ms)
    _, left = run([SAM, "queue", "--noheader"], swept)
    assert sam_id not in left, f"sam cancel {sam_id} left tasks waiting: {left[:300]}"


if __name__ == "__main__":
    main()
