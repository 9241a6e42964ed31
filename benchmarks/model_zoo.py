"""Benchmark: the whole model zoo (every `examples/zoo/<name>/`), compiled with the real compiler,
trained on the wse_sim runtime and compared with PyTorch eager on the same batches.

Run: `.venv/bin/python benchmarks/model_zoo.py [--unseen] [--only a,b] [name ...]` (default:
every zoo folder; `--unseen`: instead the architectures of tests/zoo/unseen.yaml, which the zoo
does not have, each built by its library's constructor through model.factory; `--only` or names
run a subset, e.g. while working on one model; `--jobs N` runs N models at once in worker
processes). Per model:
the verdict (train_match: every step's loss within rtol 1e-3 of eager, and BatchNorm running
statistics too; unsupported: the op or kernel that blocks it at compile; mismatch / error), cold
compile seconds, simulator and eager wall seconds per step (single-threaded). The last line is one
JSON object: {"models", "train_match", "fraction_matching", "unsupported", "not_matching",
"max_sim_vs_eager", "per_model"} (per model: sim_vs_eager, the simulated step's wall time over
eager's).
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

from tests.zoo.harness import ZooResult, run_zoo_model, unseen_names, zoo_names  # noqa: E402


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _ratio(r: ZooResult) -> float | None:
    """The simulated step's wall seconds over eager's (None without both)."""
    if not r.sim_step_s or not r.torch_step_s:
        return None
    return round(r.sim_step_s / r.torch_step_s, 2)


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
    parser.add_argument(
        "--unseen", action="store_true", help="the architectures of tests/zoo/unseen.yaml"
    )
    args = parser.parse_args()
    known = unseen_names() if args.unseen else zoo_names()
    names = [*args.names, *filter(None, args.only.split(","))] or known
    unknown = sorted(set(names) - set(known))
    if unknown:
        parser.error(f"no such model {unknown}; there are: {', '.join(known)}")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as cache:
        if args.jobs > 1:
            # Models in parallel worker processes (one thread each): on a machine shared with
            # other work the run takes its share sooner; per-model seconds include the contention.
            with ProcessPoolExecutor(
                args.jobs, initializer=torch.set_num_threads, initargs=(1,)
            ) as pool:
                futures = {
                    pool.submit(run_zoo_model, n, Path(cache) / n, args.unseen): n for n in names
                }
                done = {}
                for future in as_completed(futures):
                    done[futures[future]] = future.result()
                    print(_row(done[futures[future]]), flush=True)
            results = [done[n] for n in names]
        else:
            results = []
            for name in names:
                results.append(run_zoo_model(name, Path(cache) / name, args.unseen))
                print(_row(results[-1]), flush=True)
    summary = {
        "models": len(results),
        "train_match": sum(r.verdict == "train_match" for r in results),
        "fraction_matching": round(
            sum(r.verdict == "train_match" for r in results) / max(1, len(results)), 3
        ),
        "unsupported": {r.name: r.blocking_op for r in results if r.verdict == "unsupported"},
        "not_matching": {
            r.name: f"{r.verdict}: max rel err {r.max_rel_error:.1e}, buffers "
            f"{r.buffer_rel_error:.1e} (torch fp32 vs fp64 {r.reference_fp64_rel_error:.1e}, "
            f"buffers {r.buffer_fp64_rel_error:.1e}; "
            f"training moves the losses by {r.training_effect:.1e})"
            if r.verdict == "mismatch"
            else r.message[:200]
            for r in results
            if r.verdict in ("mismatch", "error")
        },
        "max_sim_vs_eager": max((x for r in results if (x := _ratio(r)) is not None), default=None),
        "per_model": {
            r.name: {
                "sim_vs_eager": _ratio(r),
                "compile_s": _round(r.compile_s, 2),
                "sim_step_s": _round(r.sim_step_s),
                "torch_step_s": _round(r.torch_step_s),
                "max_rel_error": r.max_rel_error,
                "buffer_rel_error": r.buffer_rel_error,
                "torch_fp32_vs_fp64": r.reference_fp64_rel_error,
                "torch_fp32_vs_fp64_buffers": r.buffer_fp64_rel_error,
                "sim_vs_fp64": r.sim_fp64_rel_error,
                "training_effect": r.training_effect,
            }
            for r in results
        },
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
