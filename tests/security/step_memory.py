"""What one training step of an artifact really holds in host memory, for the tests that check
the artifact's planned host bytes against it."""

from __future__ import annotations

import tracemalloc
from typing import Any


def traced_step_peak(artifact: Any, spec: dict[str, Any], region: tuple[int, int]) -> int:
    """The numpy memory one step allocates at its peak (tracemalloc), the artifact loaded on a
    wafer of exactly region and fed spec's synthetic batch 0."""
    import wse_sim.runtime as rt
    from compiler.data import synthetic_batch
    from wse_sim import Wafer

    rows, cols = region
    job = rt.load(artifact, Wafer("wse2", rows=rows, cols=cols), (0, 0, rows, cols), "probe")
    x, y = synthetic_batch(spec, 0)
    tracemalloc.start()
    try:
        job.step(x, y)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
