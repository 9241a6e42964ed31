"""Refusing what a captured train step cannot compile, naming the user's file and line.

A compiled step runs on the wafer, so Python cannot read a tensor's value inside it: `.item()`,
`float(t)`, `bool(t)` or an `if` on a tensor. `UserScalarReads` (a torch-function mode active
while the step is traced) catches such a read made by the user's own code (torch.optim's internal
reads of its 0-d step counts are left to tracing), and `step_error` turns a tracing failure into
a `DataDependentStep` at the user's line or a `ModelError` naming where the step raised.
"""

from __future__ import annotations

import linecache
import traceback
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from compiler.errors import CompileError, ModelError

_COMPILER_DIR = str(Path(__file__).resolve().parent)
_TORCH_DIR = str(Path(torch.__file__).resolve().parent)


class DataDependentStep(ModelError):
    """The train step reads a tensor's value in Python (`.item()`, `float()`, an `if` on a
    tensor): the wafer computes that value, so a compiled step cannot depend on it."""


class UserScalarReads(TorchFunctionMode):
    """Refuses a tensor's value read in Python (`.item()`, `float()`, `bool()`...) by the user's
    own code; torch.optim's internal reads (of its 0-d step counts) are left to tracing."""

    def __torch_function__(
        self, func: Any, types: Any, args: Any = (), kwargs: Any = None
    ) -> object:
        if getattr(func, "__name__", "") in _READS:
            frames = traceback.extract_stack()[:-1]
            while frames and _is_plumbing(frames[-1].filename):
                frames.pop()
            if frames and _is_user_file(frames[-1].filename):
                frame = frames[-1]
                raise _refusal(
                    frame.filename, frame.lineno or 0, frame.name, "reads a tensor's value"
                )
        return func(*args, **(kwargs or {}))


_READS = frozenset(
    {"item", "tolist", "__float__", "__int__", "__bool__", "__index__", "__complex__"}
)


def _is_plumbing(filename: str) -> bool:
    """torch's own Python between a user's call and the function mode."""
    path = filename.replace("\\", "/")
    return path.endswith(("torch/_tensor.py", "torch/overrides.py", "torch/utils/_device.py"))


def step_error(exc: BaseException) -> CompileError:
    """The error for an exception raised while tracing the step: a data-dependent read names the
    user's line; anything else is the user's code raising."""
    frames = [(f.filename, f.lineno or 0, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    user = [f for f in frames if _is_user_file(f[0])]
    text = f"{type(exc).__name__}: {exc}"
    data_dependent = (
        any(
            marker in text
            for marker in ("data-dependent", "DataDependent", "_local_scalar_dense", "is_nonzero")
        )
        or "DataDependent" in type(exc).__name__
    )
    if data_dependent and user:
        library = _library_callee(frames, user[-1])
        if library is not None:
            return _library_refusal(*user[-1], library)
        return _refusal(*user[-1], default="branches on a tensor's value")
    where = f" (at {Path(user[-1][0]).name}:{user[-1][1]} in {user[-1][2]})" if user else ""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return ModelError(
        f"tracing train_step_fn raised {type(exc).__name__}: {first}{where}",
        {"traceback": [f"{Path(f).name}:{n} in {fn}" for f, n, fn in (user or frames)[-12:]]},
    )


_PLUMBING = (
    "fx/",
    "_subclasses/",
    "_dynamo/",
    "_prims",
    "_refs/",
    "_decomp/",
    "utils/_",
    "overrides.py",
    "_tensor.py",
    "_ops.py",
    "_compile.py",
    "__init__.py",
    "_meta_registrations.py",
)


def _library_callee(
    frames: list[tuple[str, int, str]], user: tuple[str, int, str]
) -> tuple[str, int, str] | None:
    """The torch library frame (torch/amp/grad_scaler.py, torch/optim/...) that the user's line
    called and that read the value, or None when the user's own line did."""
    index = frames.index(user)
    library = None
    for filename, line, func in frames[index + 1 :]:
        path = str(Path(filename).resolve())
        if not path.startswith(_TORCH_DIR):
            break
        relative = path[len(_TORCH_DIR) + 1 :]
        if relative.startswith(_PLUMBING):
            break
        library = (f"torch/{relative}", line, func)
    return library


def _library_refusal(
    filename: str, line: int, func: str, library: tuple[str, int, str]
) -> DataDependentStep:
    code = (linecache.getline(filename, line) or "").strip()
    where, at, inner = library
    place = f"{Path(filename).name}:{line} in {func}"
    return DataDependentStep(
        f"{place}: `{code}` runs {where}:{at} in {inner}, which reads a tensor's value in "
        "Python (data-dependent control flow inside torch). The wafer computes tensor values "
        "during the step, so this call cannot be part of a compiled step; leave it out of "
        "train_step_fn",
        {"file": Path(filename).name, "line": line, "function": func, "code": code},
    )


def _refusal(filename: str, line: int, func: str, default: str) -> DataDependentStep:
    code = (linecache.getline(filename, line) or "").strip()
    why = _why(code, default)
    place = f"{Path(filename).name}:{line} in {func}"
    return DataDependentStep(
        f"{place}: `{code}` {why}. The wafer computes tensor values during the step, so a "
        "compiled step cannot read them in Python: keep the value a tensor (return the loss, "
        "not loss.item()) and write a branch on a tensor as torch.where",
        {"file": Path(filename).name, "line": line, "function": func, "code": code},
    )


def _why(code: str, default: str) -> str:
    words = code.split()
    first = words[0] if words else ""
    if first in ("if", "elif", "while", "assert") or " if " in code:
        return "branches on a tensor's value (data-dependent control flow)"
    for call in (".item()", ".tolist()", "float(", "int(", "bool("):
        if call in code:
            return f"reads a tensor's value in Python ({call.rstrip('(')})"
    return default


def _is_user_file(filename: str) -> bool:
    path = str(Path(filename).resolve()) if not filename.startswith("<") else filename
    if filename.startswith("<") or path.startswith(_TORCH_DIR) or path.startswith(_COMPILER_DIR):
        return False
    return "site-packages" not in path and "/lib/python3" not in path
