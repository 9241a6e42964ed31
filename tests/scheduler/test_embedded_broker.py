"""The embedded (filesystem) broker under a producer racing a polling consumer: every message
arrives whole, and the consumer never sees a file that is still being written."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from kombu import Connection

from sam_server.broker import FILESYSTEM_TRANSPORT, celery_config
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
