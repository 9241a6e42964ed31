"""ASGI entry for multi-worker uvicorn (`sam server --workers N`): the app from the environment."""

from __future__ import annotations

from sam_server.app import create_app

app = create_app()
