"""Benchmark: the tenant-code sandbox's start-up cost, and a compile cold (sandboxed trace) and
cached (no sandbox at all).

Run: `.venv/bin/python benchmarks/sandbox.py [--runs N]`.
- sandbox_start_ms: median wall time of `run_task("empty")`, a cold start (no pre-started
  sandbox is used for it): lease a uid, stage the binds, start bwrap with its namespaces and
  seccomp filter, start Python inside, read the result back, kill the sandbox and wait until its
  PID namespace is empty.
  sandbox_start_cpu_ms: the CPU time that takes (worker + bwrap + sandboxed Python), which the
  load of a shared machine inflates far less; split into sandbox_start_worker_cpu_ms (the
  worker's own), sandbox_start_bwrap_cpu_ms (bwrap as its reaper counts it: the spawner helper,
  read from its /proc stat in clock ticks, or the worker when it forks bwrap itself) and
  sandbox_start_python_cpu_ms (the sandboxed Python up to the task, as it reports). What runs
  after the task and bwrap's init may reach no reaper that is counted here; `perf stat -e
  task-clock` over the whole process tree counts everything.
- compile_cold_s: `compile_job` of the user_model example into an empty cache with no pre-started
  sandbox (pays the torch import inside the sandbox); compile_prestarted_s: the same model with
  a sandbox pre-started by `warm_sandbox()` (what a compile worker has).
- compile_cached_s: the same compile again (a cache hit); the script fails if it started a sandbox.
The last line is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from compiler import compile_job
from compiler.sandbox import launcher, run_task, spawner, warm
from compiler.sandbox.limits import SandboxLimits

ROOT = Path(__file__).resolve().parent.parent
SPEC: dict[str, Any] = {
    "model": {"file": "model.py", "class": "Net", "kwargs": {"hidden": 64}},
    "data": {
        "source": "synthetic",
        "task": "classification",
        "input_shape": [32],
        "num_classes": 4,
        "batch_size": 16,
    },
    "train": {"loss": "cross_entropy", "optimizer": {"name": "adam", "lr": 0.003}, "seed": 1},
}


def _starts() -> list[int]:
    """Count sandbox starts (a cached compile must make none)."""
    counter = [0]
    original = launcher.start

    def counted(*args: Any, **kwargs: Any) -> Any:
        counter[0] += 1
        return original(*args, **kwargs)

    launcher.start = counted  # type: ignore[assignment]
    return counter


def _usage(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _spawner_children_s() -> float:
    """CPU seconds of the processes the spawner helper has reaped (bwrap runs as its child, not
    the worker's): cutime + cstime of /proc/HELPER/stat, in clock ticks."""
    helper = spawner._helper
    if helper is None or helper.proc.poll() is not None:
        return 0.0
    fields = Path(f"/proc/{helper.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def start_ms(runs: int) -> dict[str, float]:
    """Median wall ms of an empty task, and its mean CPU ms by part (figures the machine's load
    inflates less: on an idle machine the wall time approaches their sum)."""
    limits = SandboxLimits(cpu_seconds=10, memory_bytes=1024**3, wall_seconds=30.0)
    run_task("empty", {}, {}, limits)  # page cache, stage directories, the spawner helper
    times = []
    own, kids, inside = _usage(resource.RUSAGE_SELF), _usage(resource.RUSAGE_CHILDREN), 0.0
    spawned = _spawner_children_s()
    for _ in range(runs):
        begin = time.perf_counter()
        result = run_task("empty", {}, {}, limits)
        times.append((time.perf_counter() - begin) * 1000)
        inside += float(result["cpu_s"])  # type: ignore[index]
    worker = (_usage(resource.RUSAGE_SELF) - own) * 1000 / runs
    bwrap = (_usage(resource.RUSAGE_CHILDREN) - kids + _spawner_children_s() - spawned) * 1000
    bwrap /= runs
    python = inside * 1000 / runs
    return {
        "sandbox_start_ms": round(statistics.median(times), 1),
        "sandbox_start_cpu_ms": round(worker + bwrap + python, 1),
        "sandbox_start_worker_cpu_ms": round(worker, 1),
        "sandbox_start_bwrap_cpu_ms": round(bwrap, 1),
        "sandbox_start_python_cpu_ms": round(python, 1),
    }


def compile_s(raw: dict[str, Any], files: dict[str, str], cache: Path) -> tuple[float, bool]:
    from sam_server.schemas.job_spec import JobSpec

    spec = JobSpec.model_validate(dict(raw, name="bench")).model_dump(mode="json", by_alias=True)
    begin = time.perf_counter()
    result = compile_job(spec, files, region=(8, 8), cache_dir=cache)
    return time.perf_counter() - begin, result.cache_hit


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="wait 5 s, not 30, for the pre-start")
    args = parser.parse_args()
    files = {"model.py": (ROOT / "examples" / "user_model" / "model.py").read_text()}
    starts = _starts()
    start = start_ms(args.runs)
    figures: dict[str, Any] = {"sandbox_start_ms": start.pop("sandbox_start_ms")}
    with tempfile.TemporaryDirectory() as tmp:
        cold, hit = compile_s(SPEC, files, Path(tmp))
        assert not hit
        warm.warm_sandbox()
        time.sleep(5 if args.quick else 30)  # let it import torch, as at worker start
        other = dict(SPEC, model=dict(SPEC["model"], kwargs={"hidden": 48}))
        prestarted, _ = compile_s(other, files, Path(tmp))
        before = starts[0]
        cached, hit = compile_s(SPEC, files, Path(tmp))
        assert hit and starts[0] == before, "a cached compile started a sandbox"
    figures.update(
        compile_cold_s=round(cold, 3),
        compile_prestarted_s=round(prestarted, 3),
        compile_cached_s=round(cached, 4),
        **start,
        uid="pool" if os.geteuid() == 0 else "worker's own",
        load_average=round(os.getloadavg()[0], 2),
    )
    print(f"sandbox: {figures}", file=sys.stderr)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
