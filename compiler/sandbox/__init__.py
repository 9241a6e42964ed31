"""The sandbox every piece of tenant code runs in (bubblewrap + seccomp; see `launcher`).

Public surface (imported lazily, so the child side starts without numpy):
- `run_trace(spec, files, limits=None) -> (graph, tensors, info)`: model import and trace;
- `stream_batches(spec, files, start_step, workdir=None, limits=None, should_stop=None)`:
  make_batch frames, validated against the spec;
- `run_task(task, payload, files, limits=None, collect=None)`: any task ("empty" measures the
  start-up cost);
- `warm_sandbox()`: keep one sandbox pre-started (torch imported) for the next trace;
- `probe() -> dict`: what this worker's sandbox provides (or what is missing);
- `SandboxLimits`, `DATA_LIMITS`, `SandboxUnavailable` (fail closed: tenant code is refused).
"""

from __future__ import annotations

# Not `import typing`: this package is imported at the start of every sandbox.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_EXPORTS = {
    "run_trace": "compiler.sandbox.trace",
    "stream_batches": "compiler.sandbox.stream",
    "run_task": "compiler.sandbox.runner",
    "probe": "compiler.sandbox.health",
    "warm_sandbox": "compiler.sandbox.warm",
    "SandboxLimits": "compiler.sandbox.limits",
    "DATA_LIMITS": "compiler.sandbox.limits",
    "SandboxUnavailable": "compiler.sandbox.limits",
    "limits_dict": "compiler.sandbox.limits",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'compiler.sandbox' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module_name), name)
