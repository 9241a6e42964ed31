"""How the compiler's sandbox runs, as the settings tree's `sandbox` section hands it over."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SandboxOptions:
    """The sandbox's settings (sam_server.config.SandboxSettings says what each does)."""

    bwrap: str | None = None
    uid_base: int = 61000
    uid_count: int = 64
    spawner: bool = True
    warm: bool = True
    max_frame_bytes: int = 256 * 1024**2
    allow_shared_uid: bool = False
