"""The broker's names and settings, in one place: the Celery task names, the queues, the Celery
configuration, and the broker's reachability check.

The scheduler sends (`services/dispatch.py` writes outbox rows naming a task and a queue, the
loop hands them to `celery_sender` after the commit), the workers consume (`sam_worker/celery_app.py` takes its
app from `make_celery`, the tasks register under these names, `sam worker` picks the queues);
both import the names from here, so the scheduler needs nothing of the worker package. Celery is
imported only inside `make_celery`, so the API process's hot path stays free of it.

The broker only says "work is ready"; the database says what the work is. Tasks are idempotent and
every claim is a compare-and-set, so at-least-once delivery is safe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sam_server.config import Settings

if TYPE_CHECKING:
    from celery import Celery

COMPILE_TASK = "sam.compile"  # kwargs: job_id
RUN_TASK = "sam.run"  # kwargs: job_id, attempt
COMPILE_QUEUE = "compile"  # every compile server consumes it
WAFER_QUEUE_PREFIX = "wafer."
TASK_MODULES = ["sam_worker.tasks"]  # where the tasks above are defined (Celery's `include`)
# The embedded broker's transport: kombu's filesystem transport with atomic message files.
FILESYSTEM_TRANSPORT = "sam_worker.fsbroker:Transport"


def wafer_queue(wafer_id: str) -> str:
    """The Celery queue of one wafer's worker."""
    return f"{WAFER_QUEUE_PREFIX}{wafer_id}"


def celery_config(settings: Settings) -> dict[str, object]:
    """Celery settings for long tasks (see reference/reliability-performance.md)."""
    url = settings.resolved_broker_url
    conf: dict[str, object] = {
        "broker_url": url,
        "task_acks_late": True,  # a task is acknowledged when done, not when received
        "task_reject_on_worker_lost": True,  # a killed worker's task goes back to the queue
        "worker_prefetch_multiplier": 1,  # never hoard messages another worker could run
        "task_ignore_result": True,  # the database is the source of truth
        "task_default_queue": COMPILE_QUEUE,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,  # ride out a restarting Redis
        "worker_hijack_root_logger": False,
        "worker_send_task_events": False,
        "task_serializer": "json",
        "accept_content": ["json"],
        "include": TASK_MODULES,
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
        conf["broker_transport"] = FILESYSTEM_TRANSPORT
    else:
        # Above the longest run, so Redis never re-delivers a task that is still running.
        conf["broker_transport_options"] = {"visibility_timeout": 12 * 3600}
    return conf


def make_celery(settings: Settings) -> Celery:
    """A Celery app configured from `settings` (the workers' and the scheduler's sender's)."""
    from celery import Celery

    app = Celery("sam")
    app.conf.update(celery_config(settings))
    return app


# send(task, queue, payload): hands one message to the broker
Sender = Callable[[str, str, dict[str, Any]], None]


def celery_sender(settings: Settings) -> Sender:
    """`send(task, queue, payload)` over a Celery app configured from `settings`."""
    app = make_celery(settings)

    def send(task: str, queue: str, payload: Mapping[str, object]) -> None:
        app.send_task(
            task,
            kwargs=payload,
            queue=queue,
            retry=True,
            retry_policy={"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5},
        )

    return send


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
