"""Loading uploaded user files as modules (torch-free, so data children start fast).

Loading a user file runs its top-level code, so outside tests this is only used inside the
sandbox child (`compiler.sandbox.child`).
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from compiler.errors import InvalidSpec, ModelError, file_system_hint

_SOURCE_DIR: dict[str, Path] = {}


def write_sources(files: dict[str, str], directory: Path) -> Path:
    """Write the uploaded files under `directory` (names must stay inside it); returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        target = (directory / name).resolve()
        if directory.resolve() not in target.parents:
            raise InvalidSpec(f"file name {name!r} escapes the job directory; use a plain name")
        if target.is_file() and target.read_text() == text:
            continue  # already there (the sandbox's source directory is read-only)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return directory


def load_user_module(
    files: dict[str, str], name: str, source_dir: Path | None = None
) -> ModuleType:
    """Import uploaded file `name` as a module (runs its code); source lines keep the file name."""
    if name not in files:
        raise InvalidSpec(
            f"the spec names {name!r} but it was not uploaded; upload it with the job"
        )
    source_dir = importable_sources(files, source_dir)
    module_name = "sam_user_" + Path(name).stem.replace("-", "_").replace(".", "_")
    spec = importlib.util.spec_from_file_location(module_name, source_dir / name)
    if spec is None or spec.loader is None:
        raise InvalidSpec(f"{name!r} is not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise user_code_error(f"importing {name}", exc) from exc
    return module


def importable_sources(files: dict[str, str], source_dir: Path | None = None) -> Path:
    """The job's source folder (a temporary one for in-process callers) with the uploaded files
    written and first on sys.path, so the model file may import its sibling files."""
    if source_dir is None:
        key = repr(sorted(files.items()))
        source_dir = _SOURCE_DIR.get(key) or Path(tempfile.mkdtemp(prefix="sam-src-"))
        _SOURCE_DIR[key] = source_dir
    write_sources(files, source_dir)
    if str(source_dir) not in sys.path:
        sys.path.insert(0, str(source_dir))
    return source_dir


def user_code_error(doing: str, exc: BaseException) -> ModelError:
    """A ModelError for an exception raised by user code; running out of memory says so."""
    text = str(exc)
    if isinstance(exc, MemoryError) or "can't allocate memory" in text or "out of memory" in text:
        message = (
            f"the model code ran out of memory while {doing} (its memory limit was hit); "
            "allocate less in the model file or make_batch, or raise the limit"
        )
    else:
        message = f"{doing} raised {type(exc).__name__}: {text}"
    message += file_system_hint(exc)
    frames = user_traceback(exc)
    where = _raising_call(exc)
    if where:
        message += f" (at {where})"
    elif frames and not _is_library_frame(_last_filename(exc)):
        message += f" (at {frames[-1]})"
    return ModelError(message, {"traceback": user_traceback(exc), "exception": type(exc).__name__})


def _raising_call(exc: BaseException) -> str | None:
    """'torch.roll at timm/models/swin_transformer.py:560 in forward, from model.py:11 in
    forward' when a library's line below the user's raised (None otherwise)."""
    import traceback

    from compiler.op_location import Frame, locate

    stack = traceback.extract_tb(exc.__traceback__)
    start = next((i for i, f in enumerate(stack) if f.name == "forward"), None)
    if start is None:
        return None
    frames = [Frame(f.filename, f.lineno or 0, f.name, f.line or "") for f in stack[start:]]
    where = locate(frames, None)
    return where.describe() if where is not None and where.user else None


def user_traceback(exc: BaseException, limit: int = 12) -> list[str]:
    """The innermost frames of `exc`'s traceback as 'file:line in function' strings; frames in
    the user's own files (not torch, numpy or the compiler) when there are any."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if not _is_library_frame(f.filename)]
    return [f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in (own or frames)[-limit:]]


def _last_filename(exc: BaseException) -> str:
    import traceback

    own = [
        f.filename
        for f in traceback.extract_tb(exc.__traceback__)
        if not _is_library_frame(f.filename)
    ]
    return own[-1] if own else "<none>"


def _is_library_frame(filename: str) -> bool:
    path = filename.replace("\\", "/")
    return (
        "site-packages/" in path
        or "/lib/python" in path
        or "/compiler/" in path
        or path.startswith("<")
    )


def load_batch_function(
    spec: dict[str, Any], files: dict[str, str], source_dir: Path | None = None
) -> Any:
    """The user's make_batch(step, batch_size) for data.source 'file'."""
    data = spec["data"]
    file_name = data.get("file") or spec["model"].get("file")
    if not file_name:
        raise InvalidSpec("data.source 'file' needs data.file (or a model.file holding make_batch)")
    module = load_user_module(files, file_name, source_dir)
    function = getattr(module, data.get("function") or "make_batch", None)
    if not callable(function):
        raise InvalidSpec(f"{file_name} defines no function {data.get('function')!r}")
    return function
