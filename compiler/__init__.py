"""SAM's compiler: a user's PyTorch model + job spec -> a placed, memory-checked wafer artifact.

Public entry points (imported lazily, so `import compiler` does not import torch):
- `compile_job(spec, files, *, region, cache_dir, arch=None, mode=None, limits=None) -> CompileResult`
- `min_region_for(spec, files, arch=None) -> (rows, cols)`
- `trace_training_step(spec, files=None) -> TracedStep` (in-process; trusted code only)
- `load_artifact(path) -> Artifact`, `iter_batches(spec, files, start_step, workdir)`,
  `SandboxLimits`, `warm_sandbox()` (pre-start a sandbox for the next trace),
  `probe_sandbox()` (what the tenant-code sandbox provides here), and
  `compiler.errors`.
"""

from __future__ import annotations

# Not `import typing`: this package is imported at the start of every sandbox.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

COMPILER_VERSION = "0.1.0"

_EXPORTS = {
    "compile_job": "compiler.driver",
    "CompileResult": "compiler.driver",
    "min_region_for": "compiler.driver",
    "trace_training_step": "compiler.frontend",
    "TracedStep": "compiler.frontend",
    "load_artifact": "compiler.artifact",
    "Artifact": "compiler.artifact",
    "iter_batches": "compiler.data",
    "synthetic_batch": "compiler.data",
    "SandboxLimits": "compiler.sandbox.limits",
    "probe_sandbox": "compiler.sandbox.health",
    "warm_sandbox": "compiler.sandbox.warm",
    "CompileError": "compiler.errors",
}

__all__ = ["COMPILER_VERSION", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'compiler' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module_name), name)
