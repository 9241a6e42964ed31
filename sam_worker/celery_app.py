"""The Celery application: long-task settings and the broker (Redis, or the embedded filesystem
transport when SAM_BROKER_URL is unset, so `sam up` needs no Redis).

The broker only says "work is ready"; the database says what the work is. Tasks are idempotent and
every claim is a compare-and-set, so at-least-once delivery is safe.
"""

from __future__ import annotations

from functools import lru_cache

from celery import Celery

from sam_server.config import Settings, get_settings
from sam_worker.fsbroker import TRANSPORT


def celery_config(settings: Settings) -> dict[str, object]:
    """Celery settings for long tasks (see reference/reliability-performance.md)."""
    url = settings.resolved_broker_url
    conf: dict[str, object] = {
        "broker_url": url,
        "task_acks_late": True,  # a task is acknowledged when done, not when received
        "task_reject_on_worker_lost": True,  # a killed worker's task goes back to the queue
        "worker_prefetch_multiplier": 1,  # never hoard messages another worker could run
        "task_ignore_result": True,  # the database is the source of truth
        "task_default_queue": "compile",
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,  # ride out a restarting Redis
        "worker_hijack_root_logger": False,
        "worker_send_task_events": False,
        "task_serializer": "json",
        "accept_content": ["json"],
    }
    if url.startswith("filesystem://"):
        folder = settings.broker_dir
        (folder / "queue").mkdir(parents=True, exist_ok=True)
        (folder / "processed").mkdir(parents=True, exist_ok=True)
        (folder / "control").mkdir(parents=True, exist_ok=True)
        conf["broker_transport_options"] = {
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "processed_folder": str(folder / "processed"),
            "control_folder": str(folder / "control"),  # else kombu writes ./control in the cwd
            "store_processed": False,
            "polling_interval": 0.05,
        }
        conf["broker_transport"] = TRANSPORT  # kombu's, with atomic message files
    else:
        # Above the longest run, so Redis never re-delivers a task that is still running.
        conf["broker_transport_options"] = {"visibility_timeout": 12 * 3600}
    return conf


def make_celery(settings: Settings) -> Celery:
    """A Celery app configured from `settings`, with SAM's tasks registered."""
    app = Celery("sam")
    app.conf.update(celery_config(settings))
    app.conf.include = ["sam_worker.tasks"]
    return app


@lru_cache(maxsize=1)
def get_celery() -> Celery:
    """The process-wide Celery app."""
    return make_celery(get_settings())


app = get_celery()
