"""The files of a project folder that `sam submit` sends (docs/projects.md).

Every file under the folder, binary or text, except what the `.samignore` files (one in any
folder, as git's `.gitignore`) and the built-in rules leave out (client.ignore). A symlink is
followed when it leads inside the folder and refused when it leads out; device files, FIFOs
and sockets are refused, and so is a name the server could not take (a backslash, a newline,
a NUL): each with a message naming the path and what to do.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from client.errors import JobSpecError
from client.ignore import IgnoreRules


class ProjectFile:
    """One file to send: its path in the project ('/'-separated) and where it is read from."""

    __slots__ = ("path", "local", "size")

    def __init__(self, path: str, local: Path, size: int) -> None:
        self.path = path
        self.local = local
        self.size = size


def _refuse(rel: str, why: str) -> JobSpecError:
    return JobSpecError(
        f"project file {rel}: {why}; list it in .samignore to leave it out "
        "(or `sam submit --no-project` to send only the files the job file names)"
    )


def list_project(root: Path) -> list[ProjectFile]:
    """The project's files under `root`, sorted by path."""
    base = Path(root).resolve()
    rules = IgnoreRules.for_project(base)
    found: list[ProjectFile] = []
    _walk(base, base, "", rules, found, {base})
    return sorted(found, key=lambda f: f.path)


def _walk(
    base: Path,
    folder: Path,
    prefix: str,
    rules: IgnoreRules,
    found: list[ProjectFile],
    visiting: set[Path],
) -> None:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        raise _refuse(
            prefix.rstrip("/") or ".", f"cannot read the folder ({exc.strerror})"
        ) from None
    for entry in entries:
        rel = prefix + entry.name
        if entry.name in (".", "..") or any(c in entry.name for c in "\\\n\r\x00"):
            raise _refuse(repr(rel), "the name has '..', a backslash or a line break")
        local = Path(entry.path)
        try:
            info = entry.stat(follow_symlinks=True)
        except OSError:  # a broken link
            if rules.ignored(rel, False):
                continue
            raise _refuse(rel, f"a symlink to {os.readlink(local)}, which does not exist") from None
        is_dir = stat.S_ISDIR(info.st_mode)
        if rules.ignored(rel, is_dir):
            continue
        if entry.is_symlink():
            target = local.resolve()
            if not target.is_relative_to(base):
                raise _refuse(rel, f"a symlink to {target}, outside the project folder {base}")
        if is_dir:
            real = local.resolve()
            if real in visiting:
                continue  # a symlink back up the tree: its files are sent once already
            inner = rules.below(real, rel + "/")
            _walk(base, real, rel + "/", inner, found, visiting | {real})
        elif stat.S_ISREG(info.st_mode):
            found.append(ProjectFile(rel, local, info.st_size))
        else:
            kind = (
                "a device file"
                if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                else ("a FIFO" if stat.S_ISFIFO(info.st_mode) else "a socket")
            )
            raise _refuse(rel, f"{kind}, not a regular file")


def human_bytes(n: int) -> str:
    """`n` bytes as B, KiB, MiB or GiB."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
