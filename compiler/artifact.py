"""The compiled artifact ("sam-artifact/1"): a relocatable directory with no pickled code.

Layout (all JSON or .npz loaded with allow_pickle=False):
- `manifest.json`: {"format": "sam-artifact/1", "compiler_version", "torch_version", "cache_key",
  "arch", "region": {"rows", "cols"}, "execution_mode", "fp16", "batch_size",
  "optimizer_state_offload", "summary" (the compile summary), "micro_batches" (the graph is one
  micro-batch's step; "batch_size" is the whole batch), "loss_scaling" (bool),
  "kernels": [{"id": "k3", "nodes": ["n5", ...], "op": "matmul"|"conv"|"softmax"|"layer_norm"|
               "embedding"|"pool"|"loss"|"elementwise" (the kernel's main op family),
               "rect": [r, c, h, w] (region-relative, disjoint), "flops": int,
               "weights": ["p0", ...] (param inputs owned: their grads/optimizer state live here too),
               "memory_per_pe": {"weights", "gradients", "optimizer", "activations", "reserve"},
               "est_cycles": int}],
  "memory": {"peak_bytes_per_pe", "limit_bytes_per_pe", "sram_bytes_per_pe", "reserve_bytes_per_pe",
             "by_category": {...} (at the peak kernel), "peak_kernel"},
  "memory_map": {"k3": [{"symbol": "p0", "category": "weights", "offset": int, "bytes_per_pe": int}]},
  "estimated_cycles_per_step": int, "flops_per_step": int,
  "weight_streaming": {"enabled": bool, "streamed_bytes_per_step": int, "host_cycles_per_step": int},
  "inputs": [...the IR inputs...], "outputs": [...the IR outputs...],
  "model": {...}, "data": {...}, "train": {...}, "run_options": {...} (from the compiling spec;
  the runtime should take run_options from the job it runs, since the cache key ignores them)}
  Kernels are listed in execution order: running each kernel's nodes in order, kernel after
  kernel, respects every dependency. In pipelined mode the rects are disjoint and cover the
  region; in weight_streaming mode every kernel's rect is the whole region (they run in turn
  while their weights stream in) and "weight_streaming.streamed_bytes_per_step" is the host
  traffic (weights in, gradients out) the runtime should charge.
- `graph.json`: the SAM-IR (`compiler.ir`) with each node's "kernel" filled in.
- `init.npz`: the initial value of every input with role param/buffer/opt_state/constant.
- `program/<kernel id>.json`: {"kernel": id, "op", "rect", "nodes": [the kernel's IR nodes in order]}.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compiler.integrity import hash_files, verify_artifact
from compiler.ir import canonical_json, validate_graph

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sam_domain.compile import Manifest
    from sam_domain.ir import IrGraph

FORMAT = "sam-artifact/1"


@dataclass
class Artifact:
    """A loaded artifact: its manifest, its graph and its initial tensors by IR input name."""

    path: Path
    manifest: dict[str, Any]
    graph: IrGraph
    tensors: dict[str, np.ndarray]

    def program(self, kernel_id: str) -> dict[str, object]:
        """The per-kernel program file of `kernel_id`."""
        program: dict[str, object] = json.loads(
            (self.path / "program" / f"{kernel_id}.json").read_text()
        )
        return program


def load_artifact(path: Path | str, *, expected_digest: str | None = None) -> Artifact:
    """Read an artifact directory; raises ValueError if it is not a sam-artifact/1, and
    `ArtifactCorrupt` if a file does not match its hash (or the manifest `expected_digest`)."""
    root = Path(path)
    manifest = verify_artifact(root, expected_digest)
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{root} is not a {FORMAT} artifact (format={manifest.get('format')!r})")
    graph = json.loads((root / "graph.json").read_text())
    validate_graph(graph)
    with np.load(root / "init.npz", allow_pickle=False) as npz:
        tensors = {k: npz[k] for k in npz.files}
    return Artifact(root, manifest, graph, tensors)


def write_artifact(
    final_dir: Path, manifest: Manifest, graph: IrGraph, tensors: dict[str, np.ndarray]
) -> Path:
    """Write atomically: build in a temp dir beside `final_dir`, then rename into place.

    If another process already published `final_dir` (same cache key), its copy is kept and ours
    discarded, so concurrent compiles never leave a half-written artifact. Returns the path;
    `compiler.integrity.artifact_digest(path)` is the digest to keep beside it.
    """
    final_dir = Path(final_dir)
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final_dir.name}.", dir=final_dir.parent))
    try:
        _write_files(tmp, manifest, graph, tensors)
        try:
            os.rename(tmp, final_dir)
        except OSError:
            if not (final_dir / "manifest.json").exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final_dir


def _write_files(
    root: Path, manifest: Manifest, graph: IrGraph, tensors: dict[str, np.ndarray]
) -> None:
    (root / "program").mkdir()
    nodes = {n["name"]: n for n in graph["nodes"]}
    for kernel in manifest["kernels"]:
        program = {
            "kernel": kernel["id"],
            "op": kernel["op"],
            "rect": kernel["rect"],
            "nodes": [nodes[name] for name in kernel["nodes"]],
        }
        (root / "program" / f"{kernel['id']}.json").write_text(canonical_json(program))
    (root / "graph.json").write_text(canonical_json(graph))
    # np.asarray(order="C"), not ascontiguousarray, which turns a 0-d scalar state into shape (1,)
    # numpy's stubs let **arrays collide with savez's allow_pickle: bool keyword, hence the ignore
    np.savez(root / "init.npz", **{k: np.asarray(v, order="C") for k, v in tensors.items()})  # type: ignore[arg-type]
    # The manifest is written last: its presence marks a complete artifact. It lists every
    # other file's hash, so a file changed later is caught on load (compiler.integrity).
    written = manifest.copy()
    written["files"] = hash_files(root)
    (root / "manifest.json").write_text(json.dumps(written, indent=1, sort_keys=True))
