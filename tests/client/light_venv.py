"""A fresh venv holding only the light client (`pip install` of a copy of client/): shared by
tests/client/test_light_install.py and benchmarks/cli.py. No pytest here, so the benchmark can
import it."""

from __future__ import annotations

import shutil
import subprocess
import venv
from pathlib import Path

import client

CLIENT_SRC = Path(client.__file__).parent


def site_packages_mb(env_dir: Path) -> float:
    """Installed size under site-packages, in MB."""
    [site] = env_dir.glob("lib/python*/site-packages")
    return sum(f.stat().st_size for f in site.rglob("*") if f.is_file()) / 1e6


def build_light_venv(where: Path) -> tuple[Path, float]:
    """A fresh venv with only `pip install <copy of client/>`; its bin dir and the MB it added.

    The source is copied first so that the build leaves no build/ or egg-info in the checkout."""
    source = where / "client-src"
    shutil.copytree(CLIENT_SRC, source, ignore=shutil.ignore_patterns("__pycache__", "build"))
    env_dir = where / "light-venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    before = site_packages_mb(env_dir)
    subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", str(source)],
        check=True,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return env_dir / "bin", site_packages_mb(env_dir) - before
