"""Core ATen op coverage on the wafer, op by op, against eager PyTorch (OpInfo's samples).

For every operator name of PyTorch's Core ATen opset (overloads tagged torch.Tag.core), the
OpInfo samples that dispatch it are traced as SAM's front end traces a training step, run on the
wafer runtime's kernels and compared with eager on the CPU (fp32, rtol 1e-3): the outputs, then
the gradients (a vector-Jacobian product with a fixed random cotangent). Ops that make no sense on
the wafer are refused with a reason (compiler/core_ops.py REFUSED). See
tests/compiler/opinfo_harness.py for the rules.

    python benchmarks/op_coverage.py [--samples N] [--ops add,mm,...] [--table]

--samples N: at most N samples per op (default: every sample OpInfo has); --table prints the
per-op table on stderr. Ends with one JSON line:
{"core_ops": N, "supported": .., "fwd_match": .., "bwd_match": .., "no_gradient": ..,
 "refused_with_reason": .., "failing": {op: why}, "samples": .., "seconds": ..}
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=None, help="samples per op (default all)")
    parser.add_argument("--ops", default=None, help="comma-separated core op names (default all)")
    parser.add_argument("--table", action="store_true", help="print the per-op table on stderr")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from tests.compiler.opinfo_harness import format_row, measure, summary

    only = set(args.ops.split(",")) if args.ops else None
    start = time.perf_counter()
    report = measure(args.samples, only)
    figures = summary(report)
    figures["samples"] = sum(c.samples for c in report.values())
    figures["seconds"] = round(time.perf_counter() - start, 1)
    if args.table:
        for cov in report.values():
            print(format_row(cov), file=sys.stderr)
    print(
        f"{figures['fwd_match']} of {figures['core_ops']} core ops match eager forward, "
        f"{figures['bwd_match']} with gradients; {figures['refused_with_reason']} refused with a "
        f"reason; {len(figures['failing'])} failing (load {os.getloadavg()[0]:.1f})",
        file=sys.stderr,
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
