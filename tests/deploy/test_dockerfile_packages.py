"""The image holds every package SAM installs: each top-level package of pyproject's
`packages.find` (the real folders, not links) is copied by the Dockerfile."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_dockerfile_copies_every_installed_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {p.rstrip("*") for p in patterns}
    real = {p for p in packages if (ROOT / p).is_dir() and not (ROOT / p).is_symlink()}
    copied = set(re.findall(r"^COPY (\w+) \./\1$", (ROOT / "Dockerfile").read_text(), re.M))
    assert "sam_domain" in real
    assert real <= copied, f"the Dockerfile does not copy {sorted(real - copied)}"
