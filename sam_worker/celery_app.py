"""The Celery application of this process: the configuration, task names and queues are
`sam_server.broker`'s (Redis, or the embedded filesystem transport when SAM_BROKER_URL is unset,
so `sam up` needs no Redis); the tasks themselves are in `sam_worker.tasks`.
"""

from __future__ import annotations

from functools import lru_cache

from celery import Celery

from sam_server.broker import make_celery
from sam_server.config import get_settings


@lru_cache(maxsize=1)
def get_celery() -> Celery:
    """The process-wide Celery app."""
    return make_celery(get_settings())


app = get_celery()
