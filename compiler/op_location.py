"""Where an op of the traced step comes from, in words a user can act on.

An unsupported op or a failure is reported as the PyTorch call that produced it, at the line that
called it (the user's own line, or the library's: `torch.roll at timm/models/swin_transformer.py:560
in forward`), then the user's line that reached it (`from model.py:11 in forward`). Forward nodes
carry their Python stack (make_fx's `stack_trace`); a backward node carries none, so it takes the
location of the forward node whose autograd node produced it (the same `seq_nr`, which the front
end records while tracing: `backward_seq_nr`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)\s*$')
_CALL = re.compile(r"([A-Za-z_][\w.]*)\s*\(")


@dataclass(frozen=True)
class Frame:
    """One Python frame of a stack: file path, line number, function and the line's code."""

    path: str
    line: int
    func: str
    code: str = ""


@dataclass(frozen=True)
class Location:
    """call: the PyTorch call ('torch.roll', 'F.group_norm' or the line's code in backquotes);
    site: where it was called ('timm/models/swin_transformer.py:560 in forward');
    user: the user's line that reached it ('model.py:11 in forward'), None when the call is
    the user's own line or no user file is on the stack; in_user_code: the call is on a line the
    user can rewrite; backward: the op is part of the call's gradient."""

    call: str | None
    site: str | None
    user: str | None
    in_user_code: bool
    backward: bool = False

    def describe(self) -> str:
        """'torch.roll at timm/models/swin_transformer.py:560 in forward, from model.py:11 in
        forward' (prefixed 'the backward of ' for a gradient op)."""
        if self.site is None:
            return "the backward pass" if self.backward else "the training step (not the model)"
        text = f"{self.call} at {self.site}" if self.call else self.site
        if self.user:
            text += f", from {self.user}"
        return f"the backward of {text}" if self.backward else text


def parse_stack(stack_trace: str | None) -> list[Frame]:
    """The frames of an FX node's `stack_trace` (outermost first)."""
    frames: list[Frame] = []
    for line in (stack_trace or "").splitlines():
        match = _FRAME.match(line)
        if match:
            frames.append(Frame(match[1], int(match[2]), match[3]))
        elif frames and line.strip() and not frames[-1].code:
            last = frames[-1]
            frames[-1] = Frame(last.path, last.line, last.func, line.strip())
    return frames


def _is_torch(path: str) -> bool:
    return "/torch/" in path.replace("\\", "/")


def _is_compiler(path: str) -> bool:
    return "/compiler/" in path.replace("\\", "/") and not path.endswith("/builtins.py")


def _is_user(path: str, wanted: set[str] | None) -> bool:
    """A frame of the user's files (`wanted` names them; None: any file outside Python's
    installation and torch) or of SAM's built-in models."""
    path = path.replace("\\", "/")
    name = PurePosixPath(path).name
    if name == "builtins.py":
        return "/compiler/" in path
    if "site-packages/" in path or "/lib/python" in path or path.startswith("<"):
        return False
    return wanted is None or name in wanted


def short_path(path: str, user: bool) -> str:
    """A user file by its name; a library file from its package ('timm/models/swin.py')."""
    path = path.replace("\\", "/")
    if user:
        return PurePosixPath(path).name
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    return "/".join(path.split("/")[-3:])


def locate(
    frames: list[Frame], user_files: tuple[str, ...] | None, op: str | None = None
) -> Location | None:
    """The Location of an op traced with `frames` on the stack; None without any frame outside
    torch and the compiler. `op` ('aten.roll.default') picks the call's name out of its line;
    user_files None: every file outside Python's installation is the user's."""
    wanted = None if user_files is None else {PurePosixPath(n).name for n in user_files}
    outside = [
        (i, f) for i, f in enumerate(frames) if not _is_torch(f.path) and not _is_compiler(f.path)
    ]
    if not outside:
        return None
    index, site = outside[-1]
    in_user = _is_user(site.path, wanted)
    users = [f for f in frames[: index + 1] if _is_user(f.path, wanted)]
    user = users[-1] if users else None
    # torch's Python API below the site (nn.GroupNorm's forward calling F.group_norm) may name
    # the call better than the site's line (`x = self.norm1(x)`): the outermost that matches
    inner = [f for f in frames[index + 1 :] if _is_torch_api(f.path)]
    call = _call_name([site, *inner], op) or (f"`{site.code}`" if site.code else None)
    where = f"{short_path(site.path, in_user)}:{site.line} in {site.func}"
    reached = None
    if user is not None and user is not site:
        reached = f"{short_path(user.path, True)}:{user.line} in {user.func}"
    return Location(call, where, reached, in_user)


def _is_torch_api(path: str) -> bool:
    path = path.replace("\\", "/")
    if path.endswith("/torch/nn/modules/module.py"):  # Module.__call__'s machinery
        return False
    return "/torch/nn/" in path or path.endswith(("/torch/functional.py", "/torch/_tensor.py"))


