"""Broker reachability, without importing Celery into the API process's hot path."""

from __future__ import annotations

from collections.abc import Callable

from sam_server.config import Settings


def broker_check_for(settings: Settings) -> Callable[[], str]:
    """A function that answers "ok" when the configured broker is reachable."""
    url = settings.resolved_broker_url
    if url.startswith("filesystem://"):
        folder = settings.broker_dir

        def check_dir() -> str:
            try:
                folder.mkdir(parents=True, exist_ok=True)
                return "ok"
            except OSError as exc:
                return f"error: {exc}"

        return check_dir
    if url.startswith(("redis://", "rediss://")):
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)

        def check_redis() -> str:
            try:
                client.ping()
                return "ok"
            except redis.RedisError as exc:
                return f"error: {type(exc).__name__}"

        return check_redis
    return lambda: "ok"
