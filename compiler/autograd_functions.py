"""Old-style `torch.autograd.Function`s (a `forward(ctx, ...)` without `setup_context`) traced
with their own backward.

The front end differentiates the step with `torch.func.grad`, and functorch transforms only take
Functions that split the forward from `setup_context` ("must override the setup_context
staticmethod"). Library code still writes the old style (BLOOM's GeLU, many fused activations).
While tracing, `old_style_functions()` routes such a Function through a generated new-style
subclass: its `forward(*args)` runs the original forward with a recording context, and its
`setup_context` replays on the real context what that forward did (saved tensors, attributes,
`mark_non_differentiable`, `mark_dirty`, `set_materialize_grads`), with each input or output
mapped to the object the transform hands to `setup_context`. The user's `backward` (and `jvp`)
run unchanged on the real context.

Both styles also need a functionalization rule, which torch leaves unimplemented ("NYI:
Functionalize rule for custom_function_call"): the front end traces `functionalize(step)`, so
below the grad level a Function's forward meets the functionalize level. There only the forward's
value is needed (the grad level above owns the backward), so the rule runs the forward's
operations on the functional tensors themselves, and in-place ops inside it are functionalized
like any other.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch._C._functorch import TransformType
from torch._functorch.autograd_function import custom_function_call
from torch.autograd.function import Function, _SingleLevelFunction

_ORIGINAL_APPLY = Function.__dict__["apply"]
_CONVERTED: dict[type, type] = {}
_PENDING = threading.local()
_PATCH_LOCK = threading.Lock()


class _RecordingContext:
    """Stands in for ctx inside an old-style forward and remembers what the forward did to it."""

    def __init__(self) -> None:
        object.__setattr__(self, "_calls", [])
        object.__setattr__(self, "_attrs", {})

    def __setattr__(self, name: str, value: Any) -> None:
        self._attrs[name] = value

    def __getattr__(self, name: str) -> Any:
        attrs = object.__getattribute__(self, "_attrs")
        if name in attrs:
            return attrs[name]
        if name == "saved_tensors":
            return next((args for kind, args in self._calls if kind == "save_for_backward"), ())
        if name == "needs_input_grad":
            raise AttributeError(
                "ctx.needs_input_grad inside forward is not known while SAM traces the step; "
                "read it in backward"
            )
        raise AttributeError(name)

    def save_for_backward(self, *tensors: Any) -> None:
        self._calls.append(("save_for_backward", tensors))

    def mark_non_differentiable(self, *tensors: Any) -> None:
        self._calls.append(("mark_non_differentiable", tensors))

    def mark_dirty(self, *tensors: Any) -> None:
        self._calls.append(("mark_dirty", tensors))

    def set_materialize_grads(self, value: bool) -> None:
        self._calls.append(("set_materialize_grads", (value,)))

    def save_for_forward(self, *tensors: Any) -> None:
        self._calls.append(("save_for_forward", tensors))


def _stack() -> list[tuple[_RecordingContext, tuple[Any, ...], Any]]:
    if not hasattr(_PENDING, "stack"):
        _PENDING.stack = []
    stack: list[tuple[_RecordingContext, tuple[Any, ...], Any]] = _PENDING.stack
    return stack


def _flat(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _replay(ctx: Any, recorded: _RecordingContext, inputs: Any, output: Any, seen: Any) -> None:
    """Do on the real ctx what the forward did on the recording one; a tensor that was one of the
    forward's own inputs or outputs becomes the matching object setup_context received."""
    seen_inputs, seen_output = seen
    mapping = {id(a): b for a, b in zip(seen_inputs, inputs, strict=False)}
    mapping.update({id(a): b for a, b in zip(_flat(seen_output), _flat(output), strict=False)})

    def mapped(values: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(mapping.get(id(v), v) for v in values)

    for name, value in recorded._attrs.items():
        setattr(ctx, name, value)
    for kind, args in recorded._calls:
        if kind == "set_materialize_grads":
            ctx.set_materialize_grads(*args)
        else:
            getattr(ctx, kind)(*mapped(args))


def _new_style(cls: type) -> type:
    """A subclass of old-style `cls` with a ctx-free forward and a setup_context (cached)."""
    if cls in _CONVERTED:
        return _CONVERTED[cls]
    original_forward = cls.forward  # type: ignore[attr-defined]

    def forward(*args: Any) -> Any:
        recorded = _RecordingContext()
        output = original_forward(recorded, *args)
        _stack().append((recorded, args, output))
        return output

    def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
        recorded, seen_inputs, seen_output = _stack().pop()
        _replay(ctx, recorded, tuple(inputs), output, (seen_inputs, seen_output))

    converted = type(
        cls.__name__,
        (cls,),
        {
            "forward": staticmethod(forward),
            "setup_context": staticmethod(setup_context),
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
        },
    )
    _CONVERTED[cls] = converted
    return converted


def _is_old_style(cls: type) -> bool:
    return getattr(cls, "setup_context", None) is _SingleLevelFunction.setup_context


def _apply(cls: type, *args: Any, **kwargs: Any) -> Any:
    if _is_old_style(cls) and torch._C._are_functorch_transforms_active():
        cls = _new_style(cls)
    return _ORIGINAL_APPLY.__get__(None, cls)(*args, **kwargs)


def _functionalize_rule(interpreter: Any, autograd_function: type, *operands: Any) -> Any:
    """custom_function_call at the functionalize level: the forward's value, computed there."""
    return autograd_function.forward(*operands)  # type: ignore[attr-defined]


@contextmanager
def custom_functions() -> Iterator[None]:
    """While tracing, let old- and new-style autograd.Functions run under
    functionalize(torch.func.grad(...)), each with its own backward."""
    table = custom_function_call.functorch_table
    with _PATCH_LOCK:
        saved_rule = table.get(TransformType.Functionalize)
        Function.apply = classmethod(_apply)
        table[TransformType.Functionalize] = _functionalize_rule
        try:
            yield
        finally:
            Function.apply = _ORIGINAL_APPLY
            if saved_rule is None:
                table.pop(TransformType.Functionalize, None)
            else:
                table[TransformType.Functionalize] = saved_rule
            _stack().clear()
