"""The web dashboard served at `/`: one HTML page, a hand-written script and a stylesheet,
all inside this package (nothing from a CDN, no build step, no node). The page signs in with a
SAM token and reads everything through the public REST API and its SSE streams."""

from __future__ import annotations

from sam_server.dashboard.routes import install

__all__ = ["install"]
