"""Every relative link of the README and docs/ resolves, the README leads to every guide, and
benchmarks/README.md gives every benchmark its command."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.links import broken, linked_files, links

ROOT = Path(__file__).resolve().parents[2]
GUIDES = sorted((ROOT / "docs").glob("*.md"))
PAGES = [
    ROOT / "README.md",
    *GUIDES,
    ROOT / "benchmarks" / "README.md",
    ROOT / "traces" / "README.md",
]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken(page) == []


def test_every_guide_is_linked_from_the_readme() -> None:
    from_readme = linked_files(ROOT / "README.md")
    missing = [p.name for p in GUIDES if p.resolve() not in from_readme]
    assert missing == [], f"add these to README.md's 'Where to go next': {missing}"


def test_a_missing_file_or_heading_is_reported(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Some Title: here\n\n## Deploy (Compose)\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md) [ok](other.md#deploy-compose) [ok](#top) [ext](https://x.org/nope)\n"
        "`[code](gone.md)`\n\n```\n[fenced](gone.md)\n```\n\n# Top\n"
        "[bad](gone.md) ![bad](img/none.png) [bad](other.md#nowhere)\n"
    )
    assert broken(page) == [
        "page.md: gone.md (no such file)",
        "page.md: img/none.png (no such file)",
        "page.md: other.md#nowhere (no such heading)",
    ]
    assert "gone.md" in links("[a](gone.md)")


def test_every_benchmark_is_listed_with_its_command() -> None:
    table = (ROOT / "benchmarks" / "README.md").read_text()
    scripts = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py"))
    missing = [s for s in scripts if f"python benchmarks/{s}" not in table]
    assert missing == [], f"give these a row (figure, command) in benchmarks/README.md: {missing}"
