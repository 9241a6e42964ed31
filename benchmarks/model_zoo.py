"""Benchmark: the whole model zoo (every `examples/zoo/<name>/`), compiled with the real compiler,
trained on the wse_sim runtime and compared with PyTorch eager on the same batches.

Run: `.venv/bin/python benchmarks/model_zoo.py [--only a,b] [name ...]` (default: every zoo
folder; `--only` or names run a subset, e.g. while working on one model; `--jobs N` runs N
models at once in worker processes). Per model:
the verdict (train_match: every step's loss within rtol 1e-3 of eager, and BatchNorm running
statistics too; unsupported: the op or kernel that blocks it at compile; mismatch / error), cold
compile seconds, simulator and eager wall seconds per step (single-threaded). The last line is one
JSON object: {"models", "train_match", "unsupported", "per_model"}.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the shared harness in tests/zoo

from tests.zoo.harness import ZooResult, run_zoo_model, zoo_names  # noqa: E402


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _row(r: ZooResult) -> str:
    if r.verdict == "unsupported":
        return f"{r.name:<22} unsupported  {r.blocking_op}"
    if r.verdict == "error":
        return f"{r.name:<22} error        {r.message[:120]}"
    return (
        f"{r.name:<22} {r.verdict:<12} max rel err {r.max_rel_error:.1e}  compile "
        f"{r.compile_s:.1f} s  sim {r.sim_step_s:.2f} s/step  torch {r.torch_step_s:.2f} s/step"
    )


def main() -> None:
    """Run the zoo, print one line per model, then the JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help="zoo folders to run (default: all)")
    parser.add_argument("--only", default="", help="comma-separated zoo folders to run")
    parser.add_argument("--jobs", type=int, default=1, help="models run at once (processes)")
    args = parser.parse_args()
    names = [*args.names, *filter(None, args.only.split(","))] or zoo_names()
    unknown = sorted(set(names) - set(zoo_names()))
    if unknown:
        parser.error(f"no zoo folder {unknown}; the zoo has: {', '.join(zoo_names())}")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as cache:
        if args.jobs > 1:
            # Models in parallel worker processes (one thread each): on a machine shared with
            # other work the run takes its share sooner; per-model seconds include the contention.
            with ProcessPoolExecutor(
                args.jobs, initializer=torch.set_num_threads, initargs=(1,)
            ) as pool:
                futures = {pool.submit(run_zoo_model, n, Path(cache) / n): n for n in names}
                done = {}
                for future in as_completed(futures):
                    done[futures[future]] = future.result()
                    print(_row(done[futures[future]]), flush=True)
            results = [done[n] for n in names]
        else:
            results = []
            for name in names:
                results.append(run_zoo_model(name, Path(cache) / name))
                print(_row(results[-1]), flush=True)
    summary = {
        "models": len(results),
        "train_match": sum(r.verdict == "train_match" for r in results),
        "unsupported": {r.name: r.blocking_op for r in results if r.verdict == "unsupported"},
        "not_matching": {
            r.name: f"{r.verdict}: max rel err {r.max_rel_error:.1e}, buffers "
            f"{r.buffer_rel_error:.1e} (torch fp32 vs fp64 {r.reference_fp64_rel_error:.1e}, "
            f"training moves the losses by {r.training_effect:.1e})"
            if r.verdict == "mismatch"
            else r.message[:200]
            for r in results
            if r.verdict in ("mismatch", "error")
        },
        "per_model": {
            r.name: {
                "compile_s": _round(r.compile_s, 2),
                "sim_step_s": _round(r.sim_step_s),
                "torch_step_s": _round(r.torch_step_s),
                "max_rel_error": r.max_rel_error,
                "buffer_rel_error": r.buffer_rel_error,
                "torch_fp32_vs_fp64": r.reference_fp64_rel_error,
                "sim_vs_fp64": r.sim_fp64_rel_error,
                "training_effect": r.training_effect,
            }
            for r in results
        },
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
