"""`.samignore`: what `sam submit` leaves out of a project, in .gitignore's syntax.

One pattern a line; blank lines and `#` comments are skipped (`\\#` is a literal `#`). A pattern
with a `/` before its end is relative to the project folder (a leading `/` too); one without
matches a name at any depth. `*` and `?` do not cross `/`, `[...]` is a class, `**` spans
folders (`**/x`, `x/**`, `a/**/b`). A trailing `/` matches folders only. `!pattern` takes a
path back in; the last matching line wins, and nothing inside an ignored folder comes back
(git's rule). Always left out: `.git/`, `.venv/`, `__pycache__/`, `*.pyc` (and `.hg/`, `.svn/`).
"""

from __future__ import annotations

import re
from pathlib import Path

IGNORE_FILE = ".samignore"
BUILT_IN = (".git/", ".hg/", ".svn/", ".venv/", "__pycache__/", "*.pyc")


class Rule:
    """One pattern line, compiled."""

    def __init__(self, line: str) -> None:
        self.negate = line.startswith("!")
        pattern = line[1:] if self.negate else line
        if pattern.startswith("\\"):
            pattern = pattern[1:]
        self.dir_only = pattern.endswith("/")
        pattern = pattern.rstrip("/")
        anchored = "/" in pattern
        pattern = pattern.lstrip("/")
        body = _translate(pattern)
        self.regex = re.compile(("^" if anchored else "^(?:.*/)?") + body + "$", re.DOTALL)

    def matches(self, path: str, is_dir: bool) -> bool:
        return (is_dir or not self.dir_only) and self.regex.match(path) is not None


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**", i):
            before_ok = i == 0 or pattern[i - 1] == "/"
            after = pattern[i + 2 : i + 3]
            if before_ok and after == "/":
                out.append("(?:.*/)?")
                i += 3
                continue
            if before_ok and after == "":
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end < 0:
                out.append(re.escape(c))
                i += 1
                continue
            inner = pattern[i + 1 : end]
            if inner[:1] in ("!", "^"):
                inner = "^" + inner[1:]
            out.append("[" + inner.replace("\\", "\\\\") + "]")
            i = end + 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


class IgnoreRules:
    """The built-in rules, then the project's `.samignore` lines, in order."""

    def __init__(self, lines: list[str]) -> None:
        self.rules = [Rule(line) for line in (*BUILT_IN, *lines)]

    @classmethod
    def for_project(cls, root: Path) -> IgnoreRules:
        path = Path(root) / IGNORE_FILE
        lines: list[str] = []
        if path.is_file():
            for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
                line = raw if raw.endswith("\\ ") else raw.rstrip()  # "\\ ": a kept space
                if line and not line.startswith("#"):
                    lines.append(line)
        return cls(lines)

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Whether `path` ('/'-separated, relative to the project) is left out."""
        verdict = False
        for rule in self.rules:
            if rule.negate == verdict and rule.matches(path, is_dir):
                verdict = not rule.negate
        return verdict
