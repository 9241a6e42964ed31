"""Relative links in Markdown files: where they point and whether that place exists."""

from __future__ import annotations

import re
from pathlib import Path

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_EXTERNAL = ("http://", "https://", "mailto:")


def links(text: str) -> list[str]:
    """Every link target of a Markdown text, outside code blocks and code spans."""
    prose = _CODE_SPAN.sub("", _FENCE.sub("", text))
    return _LINK.findall(prose)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return slug.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of every heading of a Markdown text (code blocks left out)."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*$", _FENCE.sub("", text), re.M)
    return {anchor(h) for h in headings}


def broken(md: Path) -> list[str]:
    """The relative links of `md` whose file, or whose heading in a Markdown file, is missing."""
    bad = []
    for target in links(md.read_text(encoding="utf-8")):
        if target.startswith(_EXTERNAL):
            continue
        path, _, fragment = target.partition("#")
        dest = (md.parent / path).resolve() if path else md.resolve()
        if not dest.exists():
            bad.append(f"{md.name}: {target} (no such file)")
        elif fragment and dest.suffix == ".md":
            if fragment not in anchors(dest.read_text(encoding="utf-8")):
                bad.append(f"{md.name}: {target} (no such heading)")
    return bad


def linked_files(md: Path) -> set[Path]:
    """The files that the relative links of `md` point at."""
    found = set()
    for target in links(md.read_text(encoding="utf-8")):
        path = target.partition("#")[0]
        if path and not target.startswith(_EXTERNAL):
            found.add((md.parent / path).resolve())
    return found
