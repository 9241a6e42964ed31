"""The image holds every package SAM installs: each top-level package of pyproject's
`packages.find` is copied by the Dockerfile (a real folder under its own name; a linked one, such
as `sam` -> client/sam, from the link's target), and the folders the sandbox binds exist there."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from compiler.sandbox import launcher

ROOT = Path(__file__).resolve().parents[2]


def _copies() -> dict[str, str]:
    """{destination under /opt/sam: source in the build context} of the Dockerfile's COPY lines."""
    found = re.findall(r"^COPY (\S+) \./(\S+)$", (ROOT / "Dockerfile").read_text(), re.M)
    return {dest.rstrip("/"): src.rstrip("/") for src, dest in found}


def _packages() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["packages"]["find"]["include"]
    return {p.rstrip("*") for p in patterns if (ROOT / p.rstrip("*")).is_dir()}


def test_the_dockerfile_copies_every_installed_package() -> None:
    copies = _copies()
    packages = _packages()
    assert {"sam_domain", "sam"} <= packages
    missing = sorted(p for p in packages if p not in copies)
    assert not missing, f"the Dockerfile does not copy {missing}"
    for name in packages:
        # COPY of a link copies the link, which dangles in the image: copy what it points to
        wanted = (ROOT / name).resolve().relative_to(ROOT).as_posix()
        assert copies[name] == wanted, f"COPY {copies[name]} ./{name}: copy {wanted} instead"


def test_the_sam_package_the_sandbox_binds_is_in_the_image() -> None:
    # `from sam import Runner` in a runner job's script: the sandbox binds this folder at /sam/sam
    bound = launcher.SAM_PACKAGE_DIR.relative_to(ROOT).as_posix()
    assert bound == "client/sam"
    copies = _copies()
    assert any(bound == src or bound.startswith(src + "/") for src in copies.values())
    assert (ROOT / bound / "__init__.py").is_file()
