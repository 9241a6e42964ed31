"""Core ATen op coverage on the wafer, op by op, against eager PyTorch (OpInfo's samples).

For every operator name of PyTorch's Core ATen opset (overloads tagged torch.Tag.core), the
OpInfo samples that dispatch it are traced as SAM's front end traces a training step, run on the
wafer runtime's kernels and compared with eager on the CPU (fp32, rtol 1e-3): the outputs, then
the gradients (a vector-Jacobian product with a fixed random cotangent). Ops that make no sense on
the wafer are refused with a reason (compiler/core_ops.py REFUSED). See
tests/compiler/opinfo_harness.py for the rules.

    python benchmarks/op_coverage.py [--samples N] [--ops add,mm,...] [--table] [--markdown F]

--samples N: at most N samples per op (default: every sample OpInfo has); --table prints the
per-op table on stderr; --markdown F writes it to F as a Markdown page (benchmarks/op_coverage.md
is the one README.md links). Ends with one JSON line:
{"core_ops": N, "supported": .., "fwd_match": .., "bwd_match": .., "no_gradient": ..,
 "refused_with_reason": .., "failing": {op: why}, "refused_samples": {op: "n of m: why"},
 "skipped_samples": {op: n}, "samples": .., "seconds": ..}
refused_samples are the samples the compiler refuses for their arguments (a boolean mask index),
with the reason a user gets; skipped_samples the ones no training step can pose (an input that
is a view into a larger storage).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def markdown_table(report: dict[str, Any], figures: dict[str, Any], when: str) -> str:
    """The per-op table as a Markdown page (benchmarks/op_coverage.md)."""
    from tests.compiler.opinfo_harness import table_row

    lines = [
        "# Core ATen op coverage on the wafer",
        "",
        "Written by `python benchmarks/op_coverage.py --table --markdown benchmarks/op_coverage.md`"
        f" ({when}; {figures['samples']} OpInfo samples, {figures['seconds']} s). Each core op's "
        "samples traced as a training step traces them, run on the wafer runtime's kernels and "
        "compared with eager fp32 (rtol 1e-3), outputs then gradients; see "
        "tests/compiler/opinfo_harness.py for the rules. State: `fwd+bwd` outputs and gradients "
        "match, `fwd` outputs match and there is no gradient, `supported` random values (checked "
        "for support only), `refused` refused at compile with the reason shown, `FAILING` not "
        "(yet) matching.",
        "",
        "| op | state | samples | note |",
        "|---|---|---|---|",
    ]
    for cov in report.values():
        name, state, count, note = table_row(cov)
        lines.append(f"| `{name}` | {state} | {count} | {note.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=None, help="samples per op (default all)")
    parser.add_argument("--ops", default=None, help="comma-separated core op names (default all)")
    parser.add_argument("--table", action="store_true", help="print the per-op table on stderr")
    parser.add_argument("--markdown", default=None, help="write the per-op table to this file")
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
    if args.markdown:
        load = "/".join(f"{v:.1f}" for v in os.getloadavg())
        head = f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load}"
        Path(args.markdown).write_text(markdown_table(report, figures, head))
    print(
        f"{figures['fwd_match']} of {figures['core_ops']} core ops match eager forward, "
        f"{figures['bwd_match']} with gradients; {figures['refused_with_reason']} refused with a "
        f"reason; {len(figures['failing'])} failing (load {os.getloadavg()[0]:.1f})",
        file=sys.stderr,
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