def _call_name(frames: list[Frame], op: str | None) -> str | None:
    """The called name on these lines that matches aten op `op` ('torch.argsort' for aten.sort,
    'F.conv2d' for aten.convolution; a module attribute such as `self.conv` last), else the only
    dotted call on a torch API line below the site (`F.linear` for a Linear's addmm)."""
    stem = op.split(".")[1].lstrip("_") if op and op.count(".") >= 1 else ""
    stem = stem.removeprefix("native_").removesuffix("_forward")
    calls: list[list[str]] = [
        [str(n) for n in _CALL.findall(f.code) if n not in ("super", "print")] for f in frames
    ]
    if stem:
        for attribute in (False, True):
            for names in calls:
                for name in names:
                    if name.startswith("self.") != attribute:
                        continue
                    last = name.rsplit(".", 1)[-1].lower().strip("_")
                    if _matches(stem, last):
                        return name
    for names in reversed(calls[1:]):  # innermost first: the call that ran (or raised)
        if len(names) == 1 and "." in names[0] and not names[0].startswith("self."):
            return names[0]
    return calls[0][0] if len(calls[0]) == 1 and "." in calls[0][0] else None


def _matches(stem: str, name: str) -> bool:
    if not name:
        return False
    if stem == name or _common_prefix(stem, name) >= 4:
        return True
    return min(len(stem), len(name)) >= 4 and (stem in name or name in stem)


def _common_prefix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def node_locations(
    nodes: list[Any], user_files: tuple[str, ...], target_name: Callable[[Any], str]
) -> dict[Any, Location]:
    """Location of every call_function FX node that has one: forward nodes from their stack,
    backward nodes from the forward node with their seq_nr."""
    located: dict[Any, Location] = {}
    forward_by_seq: dict[int, Location] = {}
    for node in nodes:
        if node.op != "call_function":
            continue
        original = node.meta.get("original_aten")
        op = str(original) if original is not None else target_name(node.target)
        backward = bool(node.meta.get("autograd_backward"))
        found = (
            None if backward else locate(parse_stack(node.meta.get("stack_trace")), user_files, op)
        )
        seq = node.meta.get("seq_nr")
        if found is not None:
            located[node] = found
            if isinstance(seq, int):
                forward_by_seq.setdefault(seq, found)
        elif backward and isinstance(seq, int) and seq in forward_by_seq:
            fwd = forward_by_seq[seq]
            located[node] = Location(fwd.call, fwd.site, fwd.user, fwd.in_user_code, True)
    return located


@contextmanager
def full_stack_traces() -> Iterator[None]:
    """make_fx records every frame below the first `forward` (library helpers such as timm's
    `patch_dropout_forward` included), not only the frames of functions named `forward`."""
    from torch.fx.experimental.proxy_tensor import PythonKeyTracer

    inherited = PythonKeyTracer._filter_traceback_frames

    def keep_all(self: Any, summary: Any) -> object:
        self._record_forward_stack_traces_only = False
        return inherited(self, summary)

    PythonKeyTracer._filter_traceback_frames = keep_all  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        del PythonKeyTracer._filter_traceback_frames


@contextmanager
def backward_seq_nr() -> Iterator[None]:
    """While tracing: every backward FX node records the seq_nr of the autograd node that ran
    it (equal to its forward node's), and `autograd_backward` in its meta.

    Installs pre/post hooks on the autograd graph each time the engine runs a backward (as
    torch.compile's non-strict tracing does), within fx's preserve_node_meta."""
    import torch
    import torch.autograd.graph as autograd_graph
    from torch.fx import traceback as fx_traceback

    original = autograd_graph._engine_run_backward

    def run_backward(outputs: Any, *args: Any, **kwargs: Any) -> object:
        roots = [
            t.grad_fn
            for t in (outputs if isinstance(outputs, (list, tuple)) else (outputs,))
            if isinstance(t, torch.Tensor) and t.grad_fn is not None
        ]
        _hook_graph(roots)
        return original(outputs, *args, **kwargs)

    # torch.autograd.grad calls the name bound in torch.autograd's namespace
    namespace = vars(torch.autograd)
    saved = namespace["_engine_run_backward"]
    autograd_graph._engine_run_backward = run_backward  # type: ignore[assignment]
    namespace["_engine_run_backward"] = run_backward
    try:
        with fx_traceback.preserve_node_meta():
            yield
    finally:
        autograd_graph._engine_run_backward = original
        namespace["_engine_run_backward"] = saved


def _hook_graph(roots: list[Any]) -> None:
    from torch.fx import traceback as fx_traceback

    def prehook(seq: int) -> Callable[[Any], None]:
        def hook(grad_outputs: Any) -> None:
            fx_traceback.set_grad_fn_seq_nr(seq)
            fx_traceback._mark_autograd_backward()

        return hook

    def posthook(grad_inputs: Any, grad_outputs: Any) -> None:
        fx_traceback.reset_grad_fn_seq_nr()
        fx_traceback._reset_autograd_backward()

    seen: set[Any] = set()
    queue = [r for r in roots if r is not None]
    seen.update(queue)
    while queue:
        node = queue.pop()
        node.register_prehook(prehook(node._sequence_nr()))
        node.register_hook(posthook)
        for child, _ in node.next_functions:
            if child is not None and child not in seen:
                seen.add(child)
                queue.append(child)
