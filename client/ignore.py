"""`.samignore`: what `sam submit` leaves out of a project, as git does with `.gitignore`.

A `.samignore` may sit in any folder of the project; its patterns are relative to that folder
and win over those of the folders above it (a deeper file has the last word, as in git). The
syntax is gitignore's, matched by the `pathspec` library: one pattern a line, `#` comments,
`\\#` for a literal `#`; a pattern with a `/` before its end is anchored to its file's folder,
one without matches a name at any depth below it; `*` and `?` do not cross `/`, `**` does
(`**/x`, `x/**`, `a/**/b`); a trailing `/` matches folders only; `!pattern` takes a path
back in, the last matching line wins, and nothing inside a left-out folder comes back (it is
not even read). Always left out unless a `!` line says otherwise: `.git/`, `.hg/`, `.svn/`,
`.venv/`, `__pycache__/`, `*.pyc`.
"""

from __future__ import annotations

from pathlib import Path

from pathspec import GitIgnoreSpec

IGNORE_FILE = ".samignore"
BUILT_IN = (".git/", ".hg/", ".svn/", ".venv/", "__pycache__/", "*.pyc")


class IgnoreRules:
    """The rules in force in one folder of the project: the built-in ones, then each
    `.samignore` from the project folder down to this one (`prefix`: the folder's path in the
    project, '' or ending in '/')."""

    def __init__(
        self, lines: list[str], *, parent: IgnoreRules | None = None, prefix: str = ""
    ) -> None:
        self.parent = parent
        self.prefix = prefix
        self.spec = GitIgnoreSpec.from_lines([*BUILT_IN, *lines] if parent is None else lines)

    @classmethod
    def for_project(cls, root: Path) -> IgnoreRules:
        """The project folder's rules: the built-in ones and its own `.samignore`."""
        return cls(_read(Path(root)))

    def below(self, folder: Path, prefix: str) -> IgnoreRules:
        """The rules inside `folder` (at `prefix` in the project): these, and its own
        `.samignore` when it has one."""
        lines = _read(folder)
        return IgnoreRules(lines, parent=self, prefix=prefix) if lines else self

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Whether `path` ('/'-separated, relative to the project) is left out."""
        rules: IgnoreRules | None = self
        while rules is not None:
            rel = path[len(rules.prefix) :] if path.startswith(rules.prefix) else None
            if rel:
                verdict = rules.spec.check_file(rel + "/" if is_dir else rel).include
                if verdict is not None:
                    return verdict
            rules = rules.parent
        return False


def _read(folder: Path) -> list[str]:
    """The lines of `folder`'s `.samignore` (none when it has none or it is no file)."""
    path = folder / IGNORE_FILE
    if not path.is_file():
        return []
    return path.read_text(encoding="utf-8", errors="replace").splitlines()
