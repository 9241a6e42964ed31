"""The embedded (filesystem) broker under a producer racing a polling consumer: every message
arrives whole, and the consumer never sees a file that is still being written."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from kombu import Connection

from sam_server.broker import (
    FILESYSTEM_TRANSPORT,
    RUN_TASK,
    celery_config,
    celery_sender,
    wafer_queue,
)
from sam_server.config import Settings

N, SIZE = 150, 512 * 1024  # big messages keep a writer busy long enough to be caught mid-write


def _connection(folder: Path) -> Connection:
    conf = celery_config(Settings(data_dir=folder))
    assert (
        conf["broker_url"] == "filesystem://" and conf["broker_transport"] == FILESYSTEM_TRANSPORT
    )
    return Connection(
        "filesystem://",
        transport=conf["broker_transport"],
        transport_options=conf["broker_transport_options"],
    )


def _produce(folder: str) -> None:
    with _connection(Path(folder)) as conn:
        queue = conn.SimpleQueue("race")
        for i in range(N):
            queue.put({"i": i, "blob": chr(ord("a") + i % 26) * SIZE})
        queue.close()


def test_a_polling_consumer_gets_every_message_whole_while_a_producer_writes(tmp_path: Path):
    with _connection(tmp_path) as conn:
        queue = conn.SimpleQueue("race")
        producer = mp.get_context("spawn").Process(target=_produce, args=(str(tmp_path),))
        producer.start()
        seen = []
        try:
            while len(seen) < N:
                message = queue.get(timeout=60)  # polls the folder as the workers do
                body = message.payload
                assert body["blob"] == chr(ord("a") + body["i"] % 26) * SIZE
                seen.append(body["i"])
                message.ack()
        finally:
            producer.join(60)
            queue.close()
    assert sorted(seen) == list(range(N))
    assert producer.exitcode == 0
    leftovers = list((tmp_path / "broker" / "queue").glob("*.part"))
    assert leftovers == []


def test_the_schedulers_sender_delivers_a_task_a_worker_of_that_queue_receives(tmp_path: Path):
    # The scheduler loop sends with sam_server.broker's sender (no worker import); a consumer of
    # the wafer's queue, configured as the workers are, gets the task by name with its kwargs.
    settings = Settings(data_dir=tmp_path)
    celery_sender(settings)(RUN_TASK, wafer_queue("w1"), {"job_id": "j1", "attempt": 2})
    with _connection(tmp_path) as conn:
        queue = conn.SimpleQueue(wafer_queue("w1"))
        try:
            message = queue.get(timeout=30)
            args, kwargs, _ = message.payload
            assert message.headers["task"] == RUN_TASK
            assert (args, kwargs) == ([], {"job_id": "j1", "attempt": 2})
            message.ack()
        finally:
            queue.close()
