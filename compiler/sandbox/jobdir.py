"""A sandbox's job directory and the command it runs: shared by the cold start (`runner`,
`stream`) and the pre-started one (`warm`), below both.

The scratch directory holds ctl/ (the task, read-only inside), src/ (the job's files, read-only)
and out/ (the one writable directory); the sandbox sees them at /job/ctl, /job/src and /job/out.
A job with a project (docs/projects.md) sees its project folder at /job/src instead, which is
also the working directory and on sys.path.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from compiler.sandbox import launcher


def make_scratch(workdir: Path | None) -> Path:
    """A host scratch directory with empty ctl/, src/ and out/ (the binds of a sandbox)."""
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="sam-sandbox-", dir=workdir))
    for name in ("ctl", "src", "out"):
        (scratch / name).mkdir()
    return scratch


def mounts(scratch: Path, project: Path | None = None) -> list[launcher.Mount]:
    """The job's directories as the sandbox sees them: its project folder (when it has one,
    else the files written to src/) read-only at /job/src."""
    return [
        launcher.Mount(scratch / "ctl", "/job/ctl"),
        launcher.Mount(project or scratch / "src", "/job/src"),
        launcher.Mount(scratch / "out", "/job/out", writable=True),
    ]


def link_project(project: Path, src: Path) -> None:
    """The project's files hard-linked into `src` (copied where the file system cannot link):
    for a sandbox started before its job was known, whose /job/src is already bound."""
    for folder, _dirs, names in os.walk(project):
        rel = Path(folder).relative_to(project)
        (src / rel).mkdir(parents=True, exist_ok=True)
        for name in names:
            origin, target = Path(folder, name), src / rel / name
            if os.path.islink(origin):
                continue  # the store builds no links; never follow one
            try:
                os.link(origin, target)
            except FileExistsError:
                continue
            except OSError:
                shutil.copyfile(origin, target)


DATASETS_ROOT = "/datasets"


def dataset_binds(datasets: dict[str, Path]) -> list[launcher.Mount]:
    """Data sets read-only at /datasets/NAME (names are checked plain at submit; again here)."""
    binds = []
    for name, host in sorted(datasets.items()):
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"data set name {name!r} is not a plain name")
        binds.append(launcher.Mount(Path(host), f"{DATASETS_ROOT}/{name}"))
    return binds


def child_argv(*extra: str) -> list[str]:
    """The command run inside the sandbox: `python -I -S -B -c CHILD_MAIN /job ...`.

    -I (isolated: no PYTHON* variable, no user site, no working directory or script directory on
    sys.path) and -S (no site.py: no .pth file runs, such as an editable install's import hook)
    leave sys.path to the standard library; CHILD_MAIN puts SAM's code in front of it and the
    environment's site-packages after it, the order site.py would give. -B: the sandbox cannot
    write bytecode anyway (the worker writes the child's own, `_child_bytecode`). -c, not -m:
    runpy and the importlib machinery it loads are a tenth of the start-up cost."""
    _child_bytecode()
    python = launcher.python_executable()
    return [python, "-I", "-S", "-B", "-c", child_main(), "/job", *extra]


@functools.cache
def child_main() -> str:
    """The program `python -c` runs in the sandbox: sys.path, then compiler.sandbox.child."""
    return (
        f"import sys; sys.path[:0] = ['/sam']; sys.path += {launcher.site_packages()!r}; "
        "import compiler.sandbox.child as c; c.run()"
    )


_CHILD_MODULES = ("__init__.py", "sandbox/__init__.py", "sandbox/child.py")


@functools.cache
def _child_bytecode() -> None:
    """Compile the modules every sandbox imports first (bound read-only at /sam/compiler) where
    their bytecode is missing or stale: otherwise each sandbox parses them from source again.
    Best effort: a read-only installation already has its bytecode, and the child still runs from
    source without it."""
    import py_compile

    for name in _CHILD_MODULES:
        source = launcher.COMPILER_DIR / name
        try:
            cached = Path(importlib.util.cache_from_source(str(source)))
            if cached.exists() and cached.stat().st_mtime >= source.stat().st_mtime:
                continue
            py_compile.compile(str(source), cfile=str(cached), doraise=True)
        except (OSError, py_compile.PyCompileError):
            continue
