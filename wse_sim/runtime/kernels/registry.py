"""The kernel registry: one factory per ATen target string of the SAM IR.

A factory receives the node's static context once, when a job is loaded, and returns the closure
that the executor calls every step with the node's resolved arguments (tensors as numpy arrays,
everything else as plain Python values, in ATen's own argument order). Binding per-node facts
(kernel rectangle, precision, RNG stream) at load keeps the per-step path free of lookups.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

Scalar = bool | int | float
"""An argument ATen types `Scalar` (alpha, a fill value, a clamp bound): a plain Python number."""

Operand = np.ndarray | bool | int | float
"""An argument that is a tensor in one overload and a Scalar in another (`aten.add.Tensor` /
`aten.add.Scalar`): a numpy array, or a number."""

Ints = int | Sequence[int]
"""ATen's `int[N]` (kernel size, stride, padding, dims): one int, repeated, or one per axis."""

IrDtype = str | Mapping[str, str] | None
"""A dtype as the IR writes an argument: "float32", "torch.float32", {"dtype": ...} or None."""

KernelImpl = Callable[..., object]
_Impl = TypeVar("_Impl", bound=KernelImpl)


@dataclass(frozen=True)
class NodeContext:
    """What a kernel factory may know about its node (all fixed at load time).

    rect: the kernel's (row, col, rows, cols) inside the job's region.
    shape / shapes: output shape, or shapes of a tuple output.
    step_of: the training step being executed (for counter-based RNG streams).
    """

    name: str
    target: str
    dtype: str
    shape: tuple[int, ...] | None
    shapes: tuple[tuple[int, ...], ...] | None
    rect: tuple[int, int, int, int]
    fp16: bool
    seed: int
    node_index: int
    step_of: Callable[[], int] = lambda: 0


KernelFactory = Callable[[NodeContext], KernelImpl]
KERNELS: dict[str, KernelFactory] = {}


def factory(*targets: str) -> Callable[[KernelFactory], KernelFactory]:
    """Register a factory that builds a per-node closure from a NodeContext."""

    def register(make: KernelFactory) -> KernelFactory:
        for target in targets:
            KERNELS[target] = make
        return make

    return register


def simple(*targets: str) -> Callable[[_Impl], _Impl]:
    """Register a context-free kernel: the same function serves every node of these targets."""

    def register(impl: _Impl) -> _Impl:
        def make(ctx: NodeContext) -> KernelImpl:
            return impl

        for target in targets:
            KERNELS[target] = make
        return impl

    return register


NUMPY_DTYPES: dict[str, type[np.generic]] = {
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": np.float32,  # no numpy bf16: computed in fp32 (documented in kernels/__init__)
    "float64": np.float64,
    "int64": np.int64,
    "int32": np.int32,
    "int16": np.int16,
    "int8": np.int8,
    "uint8": np.uint8,
    "bool": np.bool_,
}


def numpy_dtype(name: IrDtype, default: npt.DTypeLike | None = None) -> npt.DTypeLike | None:
    """The numpy dtype for an IR dtype value (a string, {"dtype": s} or None -> default)."""
    if name is None:
        return default
    if isinstance(name, dict):
        name = name.get("dtype")
    name = str(name).removeprefix("torch.")
    if name not in NUMPY_DTYPES:
        raise UnsupportedKernelError(f"dtype {name!r}")
    return NUMPY_DTYPES[name]


class UnsupportedKernelError(Exception):
    """The artifact uses an op or dtype the runtime's kernel library lacks.

    Recompile with a compiler version matching this runtime, or rewrite the model to avoid the op.
    """


def kernel_factory(target: str) -> KernelFactory:
    """The registered factory for `target`, or UnsupportedKernelError naming it."""
    try:
        return KERNELS[target]
    except KeyError:
        raise UnsupportedKernelError(
            f"no runtime kernel for {target!r}; recompile with a compiler whose SUPPORTED_OPS "
            "matches this runtime"
        ) from None
