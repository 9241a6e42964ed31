"""The host feed of a wafer job: a make_batch reading a memory-mapped data set.

A .npy data set (float32 [N, 1024], --mb megabytes) is bound read-only at /datasets/bench in
the data sandbox, where make_batch reads it with compiler.feed.NpyFeed; the batches come back
through the sandbox's validated frame pipe and the worker's prefetching host loader
(sam_worker.prefetch.PrefetchLoader), as a wafer job receives them. The figure is input bytes
delivered per second (target >= 500 MB/s), the data set read once after one warm-up pass.

    python benchmarks/feed_bench.py [--mb 256] [--batch 1024]

Ends with one JSON line: {"feed_mb_per_s": ...}. `measure_feed_mb_per_s()` is the same
measurement for other benchmarks (benchmarks/data_feed.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FEATURES = 1024
MAKE_BATCH = """from compiler.feed import NpyFeed

FEED = None


def make_batch(step, batch_size):
    global FEED
    if FEED is None:
        FEED = NpyFeed("/datasets/bench/x.npy", "/datasets/bench/y.npy")
    return FEED.batch(step, batch_size)
"""


def _spec(batch: int) -> dict[str, Any]:
    from sam_server.schemas.job_spec import JobSpec

    raw = {
        "name": "feed-bench",
        "model": {"builtin": "mlp"},
        "data": {
            "source": "file",
            "file": "data.py",
            "function": "make_batch",
            "dataset": "bench",
            "task": "classification",
            "input_shape": [FEATURES],
            "num_classes": 10,
            "batch_size": batch,
        },
        "data_loading": {"prefetch_depth": 4, "use_parallel_loader": True},
    }
    return JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)


def _dataset(root: Path, megabytes: int) -> int:
    """Write the data set; returns its row count."""
    rows = max(1, megabytes * 1024 * 1024 // (FEATURES * 4))
    inputs = np.lib.format.open_memmap(
        root / "x.npy", mode="w+", dtype=np.float32, shape=(rows, FEATURES)
    )
    rng = np.random.default_rng(0)
    for start in range(0, rows, 4096):
        stop = min(rows, start + 4096)
        inputs[start:stop] = rng.standard_normal((stop - start, FEATURES), dtype=np.float32)
    inputs.flush()
    del inputs
    np.save(root / "y.npy", (np.arange(rows) % 10).astype(np.int64))
    return rows


def measure_feed_mb_per_s(megabytes: int = 256, batch: int = 1024) -> float:
    """MB/s of input a make_batch over a memmapped data set delivers to a wafer job."""
    from compiler.data import iter_batches
    from sam_worker.prefetch import PrefetchLoader

    spec = _spec(batch)
    with tempfile.TemporaryDirectory(prefix="sam-feed-bench-") as tmp:
        root = Path(tmp) / "bench"
        root.mkdir()
        rows = _dataset(root, megabytes)
        steps = max(1, rows // batch)
        source = iter_batches(
            spec, {"data.py": MAKE_BATCH}, 0, Path(tmp) / "work", datasets={"bench": root}
        )
        loader = PrefetchLoader(source, depth=4, parallel=True)
        try:
            for _ in range(steps):  # warm-up: the sandbox starts, the pages are cached
                next(loader)
            delivered = 0
            started = time.perf_counter()
            for _ in range(steps):
                inputs, targets = next(loader)
                delivered += inputs.nbytes + targets.nbytes
            elapsed = time.perf_counter() - started
        finally:
            loader.close()
    return delivered / elapsed / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=256, help="data set size in MB")
    parser.add_argument("--batch", type=int, default=1024, help="rows per batch (4 KiB each)")
    args = parser.parse_args()
    rate = measure_feed_mb_per_s(args.mb, args.batch)
    print(f"memmapped .npy through the data sandbox: {rate:.0f} MB/s", file=sys.stderr)
    print(json.dumps({"feed_mb_per_s": round(rate, 1)}))


if __name__ == "__main__":
    main()
