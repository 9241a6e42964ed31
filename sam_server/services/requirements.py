"""A project's requirements.txt, checked at submit against what the workers have installed.

`unmet_requirements(text)` takes the file's text (wherever it came from), so a job whose
packages the workers lack is refused with their names instead of failing with an ImportError
at run time. The workers run the server's Python environment, so that environment's installed
distributions are "what the workers have".
"""

from __future__ import annotations

from importlib import metadata

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from sam_server.errors import InvalidSpec

REQUIREMENTS_FILE = "requirements.txt"


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def unmet_requirements(text: str) -> list[str]:
    """Every line of a requirements.txt that the workers cannot satisfy, each with why."""
    unmet: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            unmet.append(f"line {number} {line!r}: pip options are not supported")
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            unmet.append(f"line {number} {line!r}: not a requirement ({exc})")
            continue
        if req.marker is not None and not req.marker.evaluate():
            continue
        if req.url:
            unmet.append(f"line {number} {line!r}: URL requirements are not installed")
            continue
        version = _installed(canonicalize_name(req.name))
        if version is None:
            unmet.append(f"line {number} {line!r}: {req.name} is not installed on the workers")
        elif req.specifier and not req.specifier.contains(version, prereleases=True):
            unmet.append(f"line {number} {line!r}: the workers have {req.name} {version}")
    return unmet


def check_requirements(text: str) -> None:
    """InvalidSpec (422) naming every requirements.txt line the workers cannot satisfy."""
    unmet = unmet_requirements(text)
    if unmet:
        message = (
            "requirements.txt asks for packages the workers do not have: "
            + "; ".join(unmet)
            + " (use only installed packages, or ask your operator to install them)"
        )
        raise InvalidSpec(
            message, errors=[{"field": f"files.{REQUIREMENTS_FILE}", "message": message}]
        )
